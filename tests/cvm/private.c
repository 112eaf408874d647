/*
 * private.c -- ordinary globals are private to each process; at cvm_create_procs the workers
 * start with the master's globals as they are at that moment; PID and TID are unique.
 *
 *   private -p P
 *
 * Round 1: the master sets globals (.data, .bss, a string, a pointer to cvm_alloc memory)
 * before cvm_create_procs and changes one (`late`) after it: the workers see the first values
 * and not the late change. Then every process writes its own value into a global: after a
 * barrier each still sees only its own value (a worker's write does not change the master's
 * global, nor another worker's). Every process records PID and TID in shared memory; the
 * master checks that they are distinct. Round 2: after cvm_finish, the master changes a global
 * and calls cvm_create_procs again: the workers see the new value. Prints "PASS private ..."
 * or "FAIL private ..." (exit non-zero).
 */
#define PROGRAM "private"
#include "check.h"

int param = 1;                  /* .data */
long zeroed;                    /* .bss */
char banner[40];                /* .bss */
int late;                       /* changed by the master after cvm_create_procs */
int mine = -1;                  /* written by every process */
int round_no;                   /* the creation round */
long big[3000];                 /* several pages of .bss */

struct ids {
    int pid[64];
    int tid[64];
    int seen_round[64];
};
static struct ids *ids;

static void worker(void)
{
    int p = PID, P = cvm_num_procs, q;

    if (round_no == 1) {
        CHECK(param == 42 && zeroed == 7 && !strcmp(banner, "set by the master"),
              "globals at creation: param=%d zeroed=%ld banner=%s", param, zeroed, banner);
        CHECK(big[0] == 5 && big[2999] == 6, "big[0]=%ld big[2999]=%ld", big[0], big[2999]);
        if (p != 0) CHECK(late == 0, "a worker sees the master's change made after create: late=%d", late);
        else CHECK(late == 99, "the master's own late=%d", late);
        ids->pid[p] = PID;
        ids->tid[p] = TID;
    }
    ids->seen_round[p] = round_no;
    mine = 1000 + p;
    param = 2000 + p;
    cvm_barrier(0);
    CHECK(mine == 1000 + p && param == 2000 + p,
          "another process's write reached this process's globals: mine=%d param=%d", mine, param);
    cvm_barrier(0);
    if (p == 0) {
        for (q = 0; q < P; q++) CHECK(ids->seen_round[q] == round_no, "process %d ran round %d", q, ids->seen_round[q]);
        if (round_no == 1) {
            int r;
            for (q = 0; q < P; q++) {
                CHECK(ids->pid[q] == q, "process %d has PID %d", q, ids->pid[q]);
                for (r = 0; r < q; r++)
                    CHECK(ids->tid[q] != ids->tid[r], "processes %d and %d share TID %d", r, q, ids->tid[q]);
            }
        }
    }
}

int main(int argc, char **argv)
{
    startup_checked(argc, argv, 64);
    ids = cvm_alloc((int)sizeof *ids);
    CHECK(ids != NULL, "cvm_alloc failed");
    param = 42;
    zeroed = 7;
    strcpy(banner, "set by the master");
    big[0] = 5;
    big[2999] = 6;
    round_no = 1;
    cvm_create_procs(worker);
    late = 99;
    worker();
    cvm_finish();
    CHECK(mine == 1000 && param == 2000, "the master's globals after round 1: mine=%d param=%d", mine, param);

    /* Round 2: a new snapshot. */
    round_no = 2;
    param = 77;
    cvm_create_procs(worker);
    worker();
    cvm_finish();
    printf("PASS private procs=%d\n", cvm_num_procs);
    fflush(stdout);
    return 0;
}
