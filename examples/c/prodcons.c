/* prodcons: a producer and consumers share a bounded ring buffer in a region, coordinated by
 * job-wide semaphores (free slots, filled slots) and a lock on the consumers' index. Node 0
 * produces ITEMS numbers; every other node consumes (on one node, a second thread does). Each
 * consumer adds up what it takes; the totals must add up to 1 + 2 + ... + ITEMS.
 *   svmrun -n 4 ./prodcons 2000   -> prodcons items=2000 sum=2001000 expected=2001000 OK */
#include <pthread.h>
#include "check.h"

#define CAP 16
#define SEM_FREE 1
#define SEM_FULL 2
#define LOCK_TAIL 3
#define LOCK_SUM 4

struct ring {
    long slot[CAP];
    long tail;     /* next slot to take (under LOCK_TAIL) */
    long sum;      /* consumers' total (under LOCK_SUM) */
    long finished; /* consumers done (under LOCK_SUM) */
};

static struct ring *q;

static void *consume(void *arg) {
    (void)arg;
    long mine = 0;
    for (;;) {
        CHECK(svm_sem_wait(SEM_FULL));
        CHECK(svm_lock(LOCK_TAIL));
        long v = q->slot[q->tail % CAP];
        q->tail++;
        CHECK(svm_unlock(LOCK_TAIL));
        CHECK(svm_sem_post(SEM_FREE));
        if (v == 0)
            break; /* end marker: one per consumer */
        mine += v;
    }
    CHECK(svm_lock(LOCK_SUM));
    q->sum += mine;
    q->finished++;
    CHECK(svm_unlock(LOCK_SUM));
    return NULL;
}

int main(int argc, char **argv) {
    long items = argc > 1 ? atol(argv[1]) : 1000;
    int me, nodes;
    svm_region_t r;
    CHECK(svm_init());
    CHECK(svm_node_id(&me));
    CHECK(svm_nodes(&nodes));
    CHECK(svm_region_create_named(sizeof(struct ring), "sc-sw", NULL, &r));
    CHECK(svm_region_addr(r, (void **)&q));
    CHECK(svm_barrier()); /* every node has the region before anyone uses it */
    int consumers = nodes > 1 ? nodes - 1 : 1;
    if (me == 0) {
        pthread_t t;
        if (nodes == 1 && pthread_create(&t, NULL, consume, NULL) != 0) {
            fprintf(stderr, "FAIL pthread_create\n");
            return 1;
        }
        for (int i = 0; i < CAP; i++)
            CHECK(svm_sem_post(SEM_FREE));
        for (long i = 1; i <= items + consumers; i++) {
            CHECK(svm_sem_wait(SEM_FREE));
            q->slot[(i - 1) % CAP] = i <= items ? i : 0;
            CHECK(svm_sem_post(SEM_FULL));
        }
        if (nodes == 1)
            pthread_join(t, NULL);
    } else {
        consume(NULL);
    }
    CHECK(svm_barrier());
    long want = items * (items + 1) / 2;
    int ok = q->sum == want && q->finished == consumers;
    if (me == 0)
        printf("prodcons items=%ld consumers=%d sum=%ld expected=%ld %s\n", items, consumers,
               q->sum, want, ok ? "OK" : "FAIL");
    CHECK(svm_barrier());
    CHECK(svm_region_destroy(r));
    CHECK(svm_finish());
    return ok ? 0 : 1;
}
