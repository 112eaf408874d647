/*
 * shape.c -- the program shape of CVM: the master parses its own arguments, calls
 * cvm_startup, allocates all shared memory with cvm_alloc, stores the pointers and the parsed
 * parameters in ordinary globals, starts the workers with cvm_create_procs(worker), works
 * itself (worker()), and waits for the others with cvm_finish.
 *
 *   shape -p P [-n N] [-s SCALE]
 *
 * Every process fills its block of a shared vector of N doubles and of a small shared struct;
 * after a barrier every process checks the whole vector, and the master sums it. Prints
 * "PASS shape ..." or "FAIL shape ..." (exit non-zero).
 */
#define PROGRAM "shape"
#include "check.h"

struct info {
    int filled[64];
    long checksum[64];
};

/* Parsed by the master from argv, read by every process. */
static int n = 20000;
static double scale = 1.0;
static int procs_expected = -1;
/* cvm_alloc pointers, stored by the master. */
static double *vec;
static struct info *info;
static int *tiny;

static void worker(void)
{
    int p = PID, P = cvm_num_procs, i;
    int lo = (int)((long)n * p / P), hi = (int)((long)n * (p + 1) / P);
    long sum = 0;

    CHECK(vec != NULL && info != NULL && tiny != NULL, "the master's pointers did not arrive");
    CHECK(n == 20000 || n > 0, "n=%d", n);
    for (i = lo; i < hi; i++) vec[i] = scale * (double)i + 0.5;
    info->filled[p] = hi - lo;
    if (p == 0) *tiny = 12345;
    cvm_barrier(0);

    for (i = 0; i < n; i++) {
        CHECK(vec[i] == scale * (double)i + 0.5, "vec[%d]=%g, expected %g", i, vec[i],
              scale * (double)i + 0.5);
        sum += (long)vec[i];
    }
    CHECK(*tiny == 12345, "*tiny=%d", *tiny);
    info->checksum[p] = sum;
    cvm_barrier(0);

    if (p == 0) {
        int q, total = 0;
        for (q = 0; q < P; q++) {
            total += info->filled[q];
            CHECK(info->checksum[q] == sum, "process %d summed %ld, the master %ld", q,
                  info->checksum[q], sum);
        }
        CHECK(total == n, "the blocks cover %d of %d elements", total, n);
        printf("PASS shape procs=%d n=%d sum=%ld\n", P, n, sum);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    int a;
    for (a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "-n") && a + 1 < argc) n = atoi(argv[++a]);
        else if (!strcmp(argv[a], "-s") && a + 1 < argc) scale = atof(argv[++a]);
        else if (!strcmp(argv[a], "-p") && a + 1 < argc) procs_expected = atoi(argv[++a]);
        else {
            fprintf(stderr, "usage: shape -p P [-n N] [-s SCALE]\n");
            return 2;
        }
    }
    if (n < 1) n = 1;
    cvm_startup(argc, argv);
    CHECK(procs_expected < 0 || cvm_num_procs == procs_expected, "cvm_num_procs=%d, started with %d",
          cvm_num_procs, procs_expected);
    CHECK(cvm_proc_id == 0 && PID == 0, "main runs on process %d", cvm_proc_id);
    CHECK(cvm_num_procs <= 64, "at most 64 processes");
    vec = cvm_alloc(n * (int)sizeof(double));
    info = cvm_alloc((int)sizeof *info);
    tiny = cvm_alloc((int)sizeof *tiny);
    CHECK(vec && info && tiny, "cvm_alloc failed");
    CHECK((char *)info >= (char *)(vec + n) || (char *)(info + 1) <= (char *)vec,
          "allocations overlap");
    cvm_create_procs(worker);
    worker();
    cvm_finish();
    return 0;
}
