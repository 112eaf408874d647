/*
 * placement.c -- memory the master allocates with cvm_alloc and each process then initialises
 * and rewrites alone. Under the default protocol (scope, home-based) each page is homed on the
 * first process that touches it, so a process rewriting its own block sends no diffs: the
 * harness checks the diff bytes of each node (SVM_STATS=json), and that SVM_FIRST_TOUCH=0
 * (every page homed on the master) brings them back.
 *
 *   placement -p P [-r ROUNDS]
 *
 * Every process fills its block of BLOCK_PAGES pages, then for ROUNDS rounds rewrites it,
 * passes a barrier and checks one word of the next process's block. Prints "PASS placement
 * ..." or "FAIL placement ..." (exit non-zero).
 */
#define PROGRAM "placement"
#include "check.h"

#define BLOCK_PAGES 8
#define WORDS (BLOCK_PAGES * 4096 / (int)sizeof(long))

static int rounds = 20;
static long *blocks; /* [P][WORDS] */

static long val(int who, int r, int i) { return who * 1000003L + r * 1009L + i; }

static void worker(void)
{
    int p = PID, P = cvm_num_procs, r, i;
    long *mine = blocks + (long)p * WORDS, *next = blocks + (long)((p + 1) % P) * WORDS;
    for (i = 0; i < WORDS; i++) mine[i] = val(p, -1, i);
    cvm_barrier(0);
    for (r = 0; r < rounds; r++) {
        for (i = 0; i < WORDS; i++) mine[i] = val(p, r, i);
        cvm_barrier(0);
        i = (r * 97) % WORDS;
        CHECK(next[i] == val((p + 1) % P, r, i), "round %d: word %d of block %d = %ld", r, i,
              (p + 1) % P, next[i]);
        cvm_barrier(1);
    }
    if (p == 0) {
        printf("PASS placement procs=%d rounds=%d\n", P, rounds);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    rounds = int_option(argc, argv, "-r", rounds);
    startup_checked(argc, argv, 1 << 20);
    CHECK(rounds > 0, "-r must be positive");
    blocks = cvm_alloc(cvm_num_procs * WORDS * (int)sizeof(long));
    CHECK(blocks != NULL, "cvm_alloc failed");
    cvm_create_procs(worker);
    worker();
    cvm_finish();
    return 0;
}
