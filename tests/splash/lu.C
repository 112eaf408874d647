/*
 * lu.C -- blocked dense LU factorisation without pivoting, in the style of SPLASH-2 LU.
 *
 *   lu [-n N] [-b B] [-p P] [-t]
 *     -n N   matrix order (default 128)
 *     -b B   block size (default 16; N must be a multiple of B)
 *     -p P   number of processes (default 1)
 *     -t     accepted for compatibility: the residual check always runs
 *
 * Blocks are owned round-robin by the processes. For every diagonal step k: the owner of block
 * (k,k) factors it; the owners of the blocks of row k and column k solve against it; every owner
 * updates its trailing blocks; a barrier separates the phases. The check multiplies L by U and
 * compares with the original matrix. Prints "PASS lu ..." or "FAIL lu ..." (exit 1).
 */
MAIN_ENV
#include <math.h>
#include <unistd.h>

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  BARDEC(phase)
  unsigned long starttime;
  unsigned long finishtime;
};

struct GlobalMemory *Global;
long n = 128;
long block = 16;
long nblocks;
long P = 1;
double *a;      /* n x n, row-major: factorised in place */
double *a0;     /* the original matrix */

void SlaveStart(void);

#define A(i, j) a[(i) * n + (j)]

static long owner(long bi, long bj)
{
  return (bi * nblocks + bj) % P;
}

/* Factor the diagonal block (k,k) in place: unit lower L and upper U. */
static void factor_diag(long k)
{
  long base = k * block, i, j, l;
  for (l = base; l < base + block; l++) {
    for (i = l + 1; i < base + block; i++) {
      A(i, l) /= A(l, l);
      for (j = l + 1; j < base + block; j++) {
        A(i, j) -= A(i, l) * A(l, j);
      }
    }
  }
}

/* Block (k, bj) of row k: solve L_kk X = A_kj (forward substitution, unit diagonal). */
static void solve_row_block(long k, long bj)
{
  long base = k * block, cb = bj * block, i, j, l;
  for (l = base; l < base + block; l++) {
    for (i = l + 1; i < base + block; i++) {
      for (j = cb; j < cb + block; j++) {
        A(i, j) -= A(i, l) * A(l, j);
      }
    }
  }
}

/* Block (bi, k) of column k: solve X U_kk = A_ik. */
static void solve_col_block(long k, long bi)
{
  long base = k * block, rb = bi * block, i, j, l;
  for (i = rb; i < rb + block; i++) {
    for (l = base; l < base + block; l++) {
      A(i, l) /= A(l, l);
      for (j = l + 1; j < base + block; j++) {
        A(i, j) -= A(i, l) * A(l, j);
      }
    }
  }
}

/* A_ij -= A_ik A_kj */
static void update_block(long k, long bi, long bj)
{
  long rb = bi * block, cb = bj * block, kb = k * block, i, j, l;
  for (i = rb; i < rb + block; i++) {
    for (l = kb; l < kb + block; l++) {
      double m = A(i, l);
      for (j = cb; j < cb + block; j++) {
        A(i, j) -= m * A(l, j);
      }
    }
  }
}

void SlaveStart(void)
{
  long MyNum, k, bi, bj;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  BARRIER(Global->phase, P);
  if (MyNum == 0) {
    CLOCK(Global->starttime);
  }
  for (k = 0; k < nblocks; k++) {
    if (owner(k, k) == MyNum) {
      factor_diag(k);
    }
    BARRIER(Global->phase, P);
    for (bj = k + 1; bj < nblocks; bj++) {
      if (owner(k, bj) == MyNum) solve_row_block(k, bj);
      if (owner(bj, k) == MyNum) solve_col_block(k, bj);
    }
    BARRIER(Global->phase, P);
    for (bi = k + 1; bi < nblocks; bi++) {
      for (bj = k + 1; bj < nblocks; bj++) {
        if (owner(bi, bj) == MyNum) update_block(k, bi, bj);
      }
    }
    BARRIER(Global->phase, P);
  }
  if (MyNum == 0) {
    CLOCK(Global->finishtime);
  }
}

int main(int argc, char *argv[])
{
  long i, j, l;
  int c;
  double maxerr = 0.0, maxa = 0.0;

  while ((c = getopt(argc, argv, "n:b:p:t")) != -1) {
    switch (c) {
    case 'n': n = atol(optarg); break;
    case 'b': block = atol(optarg); break;
    case 'p': P = atol(optarg); break;
    case 't': break;
    default:
      fprintf(stderr, "usage: lu [-n N] [-b B] [-p P] [-t]\n");
      exit(2);
    }
  }
  if (n < 1 || block < 1 || n % block != 0 || P < 1) {
    fprintf(stderr, "lu: -n must be a positive multiple of -b, -p positive\n");
    exit(2);
  }
  nblocks = n / block;

  MAIN_INITENV(,(n * n * 16 + 1000000))

  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  a = (double *) G_MALLOC(n * n * sizeof(double));
  a0 = (double *) G_MALLOC(n * n * sizeof(double));
  Global->id = 0;
  LOCKINIT(Global->idlock);
  BARINIT(Global->phase, P);

  /* A diagonally dominant matrix: no pivoting needed. */
  srand48(42);
  for (i = 0; i < n; i++) {
    for (j = 0; j < n; j++) {
      A(i, j) = drand48() - 0.5;
    }
    A(i, i) += (double)n;
  }
  for (i = 0; i < n * n; i++) {
    a0[i] = a[i];
    if (fabs(a[i]) > maxa) maxa = fabs(a[i]);
  }

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  /* (L U)_ij = sum_{l <= min(i, j)} L_il U_lj with L_ii = 1. */
  for (i = 0; i < n; i++) {
    for (j = 0; j < n; j++) {
      double s = 0.0;
      long lim = i < j ? i : j;
      for (l = 0; l <= lim; l++) {
        s += (l == i ? 1.0 : A(i, l)) * A(l, j);
      }
      if (fabs(s - a0[i * n + j]) > maxerr) maxerr = fabs(s - a0[i * n + j]);
    }
  }
  printf("lu: n=%ld block=%ld p=%ld, max |LU - A| = %.3e (max |A| = %.3e), %lu us\n",
         n, block, P, maxerr, maxa, Global->finishtime - Global->starttime);
  if (!(maxerr <= 1e-10 * maxa * (double)n)) {
    printf("FAIL lu n=%ld p=%ld: residual %.3e too large\n", n, P, maxerr);
    exit(1);
  }
  printf("PASS lu n=%ld p=%ld\n", n, P);
  MAIN_END
}
