/*
 * placement.C -- data the master allocates and each worker initialises and then writes alone
 * (the pattern of ocean's partitions). Under a home-based protocol (sc-mw, scope) G_MALLOC
 * homes each page on the first process to touch it, so a process writing its own block sends
 * no diffs: the harness runs it under sc-mw with SVM_STATS=json and checks the diff bytes.
 *
 *   1. process 0 allocates P blocks of BLOCK_PAGES pages (and nothing else on them);
 *   2. each process fills its own block (its first touch), then for ROUNDS rounds writes
 *      every word of its block again and passes a barrier, and reads one word of the next
 *      process's block, which must hold that process's value of the round;
 *   3. at the end process 0 checks every block.
 *
 *   placement [-p P] [-r ROUNDS]
 *
 * Prints "PASS placement ..." or "FAIL placement ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define BLOCK_PAGES 8
#define PAGE 4096
#define WORDS (BLOCK_PAGES * PAGE / sizeof(long))

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  BARDEC(bar)
  LOCKDEC(errlock)
  long errors;
};

struct GlobalMemory *Global;
long *blocks[64];
long P = 1;
long rounds = 20;

void SlaveStart(void);

static long value(long proc, long round, long i)
{
  return proc * 1000003 + round * 1009 + i;
}

void SlaveStart(void)
{
  long me, r, i, errors = 0;
  long *mine, *next;

  LOCK(Global->idlock);
  me = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  mine = blocks[me];
  next = blocks[(me + 1) % P];
  for (i = 0; i < (long)WORDS; i++) {
    mine[i] = value(me, -1, i);
  }
  BARRIER(Global->bar, P);
  for (r = 0; r < rounds; r++) {
    for (i = 0; i < (long)WORDS; i++) {
      mine[i] = value(me, r, i);
    }
    BARRIER(Global->bar, P);
    i = (r * 97) % (long)WORDS;
    if (next[i] != value((me + 1) % P, r, i)) {
      errors++;
    }
    BARRIER(Global->bar, P);
  }
  LOCK(Global->errlock);
  Global->errors += errors;
  UNLOCK(Global->errlock);
}

int main(int argc, char **argv)
{
  long i, p, errors = 0;
  int c;

  while ((c = getopt(argc, argv, "p:r:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    case 'r': rounds = atol(optarg); break;
    default: fprintf(stderr, "usage: placement [-p P] [-r ROUNDS]\n"); exit(2);
    }
  }
  if (P < 1 || P > 64 || rounds < 1) {
    fprintf(stderr, "placement: -p must be 1..64 and -r positive\n");
    exit(2);
  }
  MAIN_INITENV
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->errlock);
  BARINIT(Global->bar, P);
  Global->id = 0;
  Global->errors = 0;
  for (p = 0; p < P; p++) {
    blocks[p] = (long *) G_MALLOC(BLOCK_PAGES * PAGE);
  }
  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);
  for (p = 0; p < P; p++) {
    for (i = 0; i < (long)WORDS; i++) {
      if (blocks[p][i] != value(p, rounds - 1, i)) {
        errors++;
      }
    }
  }
  errors += Global->errors;
  if (errors != 0) {
    printf("FAIL placement: %ld wrong words\n", errors);
    exit(1);
  }
  printf("PASS placement p=%ld rounds=%ld\n", P, rounds);
  MAIN_END
}
