/* The floors of `svm-bench sync`, measured in the same run as svm's locks and barriers.
 *
 *   floors mutex ITERS       pthread mutex lock+unlock by one thread of a process that
 *                            has started another (as every threaded program)  -> floor_us=
 *   floors mutex-single ITERS  the same in a process that never started a thread: glibc
 *                            then takes and gives back the mutex without atomic
 *                            instructions (__libc_single_threaded)          -> floor_us=
 *   floors barrier T ITERS   pthread barrier with T threads, per barrier   -> floor_us=
 *   floors futex ITERS       futex ping-pong between two processes, per round trip -> floor_us=
 *   floors tcp ITERS         TCP (loopback, TCP_NODELAY) 8-byte ping-pong between two
 *                            processes, per round trip                    -> floor_us=
 *
 * Part of svm-bench (compiled at run time with `cc -O2 -pthread`). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static pthread_barrier_t bar;
static long bar_iters;

static void *no_op_thread(void *arg) {
    return arg;
}

static void *bar_thread(void *arg) {
    (void)arg;
    for (long i = 0; i < bar_iters; i++)
        pthread_barrier_wait(&bar);
    return NULL;
}

static long futex_op(atomic_uint *addr, int op, unsigned val) {
    return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* Waits until *cell == want (futex, no spinning), then sets the other cell. */
static void futex_wait_for(atomic_uint *cell, unsigned want) {
    unsigned v;
    while ((v = atomic_load(cell)) != want)
        futex_op(cell, FUTEX_WAIT, v);
}

static void futex_set(atomic_uint *cell, unsigned v) {
    atomic_store(cell, v);
    futex_op(cell, FUTEX_WAKE, 1);
}

static int read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: floors mutex|mutex-single|futex|tcp ITERS | floors barrier THREADS ITERS\n");
        return 2;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "mutex") || !strcmp(mode, "mutex-single")) {
        long iters = atol(argv[2]);
        if (!strcmp(mode, "mutex")) {
            /* Once a process has started a thread, glibc's mutexes use atomic instructions
             * for good, even after the thread ended. */
            pthread_t th;
            if (pthread_create(&th, NULL, no_op_thread, NULL) != 0 || pthread_join(th, NULL) != 0)
                die("pthread_create");
        }
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        volatile long c = 0;
        double t = now_us();
        for (long i = 0; i < iters; i++) {
            pthread_mutex_lock(&m);
            c++;
            pthread_mutex_unlock(&m);
        }
        t = now_us() - t;
        if (c != iters)
            return 1;
        printf("floor_us=%.5f OK\n", t / iters);
        return 0;
    }
    if (!strcmp(mode, "barrier")) {
        if (argc < 4)
            return 2;
        int threads = atoi(argv[2]);
        bar_iters = atol(argv[3]);
        if (threads < 1 || threads > 64 || bar_iters < 1)
            return 2;
        pthread_barrier_init(&bar, NULL, (unsigned)threads);
        pthread_t th[64];
        for (int i = 1; i < threads; i++)
            pthread_create(&th[i], NULL, bar_thread, NULL);
        pthread_barrier_wait(&bar);
        double t = now_us();
        for (long i = 1; i < bar_iters; i++)
            pthread_barrier_wait(&bar);
        t = now_us() - t;
        for (int i = 1; i < threads; i++)
            pthread_join(th[i], NULL);
        printf("floor_us=%.4f OK\n", bar_iters > 1 ? t / (bar_iters - 1) : 0.0);
        return 0;
    }
    if (!strcmp(mode, "futex")) {
        long iters = atol(argv[2]);
        atomic_uint *cells = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (cells == MAP_FAILED)
            die("mmap");
        atomic_store(&cells[0], 0);
        atomic_store(&cells[1], 0);
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            for (long i = 1; i <= iters; i++) {
                futex_wait_for(&cells[0], (unsigned)i);
                futex_set(&cells[1], (unsigned)i);
            }
            _exit(0);
        }
        double t = now_us();
        for (long i = 1; i <= iters; i++) {
            futex_set(&cells[0], (unsigned)i);
            futex_wait_for(&cells[1], (unsigned)i);
        }
        t = now_us() - t;
        int st;
        waitpid(pid, &st, 0);
        printf("floor_us=%.4f OK\n", t / iters);
        return 0;
    }
    if (!strcmp(mode, "tcp")) {
        long iters = atol(argv[2]);
        int ls = socket(AF_INET, SOCK_STREAM, 0);
        if (ls < 0)
            die("socket");
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t al = sizeof a;
        if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) ||
            getsockname(ls, (struct sockaddr *)&a, &al))
            die("listen");
        int one = 1;
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(s, (struct sockaddr *)&a, sizeof a))
                die("connect");
            setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            uint64_t v;
            for (long i = 0; i < iters; i++) {
                if (read_full(s, &v, 8))
                    _exit(1);
                v++;
                if (write(s, &v, 8) != 8)
                    _exit(1);
            }
            _exit(0);
        }
        int s = accept(ls, NULL, NULL);
        if (s < 0)
            die("accept");
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        uint64_t v = 0;
        double t = now_us();
        for (long i = 0; i < iters; i++) {
            uint64_t w = v;
            if (write(s, &w, 8) != 8 || read_full(s, &w, 8) || w != v + 1)
                return 1;
            v = w;
        }
        t = now_us() - t;
        int st;
        waitpid(pid, &st, 0);
        printf("floor_us=%.4f OK\n", t / iters);
        return 0;
    }
    fprintf(stderr, "floors: unknown mode %s\n", mode);
    return 2;
}
