/*
 * radix.C -- parallel LSD integer radix sort whose phases are ordered by PAUSE flags (no
 * barriers in the sort), in the style of SPLASH-2 RADIX.
 *
 *   radix [-n KEYS] [-r RADIX] [-m MAXKEY] [-p P] [-t]
 *     -n KEYS    number of keys (default 65536)
 *     -r RADIX   radix, a power of two (default 256)
 *     -m MAXKEY  keys are in [0, MAXKEY) (default 2^20)
 *     -p P       number of processes (default 1)
 *     -t         accepted for compatibility: the check always runs
 *
 * Per digit: every process histograms its slice of the keys and raises its flag hist_ready[p];
 * process 0 waits for all of them, computes the ranks and raises prefix_ready; every process
 * scatters its keys and raises scatter_done[p]; process 0 waits for all of them and raises
 * pass_done[pass % 2]. Flags are cleared by process 0 once nobody can still be waiting on them.
 * The check: sorted, and the same multiset of keys (count, sum, sum of squares).
 * Prints "PASS radix ..." or "FAIL radix ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define MAX_PROCS 64

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  PAUSEDEC(prefix_ready)
  PAUSEDEC(pass_done[2])
  PAUSEDEC(hist_ready[MAX_PROCS])
  PAUSEDEC(scatter_done[MAX_PROCS])
  unsigned long starttime;
  unsigned long finishtime;
};

struct GlobalMemory *Global;
long num_keys = 65536;
long radix = 256;
long max_key = 1L << 20;
long P = 1;
long log2_radix;
long num_passes;
unsigned long *keys[2];  /* source and destination of each pass, swapped every pass */
long *hist;              /* P x radix: how many keys of each digit a process holds */
long *rank;              /* P x radix: where a process puts its first key of each digit */

void SlaveStart(void);

void SlaveStart(void)
{
  long MyNum, pass, q, d, i, first, last, digit_bits;
  long *my_hist, *my_rank;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  first = MyNum * num_keys / P;
  last = (MyNum + 1) * num_keys / P;
  my_hist = &hist[MyNum * radix];
  my_rank = &rank[MyNum * radix];
  if (MyNum == 0) {
    CLOCK(Global->starttime);
  }

  for (pass = 0; pass < num_passes; pass++) {
    unsigned long *src = keys[pass % 2];
    unsigned long *dst = keys[(pass + 1) % 2];
    digit_bits = pass * log2_radix;

    /* Phase 1: histogram of my slice. */
    for (d = 0; d < radix; d++) my_hist[d] = 0;
    for (i = first; i < last; i++) my_hist[(src[i] >> digit_bits) & (radix - 1)]++;
    SETPAUSE(Global->hist_ready[MyNum]);

    /* Phase 2 (process 0): ranks. */
    if (MyNum == 0) {
      long base = 0;
      for (q = 0; q < P; q++) {
        WAITPAUSE(Global->hist_ready[q]);
        CLEARPAUSE(Global->hist_ready[q]);
      }
      /* Everybody has left pass_done of the previous pass (they raised hist_ready since). */
      if (pass > 0) {
        CLEARPAUSE(Global->pass_done[(pass - 1) % 2]);
      }
      for (d = 0; d < radix; d++) {
        for (q = 0; q < P; q++) {
          rank[q * radix + d] = base;
          base += hist[q * radix + d];
        }
      }
      SETPAUSE(Global->prefix_ready);
    }

    /* Phase 3: scatter my slice. */
    WAITPAUSE(Global->prefix_ready);
    for (i = first; i < last; i++) {
      long digit = (long)((src[i] >> digit_bits) & (radix - 1));
      dst[my_rank[digit]++] = src[i];
    }
    SETPAUSE(Global->scatter_done[MyNum]);

    /* Phase 4 (process 0): the pass is over when every slice is scattered. */
    if (MyNum == 0) {
      for (q = 0; q < P; q++) {
        WAITPAUSE(Global->scatter_done[q]);
        CLEARPAUSE(Global->scatter_done[q]);
      }
      CLEARPAUSE(Global->prefix_ready);
      SETPAUSE(Global->pass_done[pass % 2]);
    }
    WAITPAUSE(Global->pass_done[pass % 2]);
  }
  if (MyNum == 0) {
    CLOCK(Global->finishtime);
  }
}

int main(int argc, char *argv[])
{
  long i, q, bad = 0;
  int c;
  unsigned long sum0 = 0, sq0 = 0, sum1 = 0, sq1 = 0;
  unsigned long *sorted;

  while ((c = getopt(argc, argv, "n:r:m:p:t")) != -1) {
    switch (c) {
    case 'n': num_keys = atol(optarg); break;
    case 'r': radix = atol(optarg); break;
    case 'm': max_key = atol(optarg); break;
    case 'p': P = atol(optarg); break;
    case 't': break;
    default:
      fprintf(stderr, "usage: radix [-n KEYS] [-r RADIX] [-m MAXKEY] [-p P] [-t]\n");
      exit(2);
    }
  }
  if (num_keys < 1 || radix < 2 || (radix & (radix - 1)) != 0 || max_key < 2 || P < 1 ||
      P > MAX_PROCS) {
    fprintf(stderr, "radix: bad arguments (radix must be a power of two, -p at most %d)\n",
            MAX_PROCS);
    exit(2);
  }
  for (log2_radix = 0; (1L << log2_radix) < radix; log2_radix++) {
  }
  num_passes = 0;
  for (i = 1; i < max_key; i <<= log2_radix) num_passes++;

  MAIN_INITENV(,(num_keys * 16 + 1000000))

  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  keys[0] = (unsigned long *) G_MALLOC(num_keys * sizeof(unsigned long));
  keys[1] = (unsigned long *) G_MALLOC(num_keys * sizeof(unsigned long));
  hist = (long *) G_MALLOC(P * radix * sizeof(long));
  rank = (long *) G_MALLOC(P * radix * sizeof(long));
  Global->id = 0;
  LOCKINIT(Global->idlock);
  PAUSEINIT(Global->prefix_ready);
  PAUSEINIT(Global->pass_done[0]);
  PAUSEINIT(Global->pass_done[1]);
  for (q = 0; q < P; q++) {
    PAUSEINIT(Global->hist_ready[q]);
    PAUSEINIT(Global->scatter_done[q]);
  }

  srand48(7);
  for (i = 0; i < num_keys; i++) {
    keys[0][i] = (unsigned long)(drand48() * (double)max_key) % (unsigned long)max_key;
    sum0 += keys[0][i];
    sq0 += keys[0][i] * keys[0][i];
  }

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  sorted = keys[num_passes % 2];
  for (i = 0; i < num_keys; i++) {
    if (i > 0 && sorted[i - 1] > sorted[i]) bad++;
    sum1 += sorted[i];
    sq1 += sorted[i] * sorted[i];
  }
  printf("radix: %ld keys, radix %ld, %ld passes, %ld processes, %lu us\n", num_keys, radix,
         num_passes, P, Global->finishtime - Global->starttime);
  if (bad != 0 || sum0 != sum1 || sq0 != sq1) {
    printf("FAIL radix n=%ld p=%ld: %ld keys out of order, sums %lu/%lu, squares %lu/%lu\n",
           num_keys, P, bad, sum0, sum1, sq0, sq1);
    exit(1);
  }
  printf("PASS radix n=%ld p=%ld: All keys in place\n", num_keys, P);
  MAIN_END
}
