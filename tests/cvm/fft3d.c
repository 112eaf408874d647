/*
 * fft3d.c -- a 3-D complex FFT through shared memory, in the manner of the FFT of the CVM
 * example set (the program behind the page-fault table of the SVMlib paper): an N1 x N2 x N3
 * complex array (default 64 x 64 x 16), distributed over the processes in slabs.
 *
 *   forward:  each process transforms its planes A[i][*][*] along the two local dimensions
 *             (k, then j); barrier; transpose into the second shared array B[j][k][i] (each
 *             process fills its slab of j, reading every other process's planes); barrier;
 *             transform the remaining dimension (i, now contiguous); barrier.
 *   check 1:  the master computes the same transform privately (plain malloc memory, one
 *             process) and compares it with B: max abs difference < 1e-9; and it compares
 *             five output points with a direct DFT sum: < 1e-8.
 *   inverse:  the same steps backwards (inverse along i in B; barrier; transpose back into A;
 *             barrier; inverse along j and k); every process compares its planes with the
 *             input: max abs error < 1e-9.
 *
 *   fft3d [-x N1] [-y N2] [-z N3] [-p P]   (sizes: powers of two, each 2..1024; -p: the
 *                                          number of processes expected, checked)
 *
 * Prints "fft3d OK err=<max inverse error> fwd_err=<max forward difference> dft_err=<max
 * difference from the direct DFT> time_s=<s> procs=<P> size=<N1>x<N2>x<N3>" (the key=value
 * words are an interface: svm-bench reads them), or "fft3d FAIL ..." and exits 1. time_s is
 * the parallel forward + inverse time seen by the master, without the checks.
 *
 * Build and run (docs/cvm.md):
 *   cc -O2 $(svm-config --cflags) fft3d.c $(svm-config --libs cvm) -o fft3d -lm
 *   svmrun -n 4 ./fft3d
 */
#include <cvm.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define MAX_PROCS 1024

typedef struct {
    double re, im;
} cplx;

/* Parameters and pointers: set by the master before cvm_create_procs, read by every
 * process (the globals snapshot). */
static int N1 = 64, N2 = 64, N3 = 16;
static cplx *A;          /* shared: A[N1][N2][N3] */
static cplx *B;          /* shared: B[N2][N3][N1] */
static double *errs;     /* shared: errs[p] = max inverse error of process p */

/* Private to each process. */
static cplx *tw1, *tw2, *tw3; /* twiddles exp(-2 pi i m / n), m < n/2 */
static cplx *line;            /* scratch line of max(N1, N2, N3) */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int is_pow2(int n) { return n >= 2 && n <= 1024 && (n & (n - 1)) == 0; }

/* The input: a deterministic pseudo-random value in [-1, 1) per element. */
static cplx input(int i, int j, int k)
{
    unsigned long long h = ((unsigned long long)i * 73856093ULL) ^
                           ((unsigned long long)j * 19349663ULL) ^
                           ((unsigned long long)k * 83492791ULL) ^ 0x9E3779B97F4A7C15ULL;
    cplx c;
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL; h ^= h >> 33;
    c.re = (double)(h & 0xfffff) / (double)0x80000 - 1.0;
    c.im = (double)((h >> 20) & 0xfffff) / (double)0x80000 - 1.0;
    return c;
}

static cplx *twiddles(int n)
{
    cplx *t = malloc(sizeof(cplx) * (size_t)(n / 2));
    int m;
    if (!t) cvm_exit("fft3d: out of memory");
    for (m = 0; m < n / 2; m++) {
        double a = -2.0 * M_PI * (double)m / (double)n;
        t[m].re = cos(a);
        t[m].im = sin(a);
    }
    return t;
}

/* In-place transform of the n elements x[0], x[s], x[2s], ... (sign -1 forward, +1 inverse,
 * the inverse scaled by 1/n): gather into `line`, iterative radix-2, scatter back. */
static void fft1d(cplx *x, int n, int s, int sign, const cplx *tw)
{
    int i, j, len, m, bit;
    for (i = 0; i < n; i++) line[i] = x[(long)i * s];
    for (i = 1, j = 0; i < n; i++) {
        for (bit = n >> 1; j & bit; bit >>= 1) j ^= bit;
        j |= bit;
        if (i < j) { cplx t = line[i]; line[i] = line[j]; line[j] = t; }
    }
    for (len = 2; len <= n; len <<= 1) {
        int step = n / len;
        for (i = 0; i < n; i += len) {
            for (m = 0; m < len / 2; m++) {
                cplx w = tw[m * step], u = line[i + m], v = line[i + m + len / 2], t;
                if (sign > 0) w.im = -w.im;
                t.re = v.re * w.re - v.im * w.im;
                t.im = v.re * w.im + v.im * w.re;
                line[i + m].re = u.re + t.re;
                line[i + m].im = u.im + t.im;
                line[i + m + len / 2].re = u.re - t.re;
                line[i + m + len / 2].im = u.im - t.im;
            }
        }
    }
    if (sign > 0) {
        double f = 1.0 / (double)n;
        for (i = 0; i < n; i++) { line[i].re *= f; line[i].im *= f; }
    }
    for (i = 0; i < n; i++) x[(long)i * s] = line[i];
}

