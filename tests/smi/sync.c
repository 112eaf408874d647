/* Lock/flush/barrier loops, trylock, NOCONSISTENCY, mutex locality, barrier ids, progress
 * counters, and an all-to-all with trylock and SMI_Memcpy. */
#include <string.h>
#include "check.h"

#define ROUNDS 30
#define BLOCK 256

int main(int argc, char **argv) {
    int rank, size, id, m, m2, b, loc, i, r, pc;
    smi_region_info_t info;
    volatile long *counter; /* 8-byte words: see docs/smi.md on sc-mw's diff granularity */
    char *a2a;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    SMI_Init_reginfo(&info, 4096, 0);
    OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (void **)&counter));
    OK(SMI_Mutex_init(&m));
    OK(SMI_Mutex_init_with_locality(&m2, size - 1));
    CHECK(m2 == m + 1, "mutex ids %d %d", m, m2);
    OK(SMI_Location_of_mutex(m2, &loc));
    CHECK(loc == size - 1, "location %d", loc);
    OK(SMI_BARRIER_INIT(&b, SCHULZ_BARRIER, 1));
    CHECK(b > 0, "barrier id %d", b);
    if (rank == 0) counter[0] = counter[1] = 0;
    SMI_Barrier();
    /* Lock loops: plain and NOCONSISTENCY ids, interleaved with flushes and barriers. */
    for (r = 0; r < ROUNDS; r++) {
        OK(SMI_Mutex_lock(m));
        counter[0]++;
        OK(SMI_Mutex_unlock(m));
        OK(SMI_Mutex_lock(m2 | NOCONSISTENCY));
        counter[1] += 2;
        OK(SMI_Flush_write(SMI_FLUSH_ALL));
        OK(SMI_Mutex_unlock(m2 | NOCONSISTENCY));
        if (r % 10 == 0) OK(SMI_BARRIER(b));
    }
    SMI_Barrier();
    OK(SMI_Flush_read(SMI_FLUSH_ALL));
    CHECK(counter[0] == size * ROUNDS && counter[1] == 2 * size * ROUNDS, "counters %ld %ld", counter[0], counter[1]);
    SMI_Barrier();
    /* Trylock: someone holds it, nobody else gets it. */
    if (rank == 0) OK(SMI_Mutex_lock(m));
    SMI_Barrier();
    if (rank != 0) {
        int got = -1;
        OK(SMI_Mutex_trylock(m, &got));
        CHECK(got == 0, "trylock got a held lock");
    }
    SMI_Barrier();
    if (rank == 0) {
        int got = -1;
        OK(SMI_Mutex_unlock(m));
        OK(SMI_Mutex_trylock(m, &got));
        CHECK(got == 1, "trylock of a free lock failed");
        OK(SMI_Mutex_unlock(m));
        OK(SMI_Mutex_unlock(m)); /* as in SMI: unlocking a free mutex changes nothing */
    }
    CHECK(SMI_Mutex_lock(1000) == SMI_ERR_PARAM, "unknown mutex");
    CHECK(SMI_BARRIER(77) == SMI_ERR_PARAM, "unknown barrier");
    /* Progress counters: a ring of producers and consumers. */
    OK(SMI_Init_PC(&pc));
    for (i = 1; i <= 5; i++) {
        counter[2 + rank] = i * 10 + rank; /* each process its own word */
        OK(SMI_Increment_PC(pc, 1));
        OK(SMI_Wait_individual_PC(pc, (rank + 1) % size, i));
        CHECK(counter[2 + (rank + 1) % size] >= i * 10, "PC acquire: %ld", counter[2 + (rank + 1) % size]);
        OK(SMI_Wait_collective_PC(pc, i));
        SMI_Barrier();
    }
    {
        int v = -1;
        OK(SMI_Get_PC(pc, SMI_OWNPC, &v));
        CHECK(v == 5, "own PC %d", v);
        OK(SMI_Reset_PC(pc));
        OK(SMI_Get_PC(pc, (rank + 1) % size, &v));
        CHECK(v == 0, "PC after reset %d", v);
    }
    /* All-to-all: each process copies a block to every other's slot, one writer per target at
     * a time (trylock, else wait with lock). */
    SMI_Init_reginfo(&info, size * size * BLOCK, 0);
    OK(SMI_Create_shreg(SMI_SHM_BLOCKED, &info, &id, (void **)&a2a));
    {
        int t, *locks = malloc(size * sizeof(int));
        char mine[BLOCK];
        for (t = 0; t < size; t++) OK(SMI_Mutex_init(&locks[t]));
        for (t = 0; t < size; t++) {
            int target = (rank + t) % size, got = 0;
            memset(mine, 'A' + rank, BLOCK);
            OK(SMI_Mutex_trylock(locks[target], &got));
            if (!got) OK(SMI_Mutex_lock(locks[target]));
            OK(SMI_Memcpy(a2a + (target * size + rank) * BLOCK, mine, BLOCK, SMI_MEMCPY_LP_RS));
            OK(SMI_Mutex_unlock(locks[target]));
        }
        SMI_Barrier();
        for (t = 0; t < size; t++) {
            char got[BLOCK];
            OK(SMI_Memcpy(got, a2a + (rank * size + t) * BLOCK, BLOCK, SMI_MEMCPY_NOBARRIER));
            CHECK(got[0] == 'A' + t && got[BLOCK - 1] == 'A' + t, "a2a block from %d: %c", t, got[0]);
        }
        free(locks);
    }
    OK(SMI_Mutex_destroy(m));
    CHECK(SMI_Mutex_lock(m) == SMI_ERR_PARAM, "destroyed mutex");
    OK(SMI_BARRIER_DESTROY(b));
    OK(SMI_Finalize());
    if (rank == 0) printf("PASS sync\n");
    return 0;
}
