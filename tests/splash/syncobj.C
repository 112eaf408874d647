/*
 * syncobj.C -- synchronisation objects declared inside G_MALLOC'd structs and arrays of
 * structs: a lock, a barrier and a pause flag in every cell of an array, lock arrays (ALOCK),
 * locks in an array of ids (LOCKDEC(x[N])), NLOCK locks, a global-subscript object (GETSUB,
 * two rounds), and the fences.
 *
 *   syncobj [-p P] [-c CELLS] [-i ITER]
 *
 * Prints "PASS syncobj ..." or "FAIL syncobj ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define NALOCKS 8
#define NLOCKARRAY 4
#define NITEMS 300

struct cell {
  LOCKDEC(lock)
  long count;
  BARDEC(bar)
  PAUSEDEC(flag)
  long payload;
};

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  ALOCKDEC(alocks, NALOCKS)
  long acount[NALOCKS];
  LOCKDEC(plain[NLOCKARRAY])
  long pcount[NLOCKARRAY];
  NLOCKDEC(nlock)
  long ncount;
  GSDEC(sub)
  long done[NITEMS];
  LOCKDEC(errlock)
  long errors;
};

struct GlobalMemory *Global;
struct cell *cells;
long P = 1;
long ncells = 16;
long iter = 100;

void SlaveStart(void);

static void error(long who, const char *what)
{
  fprintf(stderr, "syncobj: process %ld: %s\n", who, what);
  LOCK(Global->errlock);
  Global->errors++;
  UNLOCK(Global->errlock);
}

void SlaveStart(void)
{
  long MyNum, i, k, s, round;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  for (i = 0; i < iter; i++) {
    k = (i * 7 + MyNum) % ncells;
    LOCK(cells[k].lock);
    cells[k].count++;
    UNLOCK(cells[k].lock);
    k = (i + MyNum) % NALOCKS;
    ALOCK(Global->alocks, k);
    Global->acount[k]++;
    AULOCK(Global->alocks, k);
    k = i % NLOCKARRAY;
    LOCK(Global->plain[k]);
    Global->pcount[k]++;
    UNLOCK(Global->plain[k]);
    NLOCK(Global->nlock);
    Global->ncount++;
    NUNLOCK(Global->nlock);
  }

  /* A different barrier object of the array for every step. */
  for (k = 0; k < ncells; k++) {
    BARRIER(cells[k].bar, P);
  }
  if (MyNum == 0) {
    long total = 0;
    for (k = 0; k < ncells; k++) total += cells[k].count;
    if (total != P * iter) error(MyNum, "cell lock counts");
    for (k = 0; k < NALOCKS; k++) total += Global->acount[k];
    if (total != 2 * P * iter) error(MyNum, "lock array counts");
    for (k = 0; k < NLOCKARRAY; k++) total += Global->pcount[k];
    if (total != 3 * P * iter || Global->ncount != P * iter) error(MyNum, "lock counts");
  }

  /* Pause flags in the cells: the process numbered k % P publishes cell k. */
  for (k = MyNum; k < ncells; k += P) {
    cells[k].payload = 100 * k + 1;
    RELEASE_FENCE
    SETPAUSE(cells[k].flag);
  }
  for (k = 0; k < ncells; k++) {
    WAITPAUSE(cells[k].flag);
    ACQUIRE_FENCE
    if (cells[k].payload != 100 * k + 1) error(MyNum, "pause-flag payload");
  }
  FULL_FENCE

  /* Self-scheduled items, twice: GETSUB hands out 0..NITEMS-1 then -1 to everybody. */
  for (round = 1; round <= 2; round++) {
    for (;;) {
      GETSUB(Global->sub, s, NITEMS - 1, P);
      if (s < 0) break;
      if (s >= NITEMS) {
        error(MyNum, "subscript out of range");
        break;
      }
      Global->done[s] += round;
    }
    BARRIER(cells[0].bar, P);
  }
}

int main(int argc, char *argv[])
{
  long i, k;
  int c;

  while ((c = getopt(argc, argv, "p:c:i:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    case 'c': ncells = atol(optarg); break;
    case 'i': iter = atol(optarg); break;
    default:
      fprintf(stderr, "usage: syncobj [-p P] [-c CELLS] [-i ITER]\n");
      exit(2);
    }
  }
  if (P < 1 || ncells < 1 || iter < 0) {
    fprintf(stderr, "syncobj: bad arguments\n");
    exit(2);
  }

  MAIN_INITENV(,1000000)
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  cells = (struct cell *) G_MALLOC(ncells * sizeof(struct cell));
  Global->id = 0;
  Global->errors = 0;
  Global->ncount = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->errlock);
  ALOCKINIT(Global->alocks, NALOCKS);
  for (k = 0; k < NALOCKS; k++) Global->acount[k] = 0;
  for (k = 0; k < NLOCKARRAY; k++) {
    LOCKINIT(Global->plain[k]);
    Global->pcount[k] = 0;
  }
  NLOCKINIT(Global->nlock);
  GSINIT(Global->sub);
  for (i = 0; i < NITEMS; i++) Global->done[i] = 0;
  for (k = 0; k < ncells; k++) {
    LOCKINIT(cells[k].lock);
    BARINIT(cells[k].bar, P);
    PAUSEINIT(cells[k].flag);
    cells[k].count = 0;
    cells[k].payload = 0;
  }

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  for (i = 0; i < NITEMS; i++) {
    if (Global->done[i] != 3) {
      printf("syncobj: item %ld was handed out wrongly (mark %ld, expected 3)\n", i,
             Global->done[i]);
      Global->errors++;
      break;
    }
  }
  for (k = 0; k < ncells; k++) {
    CLEARPAUSE(cells[k].flag);
  }
  if (Global->errors != 0) {
    printf("FAIL syncobj p=%ld: %ld errors\n", P, Global->errors);
    exit(1);
  }
  printf("PASS syncobj p=%ld cells=%ld\n", P, ncells);
  MAIN_END
}
