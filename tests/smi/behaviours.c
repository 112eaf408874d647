/* SMI behaviours that existing programs rely on (docs/smi.md, "Behaviour of SMI kept"):
 * FRAGMENTED fills the caller's array, UNDIVIDED non-owners may pass size 0, the holder of a
 * mutex may lock it again, SMI_SIGNAL_ANY | rank addresses rank, a scheduled loop starts a new
 * run after SMI_LOOP_READY, a flag polled without any SMI call sees the other process's store,
 * SMI_SHM_REGISTER exports a malloc'ed buffer, and a process may export 1024 LOCAL regions. */
#include <string.h>
#include <unistd.h>
#include "check.h"

#define RUNS 4
#define LO 3
#define HI 203

int main(int argc, char **argv) {
    int rank, size, page, id, i, r, got;
    smi_region_info_t info;
    char *frag[16];
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    OK(SMI_Page_size(&page));
    CHECK(size <= 16, "at most 16 processes");

    /* FRAGMENTED: frag[i] is process i's fragment; every process writes a slice of each. */
    for (i = 0; i < size; i++) frag[i] = NULL;
    SMI_Init_reginfo(&info, size * 2 * page, 0, rank, SMI_ADPT_DEFAULT, 0, 0, NULL);
    OK(SMI_Create_shreg(SMI_SHM_FRAGMENTED, &info, &id, (void **)frag));
    for (i = 0; i < size; i++) {
        CHECK(frag[i] != NULL, "fragment %d has no address", i);
        if (i > 0) CHECK(frag[i] != frag[i - 1], "fragments %d and %d coincide", i - 1, i);
        memset(frag[i] + rank * 64, 'A' + rank, 64);
    }
    SMI_Barrier();
    for (i = 0; i < size; i++)
        for (r = 0; r < size; r++) CHECK(frag[i][r * 64 + 63] == 'A' + r, "fragment %d slice %d", i, r);
    {
        smi_rlayout_t *l;
        OK(SMI_Region_layout(id, &l));
        CHECK((int)l->nsegments == size, "layout of a fragmented region: %d segments", (int)l->nsegments);
        for (i = 0; i < size; i++) CHECK(l->seg_machine[i] == i && l->seg_adr[i] == frag[i], "segment %d", i);
    }
    {
        int owner = 0;
        OK(SMI_Query(SMI_Q_SMI_REGION_OWNER, id, &owner));
        CHECK(owner == (size > 1 ? -1 : 0), "owner of a fragmented region: %d", owner);
    }
    OK(SMI_Free_shreg(id));
    {
        int v = 5;
        OK(SMI_Query(SMI_Q_SMI_REGION_CONNECTED, id, &v));
        CHECK(v == 0, "a freed region is not connected");
    }
    {
        char name[2];
        size_t len = sizeof name;
        CHECK(SMI_Get_node_name(name, &len) == SMI_ERR_OTHER, "a host name that does not fit");
    }

    /* UNDIVIDED: only the owner gives the size. */
    {
        char *p;
        int owner = size - 1;
        SMI_Init_reginfo(&info, rank == owner ? 5 * page + 3 : 0, 0, owner, SMI_ADPT_DEFAULT, 0, 0, NULL);
        OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED | SMI_SHM_NONFIXED, &info, &id, (void **)&p));
        {
            long sz = 0;
            OK(SMI_Query(SMI_Q_SMI_REGION_SIZE, id, &sz));
            CHECK(sz >= 5 * page + 3, "non-owner size %ld", sz);
        }
        if (rank == owner) p[5 * page + 2] = 9;
        SMI_Barrier();
        CHECK(p[5 * page + 2] == 9, "owner's last byte");
        OK(SMI_Free_shreg(id));
    }

    /* Mutexes: the holder locks again at once; the first unlock releases. */
    {
        int m, *count;
        SMI_Init_reginfo(&info, page, 0, 0, SMI_ADPT_DEFAULT, 0, 0, NULL);
        OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (void **)&count));
        OK(SMI_MUTEX_INIT(&m, BL_MUTEX, -1));
        for (i = 0; i < 20; i++) {
            OK(SMI_Mutex_lock(m));
            OK(SMI_Mutex_lock(m));
            OK(SMI_Mutex_trylock(m, &got));
            CHECK(got == 1, "trylock by the holder");
            (*count)++;
            OK(SMI_Mutex_unlock(m));
            OK(SMI_Mutex_unlock(m));
        }
        SMI_Barrier();
        CHECK(*count == 20 * size, "count %d", *count);
        OK(SMI_Mutex_destroy(m));
        OK(SMI_Free_shreg(id));
    }

    /* Progress counters: NOCONSISTENCY may be OR-ed into the id; SMI_OWNPC as the value waits
     * until the others have come as far as this process. */
    {
        int pc, v = -1;
        OK(SMI_Init_PC(&pc));
        OK(SMI_Increment_PC(pc | NOCONSISTENCY, 2));
        OK(SMI_Wait_individual_PC(pc, (rank + 1) % size, SMI_OWNPC));
        OK(SMI_Get_PC(pc | NOCONSISTENCY, (rank + 1) % size, &v));
        CHECK(v == 2, "the next process's counter: %d", v);
        OK(SMI_Wait_collective_PC(pc, SMI_OWNPC));
        CHECK(SMI_Wait_collective_PC(pc, 3) == SMI_ERR_PARAM, "waiting for more than one's own progress");
        SMI_Barrier();
    }

    /* Signals: the SMI_SIGNAL_ANY bit is stripped from a rank. */
    if (size > 1) {
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        OK(SMI_Signal_send(next | SMI_SIGNAL_ANY));
        OK(SMI_Signal_wait(prev | SMI_SIGNAL_ANY));
        OK(SMI_Signal_send(next | SMI_SIGNAL_ANY));
        OK(SMI_Signal_wait(SMI_SIGNAL_ANY));
        SMI_Barrier();
        if (rank == 0) OK(SMI_Signal_send(SMI_SIGNAL_BCAST | SMI_SIGNAL_ANY));
        else OK(SMI_Signal_wait(0 | SMI_SIGNAL_ANY));
        CHECK(SMI_Signal_send(size | SMI_SIGNAL_ANY) == SMI_ERR_PARAM, "bad rank");
    }

    /* Loop scheduling: one loop id, RUNS runs; each index exactly once per run. */
    {
        int loop, st, lo, hi, *hits, modes[3] = {SMI_PART_BLOCKED, SMI_PART_CYCLIC, SMI_PART_ADAPTED_BLOCKED}, mi;
        SMI_Init_reginfo(&info, (HI + 1) * sizeof(int) * RUNS, 0, 0, SMI_ADPT_DEFAULT, 0, 0, NULL);
        OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (void **)&hits));
        for (mi = 0; mi < 3; mi++) {
            int lock;
            OK(SMI_MUTEX_INIT(&lock, BL_MUTEX, -1));
            if (rank == 0) memset(hits, 0, (HI + 1) * sizeof(int) * RUNS);
            SMI_Barrier();
            OK(SMI_Loop_init(&loop, LO, HI, modes[mi]));
            OK(SMI_Set_loop_param(loop, SMI_NO_CHANGE, 3, 2, 17, 9));
            for (r = 0; r < RUNS; r++) {
                int step = modes[mi] == SMI_PART_CYCLIC ? size : 1;
                do {
                    OK(SMI_Get_iterations(loop, &st, &lo, &hi));
                    CHECK(st == SMI_LOOP_READY || lo <= hi, "status %d with range %d..%d", st, lo, hi);
                    OK(SMI_Mutex_lock(lock));
                    for (i = lo; i <= hi; i += step) hits[r * (HI + 1) + i]++;
                    OK(SMI_Mutex_unlock(lock));
                } while (st != SMI_LOOP_READY);
            }
            SMI_Barrier();
            for (r = 0; r < RUNS; r++)
                for (i = 0; i <= HI; i++)
                    CHECK(hits[r * (HI + 1) + i] == (i >= LO), "mode %d run %d index %d handed out %d times", modes[mi], r, i,
                          hits[r * (HI + 1) + i]);
            OK(SMI_Loop_free(loop));
            SMI_Barrier();
        }
        OK(SMI_Free_shreg(id));
    }

    /* Old loop splitting as SMI: REGULAR gives (n / nprocs) indices each, the last process the
     * rest; OWNER counts byte 0 of the region as index `lower`. */
    {
        int sp, lo = 10, hi = 10 + 4 * size + 2, llo, lhi, bid;
        double *d;
        OK(SMI_Loop_split_init(&sp));
        OK(SMI_Loop_index_range(sp, &lo, &hi, SMI_LOOP_SET_GLOBAL));
        OK(SMI_Determine_loop_splitting(sp, SMI_SPLIT_REGULAR, 0, 0));
        OK(SMI_Loop_index_range(sp, &llo, &lhi, SMI_LOOP_GET_LOCAL));
        {
            int k = (hi - lo + 1) / size;
            CHECK(llo == 10 + k * rank && lhi == (rank == size - 1 ? hi : 10 + k * rank + k - 1), "regular split %d..%d", llo, lhi);
        }
        SMI_Init_reginfo(&info, size * page, 0, 0, SMI_ADPT_DEFAULT, 0, 0, NULL);
        OK(SMI_Create_shreg(SMI_SHM_BLOCKED, &info, &bid, (void **)&d));
        lo = 100;
        hi = 100 + size * page / 8 - 1;
        OK(SMI_Loop_index_range(sp, &lo, &hi, SMI_LOOP_SET_GLOBAL));
        OK(SMI_Determine_loop_splitting(sp, SMI_SPLIT_OWNER, sizeof(double), bid));
        OK(SMI_Loop_index_range(sp, &llo, &lhi, SMI_LOOP_GET_LOCAL));
        CHECK(llo == 100 + rank * page / 8 && lhi == llo + page / 8 - 1, "owner split %d..%d", llo, lhi);
        OK(SMI_Free_shreg(bid));
    }

    /* A flag polled with no SMI call in between sees the other process's store. */
    if (size > 1) {
        volatile int *flag;
        SMI_Init_reginfo(&info, page, 0, 0, SMI_ADPT_DEFAULT, 0, 0, NULL);
        OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (void **)&flag));
        if (rank == 0) flag[0] = 0;
        SMI_Barrier();
        for (i = 1; i <= 20; i++) {
            if (rank == 0) {
                flag[0] = i;
                while (flag[1] != i) ;
            } else if (rank == 1) {
                while (flag[0] != i) ;
                flag[1] = i;
            }
        }
        SMI_Barrier();
        OK(SMI_Free_shreg(id));
    }

    /* REGISTER: a malloc'ed buffer, exported; the next process imports it and writes to it. */
    {
        int n = 3 * page / (int)sizeof(int) + 5, sgmt, rid, lid, *mine, *theirs;
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        int *buf = malloc(n * sizeof(int)), *orig = buf;
        for (i = 0; i < n; i++) buf[i] = rank * 100000 + i;
        SMI_Init_reginfo(&info, n * sizeof(int), 0, rank, SMI_ADPT_DEFAULT, 0, 0, NULL);
        OK(SMI_Create_shreg(SMI_SHM_LOCAL | SMI_SHM_REGISTER, &info, &lid, (void **)&buf));
        CHECK(buf == orig, "a registered buffer keeps its address");
        OK(SMI_Adr_to_region(buf + 7, &rid));
        CHECK(rid == lid, "registered buffer lookup");
        OK(SMI_Query(SMI_Q_SMI_REGION_SGMT_ID, lid, &sgmt));
        OK(SMI_Send(&sgmt, sizeof sgmt, next));
        OK(SMI_Recv(&sgmt, sizeof sgmt, prev));
        SMI_Init_reginfo(&info, 0, 0, prev, SMI_ADPT_DEFAULT, 0, sgmt, NULL);
        OK(SMI_Create_shreg(SMI_SHM_REMOTE, &info, &rid, (void **)&theirs));
        for (i = 0; i < n; i++) CHECK(theirs[i] == prev * 100000 + i, "imported word %d: %d", i, theirs[i]);
        mine = buf;
        SMI_Barrier();
        mine[1] = -1; /* this process's own store, kept beside the importer's */
        for (i = 2; i < n; i += 97) theirs[i] = -7 - prev;
        OK(SMI_Signal_send(prev | SMI_SIGNAL_ANY));
        OK(SMI_Signal_wait(next | SMI_SIGNAL_ANY));
        CHECK(mine[1] == -1 && mine[0] == rank * 100000, "own stores");
        for (i = 2; i < n; i += 97) CHECK(mine[i] == -7 - rank, "importer's store at %d: %d", i, mine[i]);
        CHECK(mine[3] == rank * 100000 + 3, "untouched word");
        SMI_Barrier();
        OK(SMI_Free_shreg(rid));
        SMI_Barrier();
        OK(SMI_Free_shreg(lid));
        free(orig);
    }

    /* 1024 LOCAL regions, all exported. */
    {
        static int ids[1024];
        char *p;
        SMI_Init_reginfo(&info, page, 0, rank, SMI_ADPT_DEFAULT, 0, 0, NULL);
        for (i = 0; i < 1024; i++) OK(SMI_Create_shreg(SMI_SHM_LOCAL, &info, &ids[i], (void **)&p));
        for (i = 0; i < 1024; i++) OK(SMI_Free_shreg(ids[i]));
    }

    OK(SMI_Finalize());
    if (rank == 0) printf("PASS behaviours\n");
    return 0;
}
