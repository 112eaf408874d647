/*
 * forms.C -- the statement and expression forms of the suite's own macro files (c.m4.null,
 * c.m4.null.POSIX, pthread.m4.stougie), which real programs rely on:
 *   - G_MALLOC and NU_MALLOC end with a semicolon: programs write
 *         x = (double *) G_MALLOC(n)
 *     with no semicolon of their own, also with the node argument on the next line;
 *   - G_MALLOC_F and NU_MALLOC_F are expressions (usable as a function argument);
 *   - statement macros are one statement: usable without a semicolon, as the branches of an
 *     if/else, back to back;
 *   - the DYN_* and AUG_SET_* hooks are empty statements;
 *   - MAIN_ENV/EXTERN_ENV bring the headers of the pthread macro file (assert, <stdint.h>).
 * Every process fills its slice of blocks allocated in these forms; after a barrier process 0
 * checks everything.
 *
 *   forms [-p P] [-n N]
 *
 * Prints "PASS forms ..." or "FAIL forms ..." (exit 1).
 */
MAIN_ENV
#include <stdio.h>
#include <unistd.h>

#define MAX_PROCS 64

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(sumlock)
  ALOCKDEC(slots, 4)
  BARDEC(bar)
  long sum;
  long slot_count[4];
  unsigned long start, end;
};

struct GlobalMemory *Global;
long P = 1;
long N = 4096;
double *a;
long *b;
uint32_t *c;
long *d;
long *e;

static long fill(long *v, long n, long seed)
{
  long i, s = 0;
  for (i = 0; i < n; i++) {
    v[i] = seed + i;
    s += v[i];
  }
  return s;
}

void SlaveStart(void);

void SlaveStart(void)
{
  long MyNum, i, lo, hi, local = 0;
  long *mine;

  LOCK(Global->idlock)
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock)

  DYN_TRACE_ON
  DYN_SIM_ON
  AUG_SET_LOLIMIT(Global, 0)
  AUG_SET_HILIMIT(Global, 0)

  lo = MyNum * N / P;
  hi = (MyNum + 1) * N / P;
  for (i = lo; i < hi; i++) {
    a[i] = 0.5 * (double)i;
    b[i] = 3 * i;
    c[i] = (uint32_t)(7 * i);
    d[i] = -i;
    local += i;
  }
  /* A worker allocation in the statement form, no semicolon, then a use. */
  mine = (long *) G_MALLOC(16 * sizeof(long))
  local += fill(mine, 16, MyNum) - (16 * MyNum + 120);
  G_FREE(mine)

  /* Statement macros as the branches of an if/else, without semicolons. */
  if (MyNum % 2 == 0)
    ALOCK(Global->slots, 0)
  else
    ALOCK(Global->slots, 1)
  Global->slot_count[MyNum % 2]++;
  if (MyNum % 2 == 0)
    AULOCK(Global->slots, 0)
  else
    AULOCK(Global->slots, 1)

  LOCK(Global->sumlock) Global->sum += local; UNLOCK(Global->sumlock)
  DYN_SIM_OFF
  DYN_TRACE_OFF
  BARRIER(Global->bar, P)
}

int main(int argc, char *argv[])
{
  int ch;
  long i, errors = 0, want;
  unsigned long t0;

  while ((ch = getopt(argc, argv, "p:n:")) != -1) {
    switch (ch) {
    case 'p': P = atol(optarg); break;
    case 'n': N = atol(optarg); break;
    default:
      fprintf(stderr, "usage: forms [-p P] [-n N]\n");
      exit(2);
    }
  }
  if (P < 1 || P > MAX_PROCS || N < P) {
    fprintf(stderr, "forms: need 1 <= P <= %d and N >= P\n", MAX_PROCS);
    exit(2);
  }

  MAIN_INITENV(,80000000)
  CLOCK(t0)
  /* lu (contiguous_blocks) and cholesky: no semicolon after G_MALLOC. */
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory))
  a = (double *) G_MALLOC(N * sizeof(double))
  b = (long *) G_MALLOC(N * sizeof(long),
                        0)
  c = (uint32_t *) NU_MALLOC(N * sizeof(uint32_t))
  /* With a semicolon of its own too (an empty statement follows). */
  d = (long *) G_MALLOC(N * sizeof(long));
  /* The _F forms are expressions. */
  want = fill((long *) G_MALLOC_F(8 * sizeof(long)), 8, 1) + fill((long *) NU_MALLOC_F(8 * sizeof(long)), 8, 2);
  e = (long *) G_MALLOC_F(sizeof(long));
  assert(a != NULL && b != NULL && c != NULL && d != NULL && e != NULL);
  if (want != 36 + 44) {
    printf("FAIL forms p=%ld: G_MALLOC_F/NU_MALLOC_F as expressions gave %ld\n", P, want);
    exit(1);
  }

  Global->id = 0;
  Global->sum = 0;
  Global->slot_count[0] = Global->slot_count[1] = 0;
  LOCKINIT(Global->idlock)
  LOCKINIT(Global->sumlock)
  ALOCKINIT(Global->slots, 4)
  BARINIT(Global->bar, P)

  CREATE(SlaveStart, P)
  WAIT_FOR_END(P)
  CLOCK(Global->end)
  Global->start = t0;

  for (i = 0; i < N; i++) {
    if (a[i] != 0.5 * (double)i || b[i] != 3 * i || c[i] != (uint32_t)(7 * i) || d[i] != -i) {
      if (errors < 5)
        fprintf(stderr, "forms: element %ld is wrong\n", i);
      errors++;
    }
  }
  if (Global->sum != N * (N - 1) / 2) {
    fprintf(stderr, "forms: sum %ld, expected %ld\n", Global->sum, N * (N - 1) / 2);
    errors++;
  }
  if (Global->slot_count[0] + Global->slot_count[1] != P) {
    fprintf(stderr, "forms: %ld lock-array entries, expected %ld\n",
            Global->slot_count[0] + Global->slot_count[1], P);
    errors++;
  }
  if (Global->end < Global->start) {
    fprintf(stderr, "forms: the clock went backwards\n");
    errors++;
  }
  if (errors != 0) {
    printf("FAIL forms p=%ld: %ld errors\n", P, errors);
    exit(1);
  }
  printf("PASS forms p=%ld n=%ld\n", P, N);
  MAIN_END
}
