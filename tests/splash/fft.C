/*
 * fft.C -- a 1-D complex FFT of 2^m points with the six-step algorithm (transpose, row FFTs,
 * twiddle, transpose, row FFTs, transpose), in the style of SPLASH-2 FFT.
 *
 *   fft [-m M] [-p P] [-t]
 *     -m M   2^M points (M even, default 16)
 *     -p P   number of processes (default 1)
 *     -t     also run the inverse transform and compare with the input
 *
 * The forward result is always checked against a direct DFT at a few frequencies.
 * Prints "PASS fft ..." and exits 0, or prints "FAIL fft ..." and exits 1.
 */
MAIN_ENV
#include <math.h>
#include <unistd.h>

#define PI 3.14159265358979323846

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  BARDEC(start)
  unsigned long starttime;
  unsigned long finishtime;
};

struct GlobalMemory *Global;
long M = 16;
long N;           /* points */
long rootN;       /* sqrt(N): the data is a rootN x rootN matrix */
long P = 1;
long test_inverse = 0;
double *x;        /* 2*N doubles: the data (re, im pairs) */
double *trans;    /* 2*N doubles: scratch for the transposes */
double *orig;     /* 2*N doubles: a copy of the input */
double *roots;    /* 2*rootN doubles: exp(-2 pi i k / rootN) */
double *fwdvals;  /* 12 doubles: the forward result at the probes */
long probes[6] = { 0, 1, 3, 5, 7, 9 };  /* frequencies checked against a direct DFT */

void SlaveStart(void);

static void transpose(double *src, double *dst, long first, long last)
{
  long i, j;
  for (i = first; i < last; i++) {
    for (j = 0; j < rootN; j++) {
      dst[2 * (i * rootN + j)] = src[2 * (j * rootN + i)];
      dst[2 * (i * rootN + j) + 1] = src[2 * (j * rootN + i) + 1];
    }
  }
}

/* In-place radix-2 FFT of one row of length rootN; direction -1 forward, +1 inverse. */
static void fft_row(double *row, int direction)
{
  long n = rootN, i, j, k, len, step;
  for (i = 1, j = 0; i < n; i++) {
    long bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      double tr = row[2 * i], ti = row[2 * i + 1];
      row[2 * i] = row[2 * j];
      row[2 * i + 1] = row[2 * j + 1];
      row[2 * j] = tr;
      row[2 * j + 1] = ti;
    }
  }
  for (len = 2; len <= n; len <<= 1) {
    step = n / len;
    for (i = 0; i < n; i += len) {
      for (k = 0; k < len / 2; k++) {
        double wr = roots[2 * (k * step)];
        double wi = direction < 0 ? roots[2 * (k * step) + 1] : -roots[2 * (k * step) + 1];
        double *a = &row[2 * (i + k)];
        double *b = &row[2 * (i + k + len / 2)];
        double br = b[0] * wr - b[1] * wi;
        double bi = b[0] * wi + b[1] * wr;
        b[0] = a[0] - br;
        b[1] = a[1] - bi;
        a[0] += br;
        a[1] += bi;
      }
    }
  }
}

/* One transform of x in place (trans is scratch); rows [first, last) belong to the caller. */
static void six_step(long first, long last, int direction)
{
  long i, j;
  transpose(x, trans, first, last);
  BARRIER(Global->start, P);
  for (i = first; i < last; i++) {
    fft_row(&trans[2 * i * rootN], direction);
    for (j = 0; j < rootN; j++) {
      double angle = direction * 2.0 * PI * (double)(i * j) / (double)N;
      double wr = cos(angle), wi = sin(angle);
      double *c = &trans[2 * (i * rootN + j)];
      double re = c[0] * wr - c[1] * wi;
      double im = c[0] * wi + c[1] * wr;
      c[0] = re;
      c[1] = im;
    }
  }
  BARRIER(Global->start, P);
  transpose(trans, x, first, last);
  BARRIER(Global->start, P);
  for (i = first; i < last; i++) {
    fft_row(&x[2 * i * rootN], direction);
  }
  BARRIER(Global->start, P);
  transpose(x, trans, first, last);
  BARRIER(Global->start, P);
  for (i = first; i < last; i++) {
    for (j = 0; j < 2 * rootN; j++) {
      x[2 * i * rootN + j] = trans[2 * i * rootN + j];
    }
  }
  BARRIER(Global->start, P);
}