static long ia(int i, int j, int k) { return ((long)i * N2 + j) * N3 + k; }
static long ib(int j, int k, int i) { return ((long)j * N3 + k) * N1 + i; }

/* Planes [lo, hi) of A along k then j (sign as fft1d). */
static void planes_jk(cplx *a, int lo, int hi, int sign)
{
    int i, j, k;
    for (i = lo; i < hi; i++) {
        for (j = 0; j < N2; j++) fft1d(a + ia(i, j, 0), N3, 1, sign, tw3);
        for (k = 0; k < N3; k++) fft1d(a + ia(i, 0, k), N2, N3, sign, tw2);
    }
}

/* Rows j in [lo, hi) of B along i. */
static void rows_i(cplx *b, int lo, int hi, int sign)
{
    int j, k;
    for (j = lo; j < hi; j++)
        for (k = 0; k < N3; k++) fft1d(b + ib(j, k, 0), N1, 1, sign, tw1);
}

/* B[j][k][i] = A[i][j][k] for j in [lo, hi). */
static void transpose_ab(const cplx *a, cplx *b, int lo, int hi)
{
    int i, j, k;
    for (j = lo; j < hi; j++)
        for (k = 0; k < N3; k++)
            for (i = 0; i < N1; i++) b[ib(j, k, i)] = a[ia(i, j, k)];
}

/* A[i][j][k] = B[j][k][i] for i in [lo, hi). */
static void transpose_ba(const cplx *b, cplx *a, int lo, int hi)
{
    int i, j, k;
    for (i = lo; i < hi; i++)
        for (j = 0; j < N2; j++)
            for (k = 0; k < N3; k++) a[ia(i, j, k)] = b[ib(j, k, i)];
}

static void block(int n, int p, int procs, int *lo, int *hi)
{
    *lo = (int)((long)n * p / procs);
    *hi = (int)((long)n * (p + 1) / procs);
}

static double cabs_diff(cplx a, cplx b)
{
    double dr = a.re - b.re, di = a.im - b.im;
    return sqrt(dr * dr + di * di);
}

/* The master's private, one-process forward transform; returns the max difference from B. */
static double forward_reference_diff(void)
{
    long n = (long)N1 * N2 * N3, x;
    cplx *a = malloc(sizeof(cplx) * (size_t)n), *b = malloc(sizeof(cplx) * (size_t)n);
    double worst = 0.0;
    int i, j, k;
    if (!a || !b) cvm_exit("fft3d: out of memory for the reference");
    for (i = 0; i < N1; i++)
        for (j = 0; j < N2; j++)
            for (k = 0; k < N3; k++) a[ia(i, j, k)] = input(i, j, k);
    planes_jk(a, 0, N1, -1);
    transpose_ab(a, b, 0, N2);
    rows_i(b, 0, N2, -1);
    for (x = 0; x < n; x++) {
        double d = cabs_diff(b[x], B[x]);
        if (!(d <= worst)) worst = d; /* NaN counts as worst */
    }
    free(a);
    free(b);
    return worst;
}

/* Max difference between B and a direct (O(N) per point) 3-D DFT at a few output points: the
 * transform is the DFT, not merely an invertible map. */
