/* jacobi: Jacobi relaxation of an N x N grid (fixed boundary) over ITER sweeps; the rows
 * are split among the nodes, the grid lives in a region homed in blocks (each node is home
 * of its rows), two grids swap roles every sweep, with a barrier between sweeps.
 *   svmrun -n 4 ./jacobi [--verify] [N] [ITER]
 *   -> jacobi n=64 iters=50 nodes=4 checksum=... [verify=OK] */
#include <math.h>
#include <string.h>
#include "check.h"

static double boundary(int i, int j, int n) {
    return (i == 0 || j == 0 || i == n - 1 || j == n - 1) ? (double)(i + 2 * j) : 0.0;
}

static void sweep(const double *src, double *dst, int n, int lo, int hi) {
    for (int i = lo; i < hi; i++)
        for (int j = 1; j < n - 1; j++)
            dst[i * n + j] = 0.25 * (src[(i - 1) * n + j] + src[(i + 1) * n + j] +
                                     src[i * n + j - 1] + src[i * n + j + 1]);
}

int main(int argc, char **argv) {
    int verify = 0, n = 64, iters = 50, pos = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--verify") == 0)
            verify = 1;
        else if (pos++ == 0)
            n = atoi(argv[a]);
        else
            iters = atoi(argv[a]);
    }
    if (n < 3 || iters < 0) {
        fprintf(stderr, "usage: jacobi [--verify] [N>=3] [ITER>=0]\n");
        return 2;
    }
    int me, nodes;
    CHECK(svm_init());
    CHECK(svm_node_id(&me));
    CHECK(svm_nodes(&nodes));
    size_t bytes = (size_t)n * n * sizeof(double);
    svm_home_t block = {SVM_HOME_BLOCK, 0, NULL, NULL, 0};
    svm_region_t r;
    double *grid[2];
    CHECK(svm_region_create(2 * bytes, SVM_PROTOCOL_DEFAULT, &block, &r));
    CHECK(svm_region_alloc(r, bytes, (void **)&grid[0]));
    CHECK(svm_region_alloc(r, bytes, (void **)&grid[1]));
    /* Interior rows 1..n-2 split in contiguous blocks. */
    int rows = n - 2, per = (rows + nodes - 1) / nodes;
    int lo = 1 + me * per, hi = lo + per;
    if (hi > n - 1)
        hi = n - 1;
    if (lo > hi)
        lo = hi;
    if (me == 0)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                grid[0][i * n + j] = grid[1][i * n + j] = boundary(i, j, n);
    CHECK(svm_barrier());
    for (int it = 0; it < iters; it++) {
        sweep(grid[it % 2], grid[(it + 1) % 2], n, lo, hi);
        CHECK(svm_barrier());
    }
    const double *res = grid[iters % 2];
    int ok = 1;
    if (me == 0) {
        double sum = 0;
        for (int i = 0; i < n * n; i++)
            sum += res[i];
        printf("jacobi n=%d iters=%d nodes=%d checksum=%.6f", n, iters, nodes, sum);
        if (verify) {
            double *a = malloc(bytes), *b = malloc(bytes), *t;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    a[i * n + j] = b[i * n + j] = boundary(i, j, n);
            for (int it = 0; it < iters; it++) {
                sweep(a, b, n, 1, n - 1);
                t = a, a = b, b = t;
            }
            double err = 0;
            for (int i = 0; i < n * n; i++)
                err = fmax(err, fabs(a[i] - res[i]));
            ok = err == 0.0;
            printf(" max_err=%g verify=%s", err, ok ? "OK" : "FAIL");
            free(a);
            free(b);
        }
        printf("\n");
    }
    CHECK(svm_barrier());
    CHECK(svm_region_destroy(r));
    CHECK(svm_finish());
    return ok ? 0 : 1;
}
