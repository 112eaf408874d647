/* Exercises deck.h under `svmrun -n 2`: name server (fetch before bind), a mailbox passed in a
 * message, typed pack/unpack, nested messages, errors, threads + semaphores, groups. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "deck.h"

#define CHECK(x)                                                                           \
    do {                                                                                   \
        int r_ = (x);                                                                      \
        if (r_ != DECK_OK) {                                                               \
            fprintf(stderr, "%s:%d: %s = %d (%s)\n", __FILE__, __LINE__, #x, r_,           \
                    deck_strerror());                                                      \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define EXPECT(c)                                                                          \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c);               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define THREADS 4
#define PER_THREAD 100

static deck_mbox_t server;
static deck_sema_t done_sema;

static void *poster(void *arg) {
    int t = (int)(long)arg, i;
    for (i = 0; i < PER_THREAD; i++) {
        deck_msg_t *m;
        CHECK(deck_msg_create(&m, 64));
        CHECK(deck_msg_pack_int32(m, -1)); /* marks a thread message */
        CHECK(deck_msg_pack_int32(m, t));
        CHECK(deck_msg_pack_int32(m, i));
        CHECK(deck_mbox_post(&server, m));
        CHECK(deck_msg_destroy(m));
    }
    deck_sema_post(&done_sema);
    return NULL;
}

int main(int argc, char **argv) {
    int me, n, i;
    deck_msg_t *m, *inner;
    CHECK(deck_init(&argc, &argv));
    me = deck_node();
    n = deck_nodes();
    EXPECT(n == 2 && (me == 0 || me == 1));

    /* Messages: overflow, type mismatch, end of message. */
    CHECK(deck_msg_create(&m, 4));
    EXPECT(deck_msg_pack_int64(m, 1) == DECK_EOVERFLOW);
    CHECK(deck_msg_pack_uint32(m, 0) == DECK_OK ? DECK_EOVERFLOW : DECK_OK); /* 1+4 > 4 */
    CHECK(deck_msg_destroy(m));
    CHECK(deck_msg_create(&m, 64));
    CHECK(deck_msg_pack_double(m, 2.5));
    EXPECT(deck_msg_unpack_int32(m, &i) == DECK_ETYPE);
    {
        double d;
        CHECK(deck_msg_unpack_double(m, &d));
        EXPECT(d == 2.5);
        EXPECT(deck_msg_unpack_double(m, &d) == DECK_EEND);
        CHECK(deck_msg_reset(m));
        CHECK(deck_msg_unpack_double(m, &d));
    }
    CHECK(deck_msg_destroy(m));
    EXPECT(deck_mbox_post(NULL, NULL) == DECK_EINVAL);

    if (me == 0) {
        deck_mbox_t reply;
        int32_t v, kind, seen[THREADS];
        char buf[16];
        size_t len;
        double d;
        deck_thread_sleep(300000); /* node 1's fetch must wait for this bind */
        CHECK(deck_mbox_create(&server, "server"));
        CHECK(deck_mbox_retrv(&server, &m));
        CHECK(deck_msg_unpack_int32(m, &kind));
        EXPECT(kind == 0);
        CHECK(deck_msg_unpack_mbox(m, &reply));
        CHECK(deck_msg_unpack_int32(m, &v));
        CHECK(deck_msg_unpack(m, buf, sizeof buf, &len));
        EXPECT(len == 5 && memcmp(buf, "hello", 5) == 0);
        CHECK(deck_msg_unpack_msg(m, &inner));
        CHECK(deck_msg_unpack_double(inner, &d));
        EXPECT(d == 0.25);
        CHECK(deck_msg_destroy(inner));
        CHECK(deck_msg_destroy(m));
        CHECK(deck_msg_create(&m, 16));
        CHECK(deck_msg_pack_int32(m, v * 2));
        CHECK(deck_mbox_post(&reply, m));
        CHECK(deck_msg_destroy(m));
        for (i = 0; i < THREADS; i++) seen[i] = 0;
        for (i = 0; i < THREADS * PER_THREAD; i++) {
            int32_t t, k;
            CHECK(deck_mbox_tretrv(&server, &m, 20000));
            CHECK(deck_msg_unpack_int32(m, &kind));
            EXPECT(kind == -1);
            CHECK(deck_msg_unpack_int32(m, &t));
            CHECK(deck_msg_unpack_int32(m, &k));
            EXPECT(t >= 0 && t < THREADS && seen[t] == k);
            seen[t]++;
            CHECK(deck_msg_destroy(m));
        }
        EXPECT(deck_mbox_tryretrv(&server, &m) == DECK_EAGAIN);
        EXPECT(deck_mbox_tretrv(&server, &m, 50) == DECK_ETIMEDOUT);
        CHECK(deck_mbox_destroy(&server));
    } else {
        deck_mbox_t mine;
        int32_t v;
        deck_thread_t th;
        CHECK(deck_mbox_fetch(&server, "server"));
        EXPECT(server.node == 0);
        CHECK(deck_mbox_create(&mine, NULL));
        CHECK(deck_msg_create(&m, 256));
        CHECK(deck_msg_pack_int32(m, 0));
        CHECK(deck_msg_pack_mbox(m, &mine));
        CHECK(deck_msg_pack_int32(m, 21));
        CHECK(deck_msg_pack(m, "hello", 5));
        CHECK(deck_msg_create(&inner, 16));
        CHECK(deck_msg_pack_double(inner, 0.25));
        CHECK(deck_msg_pack_msg(m, inner));
        CHECK(deck_msg_destroy(inner));
        CHECK(deck_mbox_post(&server, m));
        CHECK(deck_msg_destroy(m));
        CHECK(deck_mbox_retrv(&mine, &m));
        CHECK(deck_msg_unpack_int32(m, &v));
        EXPECT(v == 42);
        CHECK(deck_msg_destroy(m));
        CHECK(deck_sema_init(&done_sema, 0));
        for (i = 0; i < THREADS; i++) CHECK(deck_thread_create(&th, poster, (void *)(long)i));
        for (i = 0; i < THREADS; i++) CHECK(deck_sema_wait(&done_sema));
        EXPECT(deck_sema_trywait(&done_sema) == DECK_EAGAIN);
        CHECK(deck_sema_destroy(&done_sema));
        CHECK(deck_mbox_destroy(&mine));
    }

    /* Groups. */
    {
        double sum = 0;
        deck_msg_t *all[2];
        int32_t x;
        CHECK(deck_msg_create(&m, 16));
        if (me == 1) CHECK(deck_msg_pack_int32(m, 99));
        CHECK(deck_bcast(1, m));
        CHECK(deck_msg_unpack_int32(m, &x));
        EXPECT(x == 99);
        CHECK(deck_msg_destroy(m));
        CHECK(deck_reduce_double(0, me + 1.0, DECK_SUM, &sum));
        if (me == 0) EXPECT(sum == 3.0);
        CHECK(deck_msg_create(&m, 16));
        CHECK(deck_msg_pack_int32(m, 10 + me));
        CHECK(deck_gather(1, m, all));
        if (me == 1) {
            for (i = 0; i < 2; i++) {
                CHECK(deck_msg_unpack_int32(all[i], &x));
                EXPECT(x == 10 + i);
                CHECK(deck_msg_destroy(all[i]));
            }
        }
        CHECK(deck_msg_destroy(m));
        CHECK(deck_barrier());
    }
    printf("DECK C OK node %d of %d\n", me, n);
    CHECK(deck_done());
    EXPECT(deck_node() == DECK_ENOINIT);
    return 0;
}
