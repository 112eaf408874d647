/*
 * threads.c -- the multi-thread extension: cvm_create_procs_threads(worker, T) runs T CVM
 * threads per process (the master's own call to worker() is one of its T); TID tells them
 * apart across the job; cvm_barrier waits for all P*T threads.
 *
 *   threads -p P [-t T]
 *
 * Every thread takes a ticket under a lock and records (PID, TID) in the ticket's slot, and
 * increments a lock-protected counter ROUNDS times; barrier phases check that every thread
 * arrived. Prints "PASS threads ..." or "FAIL threads ..." (exit non-zero).
 */
#define PROGRAM "threads"
#include "check.h"

#define MAXT 8
#define ROUNDS 40

struct board {
    int next;
    int pid[64 * MAXT];
    int tid[64 * MAXT];
    long counter;
    int arrived[4];
};

static int T = 2;
static struct board *b;

static void worker(void)
{
    int P = cvm_num_procs, n = P * T, i, j, ph;

    cvm_lock(3);
    i = b->next++;
    cvm_unlock(3);
    CHECK(i < n, "ticket %d of %d threads", i, n);
    b->pid[i] = PID;
    b->tid[i] = TID;
    for (j = 0; j < ROUNDS; j++) {
        cvm_lock(4);
        b->counter++;
        cvm_unlock(4);
    }
    for (ph = 0; ph < 4; ph++) {
        cvm_lock(5);
        b->arrived[ph]++;
        cvm_unlock(5);
        cvm_barrier(0);
        CHECK(b->arrived[ph] == n, "phase %d: %d of %d threads arrived before the barrier", ph,
              b->arrived[ph], n);
    }
    cvm_barrier(0);
    if (TID == 0) {
        int per[64] = { 0 };
        CHECK(b->next == n, "%d tickets for %d threads", b->next, n);
        CHECK(b->counter == (long)n * ROUNDS, "counter %ld, expected %ld", b->counter, (long)n * ROUNDS);
        for (i = 0; i < n; i++) {
            CHECK(b->pid[i] >= 0 && b->pid[i] < P, "slot %d: PID %d", i, b->pid[i]);
            CHECK(b->tid[i] / CVM_MAX_THREADS == b->pid[i], "slot %d: TID %d on PID %d", i, b->tid[i], b->pid[i]);
            per[b->pid[i]]++;
            for (j = 0; j < i; j++) CHECK(b->tid[i] != b->tid[j], "slots %d and %d share TID %d", j, i, b->tid[i]);
        }
        for (i = 0; i < P; i++) CHECK(per[i] == T, "process %d ran %d threads, expected %d", i, per[i], T);
        printf("PASS threads procs=%d threads_per_proc=%d counter=%ld\n", P, T, b->counter);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    T = int_option(argc, argv, "-t", T);
    if (T < 1 || T > MAXT) {
        fprintf(stderr, "threads: -t must be 1..%d\n", MAXT);
        return 2;
    }
    startup_checked(argc, argv, 64);
    b = cvm_alloc((int)sizeof *b);
    CHECK(b != NULL, "cvm_alloc failed");
    CHECK(TID == 0, "the master's main thread has TID %d", TID);
    cvm_create_procs_threads(worker, T);
    worker();
    cvm_finish();
    return 0;
}
