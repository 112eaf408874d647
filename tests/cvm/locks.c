/*
 * locks.c -- lock-protected counters and lock-passed data.
 *
 *   locks -p P [-r ROUNDS]
 *
 * 1. Counters: every process increments counters 0..NC-1 ROUNDS times each, counter c under
 *    lock ids[c] (ids up to CVM_MAX_LOCKS-1); a second word per counter checks mutual
 *    exclusion (inside the critical section it must be 0, it is set to 1 and back).
 * 2. Token ring under one lock, without barriers: process p waits (lock, read, unlock) until
 *    turn == p, appends its id to a shared log and passes the turn on; what was written under
 *    the lock must be seen by the next holder (lazy release consistency).
 * After a barrier the master checks every counter == P*ROUNDS and the log. Prints
 * "PASS locks ..." or "FAIL locks ..." (exit non-zero).
 */
#define PROGRAM "locks"
#include "check.h"

#define NC 4
static const int ids[NC] = { 0, 1, 777, CVM_MAX_LOCKS - 1 };
#define RING_LOCK 5
#define LAPS 3

struct counters {
    long value[NC];
    char pad1[4096];  /* counters and flags on different pages than the ring */
    long inside[NC];
    char pad2[4096];
    int turn;
    int log_len;
    int log[64 * LAPS];
};

static int rounds = 50;
static struct counters *C;

static void worker(void)
{
    int p = PID, P = cvm_num_procs, r, c, lap;

    for (r = 0; r < rounds; r++) {
        for (c = 0; c < NC; c++) {
            cvm_lock(ids[c]);
            CHECK(C->inside[c] == 0, "two holders of lock %d", ids[c]);
            C->inside[c] = 1;
            C->value[c]++;
            C->inside[c] = 0;
            cvm_unlock(ids[c]);
        }
    }

    for (lap = 0; lap < LAPS; lap++) {
        for (;;) {
            int mine;
            cvm_lock(RING_LOCK);
            mine = C->turn == lap * P + p;
            if (mine) {
                CHECK(C->log_len == lap * P + p, "log length %d at turn %d", C->log_len, C->turn);
                C->log[C->log_len++] = p;
                C->turn++;
            }
            cvm_unlock(RING_LOCK);
            if (mine) break;
        }
    }
    cvm_barrier(0);

    if (p == 0) {
        int i;
        for (c = 0; c < NC; c++)
            CHECK(C->value[c] == (long)P * rounds, "counter %d (lock %d) = %ld, expected %ld", c,
                  ids[c], C->value[c], (long)P * rounds);
        CHECK(C->log_len == P * LAPS, "log length %d", C->log_len);
        for (i = 0; i < P * LAPS; i++) CHECK(C->log[i] == i % P, "log[%d]=%d", i, C->log[i]);
        printf("PASS locks procs=%d rounds=%d counters=%ld\n", P, rounds, C->value[0]);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    rounds = int_option(argc, argv, "-r", rounds);
    startup_checked(argc, argv, 64);
    C = cvm_alloc((int)sizeof *C);
    CHECK(C != NULL, "cvm_alloc failed");
    cvm_create_procs(worker);
    worker();
    cvm_finish();
    return 0;
}
