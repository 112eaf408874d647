/*
 * sor.C -- red-black successive over-relaxation for the 2-D Poisson equation on an
 * (n+2) x (n+2) grid, rows split among the processes, one barrier object per phase.
 *
 *   sor [-n N] [-p P] [-i MAXITER]
 *     -n N        interior points per side (default 62)
 *     -p P        number of processes (default 1)
 *     -i MAXITER  iteration limit (default 5000)
 *
 * The right-hand side is the discrete Laplacian of a known grid function g, so the discrete
 * solution is exactly g. Each iteration: red points, barrier red_done; black points, barrier
 * black_done; every process merges its largest update into resid[it % 2] under a lock, barrier
 * reduced; everybody reads the same value and stops when it is small. The check: |u - g| small.
 * Prints "PASS sor ..." or "FAIL sor ..." (exit 1).
 */
MAIN_ENV
#include <math.h>
#include <unistd.h>

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(residlock)
  double resid[2];
  BARDEC(red_done)
  BARDEC(black_done)
  BARDEC(reduced)
  long iterations;
};

struct GlobalMemory *Global;
long n = 62;
long P = 1;
long max_iter = 5000;
double omega;
double tolerance = 1e-13;
double *u;   /* (n+2) x (n+2) */
double *f;   /* right-hand side, times h^2 */
double *g;   /* the exact discrete solution */

#define U(i, j) u[(i) * (n + 2) + (j)]
#define F(i, j) f[(i) * (n + 2) + (j)]
#define G(i, j) g[(i) * (n + 2) + (j)]

void SlaveStart(void);

/* Updates the points of one colour in rows [first, last); returns the largest change. */
static double sweep(long first, long last, long colour)
{
  long i, j;
  double biggest = 0.0;
  for (i = first; i < last; i++) {
    for (j = 1 + (i + colour) % 2; j <= n; j += 2) {
      double target = 0.25 * (U(i - 1, j) + U(i + 1, j) + U(i, j - 1) + U(i, j + 1) - F(i, j));
      double change = omega * (target - U(i, j));
      U(i, j) += change;
      if (fabs(change) > biggest) biggest = fabs(change);
    }
  }
  return biggest;
}

void SlaveStart(void)
{
  long MyNum, first, last, it;
  double mine, r1, r2;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  first = 1 + MyNum * n / P;
  last = 1 + (MyNum + 1) * n / P;

  for (it = 0; it < max_iter; it++) {
    r1 = sweep(first, last, 0);
    BARRIER(Global->red_done, P);
    if (MyNum == 0) {
      /* Nobody reads resid[(it + 1) % 2] any more (all read it before red_done). */
      Global->resid[(it + 1) % 2] = 0.0;
    }
    r2 = sweep(first, last, 1);
    BARRIER(Global->black_done, P);
    mine = r1 > r2 ? r1 : r2;
    LOCK(Global->residlock);
    if (mine > Global->resid[it % 2]) Global->resid[it % 2] = mine;
    UNLOCK(Global->residlock);
    BARRIER(Global->reduced, P);
    if (Global->resid[it % 2] < tolerance) {
      break;
    }
  }
  if (MyNum == 0) {
    Global->iterations = it;
  }
}

int main(int argc, char *argv[])
{
  long i, j;
  int c;
  double h, maxerr = 0.0;
  unsigned long t0, t1;

  while ((c = getopt(argc, argv, "n:p:i:")) != -1) {
    switch (c) {
    case 'n': n = atol(optarg); break;
    case 'p': P = atol(optarg); break;
    case 'i': max_iter = atol(optarg); break;
    default:
      fprintf(stderr, "usage: sor [-n N] [-p P] [-i MAXITER]\n");
      exit(2);
    }
  }
  if (n < 2 || P < 1 || P > n || max_iter < 1) {
    fprintf(stderr, "sor: bad arguments\n");
    exit(2);
  }

  MAIN_INITENV(,10000000)
  CLOCK(t0)

  h = 1.0 / (double)(n + 1);
  omega = 2.0 / (1.0 + sin(3.14159265358979323846 * h));
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  u = (double *) G_MALLOC((n + 2) * (n + 2) * sizeof(double));
  f = (double *) G_MALLOC((n + 2) * (n + 2) * sizeof(double));
  g = (double *) G_MALLOC((n + 2) * (n + 2) * sizeof(double));
  Global->id = 0;
  Global->resid[0] = Global->resid[1] = 0.0;
  Global->iterations = -1;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->residlock);
  BARINIT(Global->red_done, P);
  BARINIT(Global->black_done, P);
  BARINIT(Global->reduced, P);

  for (i = 0; i < n + 2; i++) {
    for (j = 0; j < n + 2; j++) {
      double x = (double)i * h, y = (double)j * h;
      G(i, j) = x * (1.0 - x) * exp(y) + 0.5 * y * y;
      /* Boundary values of u are those of g; the interior starts at 0. */
      U(i, j) = (i == 0 || j == 0 || i == n + 1 || j == n + 1) ? G(i, j) : 0.0;
    }
  }
  for (i = 1; i <= n; i++) {
    for (j = 1; j <= n; j++) {
      F(i, j) = G(i - 1, j) + G(i + 1, j) + G(i, j - 1) + G(i, j + 1) - 4.0 * G(i, j);
    }
  }

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);
  CLOCK(t1)

  for (i = 0; i < n + 2; i++) {
    for (j = 0; j < n + 2; j++) {
      if (fabs(U(i, j) - G(i, j)) > maxerr) maxerr = fabs(U(i, j) - G(i, j));
    }
  }
  printf("sor: n=%ld p=%ld, %ld iterations, max error %.3e, %lu us\n", n, P,
         Global->iterations, maxerr, t1 - t0);
  if (Global->iterations < 0 || Global->iterations >= max_iter || !(maxerr < 1e-9)) {
    printf("FAIL sor n=%ld p=%ld: %ld iterations, error %.3e\n", n, P, Global->iterations,
           maxerr);
    exit(1);
  }
  printf("PASS sor n=%ld p=%ld\n", n, P);
  MAIN_END
}
