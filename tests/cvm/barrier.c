/*
 * barrier.c -- barrier phases: everything written before a barrier is seen by everyone after it.
 *
 *   barrier -p P [-f PHASES]
 *
 * In phase f every process writes its slot of a packed array (all slots share a page: several
 * writers per page) and row (p + f) mod P of a matrix with one page per row (the writer of a
 * page changes every phase); after a barrier every process checks every slot and row; after a
 * second barrier the next phase overwrites them. Prints "PASS barrier ..." or "FAIL barrier
 * ..." (exit non-zero).
 */
#define PROGRAM "barrier"
#include "check.h"

#define ROW 512 /* longs: one 4 KiB page */

static int phases = 8;
static long *slots;  /* [64] */
static long *rows;   /* [64][ROW] */

static long val(int f, int who, int i) { return (long)f * 1000003L + who * 1009L + i; }

static void worker(void)
{
    int p = PID, P = cvm_num_procs, f, q, i;
    for (f = 0; f < phases; f++) {
        int r = (p + f) % P;
        slots[p] = val(f, p, -1);
        for (i = 0; i < ROW; i++) rows[(long)r * ROW + i] = val(f, p, i);
        cvm_barrier(0);
        for (q = 0; q < P; q++) {
            int w = (q - f % P + P) % P; /* the process that wrote row q in phase f */
            CHECK(slots[q] == val(f, q, -1), "phase %d: slot %d = %ld", f, q, slots[q]);
            for (i = 0; i < ROW; i++)
                CHECK(rows[(long)q * ROW + i] == val(f, w, i), "phase %d: row %d[%d] = %ld, expected %ld",
                      f, q, i, rows[(long)q * ROW + i], val(f, w, i));
        }
        cvm_barrier(1);
    }
    if (p == 0) {
        printf("PASS barrier procs=%d phases=%d\n", P, phases);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    phases = int_option(argc, argv, "-f", phases);
    startup_checked(argc, argv, 64);
    slots = cvm_alloc(64 * (int)sizeof(long));
    rows = cvm_alloc(64 * ROW * (int)sizeof(long));
    CHECK(slots && rows, "cvm_alloc failed");
    cvm_create_procs(worker);
    worker();
    cvm_finish();
    return 0;
}