static double direct_dft_diff(void)
{
    static const int pts[5][3] = { { 0, 0, 0 }, { 1, 2, 3 }, { -1, 7, -1 }, { 5, -3, 1 }, { -2, -1, 2 } };
    double worst = 0.0;
    int q, i, j, k;
    for (q = 0; q < 5; q++) {
        int u = (pts[q][0] % N1 + N1) % N1, v = (pts[q][1] % N2 + N2) % N2, w = (pts[q][2] % N3 + N3) % N3;
        double re = 0.0, im = 0.0, d;
        for (i = 0; i < N1; i++)
            for (j = 0; j < N2; j++)
                for (k = 0; k < N3; k++) {
                    cplx x = input(i, j, k);
                    double f = (double)((long)u * i % N1) / N1 + (double)((long)v * j % N2) / N2 +
                               (double)((long)w * k % N3) / N3;
                    double c = cos(-2.0 * M_PI * f), s = sin(-2.0 * M_PI * f);
                    re += x.re * c - x.im * s;
                    im += x.re * s + x.im * c;
                }
        d = sqrt((re - B[ib(v, w, u)].re) * (re - B[ib(v, w, u)].re) +
                 (im - B[ib(v, w, u)].im) * (im - B[ib(v, w, u)].im));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

static void worker(void)
{
    int p = PID, procs = cvm_num_procs;
    int lo1, hi1, lo2, hi2, i, j, k;
    double t0 = 0, t_fwd = 0, t1 = 0, t_inv = 0, fwd_err = 0, dft_err = 0, err = 0;
    int maxn = N1 > N2 ? N1 : N2;
    if (N3 > maxn) maxn = N3;

    tw1 = twiddles(N1);
    tw2 = twiddles(N2);
    tw3 = twiddles(N3);
    line = malloc(sizeof(cplx) * (size_t)maxn);
    if (!line) cvm_exit("fft3d: out of memory");
    block(N1, p, procs, &lo1, &hi1);
    block(N2, p, procs, &lo2, &hi2);

    /* Each process writes its own planes of the input. */
    for (i = lo1; i < hi1; i++)
        for (j = 0; j < N2; j++)
            for (k = 0; k < N3; k++) A[ia(i, j, k)] = input(i, j, k);
    cvm_barrier(0);

    /* Forward. */
    if (p == 0) t0 = now_s();
    planes_jk(A, lo1, hi1, -1);
    cvm_barrier(0);
    transpose_ab(A, B, lo2, hi2);
    cvm_barrier(0);
    rows_i(B, lo2, hi2, -1);
    cvm_barrier(0);
    if (p == 0) {
        t_fwd = now_s() - t0;
        fwd_err = forward_reference_diff();
        dft_err = direct_dft_diff();
    }
    cvm_barrier(0);

    /* Inverse. */
    if (p == 0) t1 = now_s();
    rows_i(B, lo2, hi2, +1);
    cvm_barrier(0);
    transpose_ba(B, A, lo1, hi1);
    cvm_barrier(0);
    planes_jk(A, lo1, hi1, +1);
    cvm_barrier(0);
    if (p == 0) t_inv = now_s() - t1;

    for (i = lo1; i < hi1; i++)
        for (j = 0; j < N2; j++)
            for (k = 0; k < N3; k++) {
                double d = cabs_diff(A[ia(i, j, k)], input(i, j, k));
                if (!(d <= err)) err = d;
            }
    errs[p] = err;
    cvm_barrier(0);

    if (p == 0) {
        int q, ok;
        for (q = 0; q < procs; q++)
            if (!(errs[q] <= err)) err = errs[q];
        ok = err < 1e-9 && fwd_err < 1e-9 && dft_err < 1e-8;
        printf("fft3d %s err=%.3e fwd_err=%.3e dft_err=%.3e time_s=%.6f procs=%d size=%dx%dx%d\n",
               ok ? "OK" : "FAIL", err, fwd_err, dft_err, t_fwd + t_inv, procs, N1, N2, N3);
        fflush(stdout);
        if (!ok)
            cvm_exit("fft3d: FAIL: inverse err %.3e (limit 1e-9), forward vs one-process %.3e (limit 1e-9), "
                     "forward vs direct DFT %.3e (limit 1e-8)", err, fwd_err, dft_err);
    }
    free(tw1);
    free(tw2);
    free(tw3);
    free(line);
}

static void usage(const char *msg)
{
    fprintf(stderr, "fft3d: %s\nusage: fft3d [-x N1] [-y N2] [-z N3] [-p P]   (powers of two 2..1024; default 64 64 16)\n", msg);
    exit(2);
}

int main(int argc, char **argv)
{
    int a, want = -1;
    long n;
    for (a = 1; a < argc; a++) {
        int *dim = NULL;
        if (!strcmp(argv[a], "-p") && a + 1 < argc) {
            want = atoi(argv[++a]);
            continue;
        }
        if (!strcmp(argv[a], "-x")) dim = &N1;
        else if (!strcmp(argv[a], "-y")) dim = &N2;
        else if (!strcmp(argv[a], "-z")) dim = &N3;
        else usage("unknown argument");
        if (a + 1 >= argc) usage("a size is missing");
        *dim = atoi(argv[++a]);
        if (!is_pow2(*dim)) usage("sizes must be powers of two between 2 and 1024");
    }
    cvm_startup(argc, argv);
    if (want >= 0 && want != cvm_num_procs)
        cvm_exit("fft3d: FAIL: %d processes, expected %d (-p)", cvm_num_procs, want);
    if (cvm_num_procs > MAX_PROCS) cvm_exit("fft3d: at most %d processes", MAX_PROCS);
    n = (long)N1 * N2 * N3;
    A = cvm_alloc((int)(sizeof(cplx) * n));
    B = cvm_alloc((int)(sizeof(cplx) * n));
    errs = cvm_alloc((int)sizeof(double) * MAX_PROCS);
    if (!A || !B || !errs) cvm_exit("fft3d: cvm_alloc failed");
    cvm_create_procs(worker);
    worker();
    cvm_finish();
    return 0;
}