void SlaveStart(void)
{
  long MyNum, first, last, i;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  first = MyNum * rootN / P;
  last = (MyNum + 1) * rootN / P;

  BARRIER(Global->start, P);
  if (MyNum == 0) {
    CLOCK(Global->starttime);
  }
  SPLASH3_ROI_BEGIN
  six_step(first, last, -1);
  if (MyNum == 0) {
    for (i = 0; i < 6; i++) {
      fwdvals[2 * i] = x[2 * probes[i]];
      fwdvals[2 * i + 1] = x[2 * probes[i] + 1];
    }
  }
  if (test_inverse) {
    six_step(first, last, +1);
    for (i = 2 * first * rootN; i < 2 * last * rootN; i++) {
      x[i] /= (double)N;
    }
    BARRIER(Global->start, P);
  }
  SPLASH3_ROI_END
  if (MyNum == 0) {
    CLOCK(Global->finishtime);
  }
}

int main(int argc, char *argv[])
{
  long i, k;
  int c;
  double maxerr = 0.0, scale = 0.0;
  double *spot;

  while ((c = getopt(argc, argv, "m:p:t")) != -1) {
    switch (c) {
    case 'm': M = atol(optarg); break;
    case 'p': P = atol(optarg); break;
    case 't': test_inverse = 1; break;
    default:
      fprintf(stderr, "usage: fft [-m M] [-p P] [-t]\n");
      exit(2);
    }
  }
  if (M < 4 || M > 24 || M % 2 != 0 || P < 1) {
    fprintf(stderr, "fft: -m must be even in 4..24 and -p positive\n");
    exit(2);
  }
  N = 1L << M;
  rootN = 1L << (M / 2);
  if (P > rootN) {
    fprintf(stderr, "fft: -p must not exceed sqrt(2^m) = %ld\n", rootN);
    exit(2);
  }

  MAIN_INITENV(,80000000)

  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  x = (double *) G_MALLOC(2 * N * sizeof(double));
  trans = (double *) G_MALLOC(2 * N * sizeof(double));
  orig = (double *) G_MALLOC(2 * N * sizeof(double));
  roots = (double *) G_MALLOC(2 * rootN * sizeof(double));
  fwdvals = (double *) G_MALLOC(2 * 6 * sizeof(double));
  spot = (double *) malloc(2 * 6 * sizeof(double));
  Global->id = 0;
  LOCKINIT(Global->idlock);
  BARINIT(Global->start, P);

  srand48(12345);
  for (i = 0; i < 2 * N; i++) {
    x[i] = orig[i] = drand48() - 0.5;
  }
  for (k = 0; k < rootN; k++) {
    roots[2 * k] = cos(2.0 * PI * (double)k / (double)rootN);
    roots[2 * k + 1] = -sin(2.0 * PI * (double)k / (double)rootN);
  }

  /* Direct DFT at a few frequencies, for the spot check of the forward transform. */
  probes[2] = rootN + 3;
  probes[3] = N / 2;
  probes[4] = N - 7;
  probes[5] = N - 1;
  for (k = 0; k < 6; k++) {
    double re = 0.0, im = 0.0;
    for (i = 0; i < N; i++) {
      double angle = -2.0 * PI * (double)((i * probes[k]) % N) / (double)N;
      re += orig[2 * i] * cos(angle) - orig[2 * i + 1] * sin(angle);
      im += orig[2 * i] * sin(angle) + orig[2 * i + 1] * cos(angle);
    }
    spot[2 * k] = re;
    spot[2 * k + 1] = im;
  }

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  for (k = 0; k < 6; k++) {
    double dr = fwdvals[2 * k] - spot[2 * k];
    double di = fwdvals[2 * k + 1] - spot[2 * k + 1];
    double d = sqrt(dr * dr + di * di);
    double mag = sqrt(spot[2 * k] * spot[2 * k] + spot[2 * k + 1] * spot[2 * k + 1]);
    if (d > maxerr) maxerr = d;
    if (mag > scale) scale = mag;
  }
  printf("fft: forward transform max spot error %.3e (magnitude %.3e)\n", maxerr, scale);
  if (maxerr > 1e-8 * (scale + 1.0)) {
    printf("FAIL fft m=%ld p=%ld: forward transform differs from the DFT by %.3e\n",
           M, P, maxerr);
    exit(1);
  }
  if (test_inverse) {
    maxerr = 0.0;
    for (i = 0; i < 2 * N; i++) {
      double d = fabs(x[i] - orig[i]);
      if (d > maxerr) maxerr = d;
    }
    printf("fft: inverse transform max error %.3e\n", maxerr);
    if (maxerr > 1e-9) {
      printf("FAIL fft m=%ld p=%ld: inverse differs from the input by %.3e\n", M, P, maxerr);
      exit(1);
    }
  }
  printf("fft: %ld points, %ld processes, %lu us\n", N, P,
         Global->finishtime - Global->starttime);
  printf("PASS fft m=%ld p=%ld%s\n", M, P, test_inverse ? " (inverse: TEST PASSED)" : "");
  MAIN_END
}
