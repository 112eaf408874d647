/*
 * spin.C -- plain flags in shared memory used for synchronisation, without any lock (the
 * programs of the suite do this; it needs a sequentially consistent protocol):
 *   1. every process increments a counter under a lock, then spins on it (no lock) until it
 *      reaches P;
 *   2. a token goes round the processes ROUNDS times: process i spins (no lock) until turn == i,
 *      checks the data the previous holder wrote, writes its own, and passes turn on with a plain
 *      store. The turn flag is a global in .bss, the data is in G_MALLOC memory.
 *
 *   spin [-p P] [-r ROUNDS]
 *
 * Prints "PASS spin ..." or "FAIL spin ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(countlock)
  volatile long arrived;
  LOCKDEC(errlock)
  long errors;
};

struct GlobalMemory *Global;
long P = 1;
long rounds = 50;
volatile long turn;         /* whose turn it is: a plain flag in the data segment */
volatile long *baton;       /* written by the holder of the turn */

void SlaveStart(void);

void SlaveStart(void)
{
  long MyNum, r, errors = 0;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  LOCK(Global->countlock);
  Global->arrived++;
  UNLOCK(Global->countlock);
  while (Global->arrived < P) {
    /* spin without a lock */
  }

  for (r = 0; r < rounds; r++) {
    long expected = r * P + MyNum;   /* passes of the token so far */
    while (turn != expected) {
      /* spin without a lock until the token is mine */
      if (turn > expected) {
        errors++;
        break;
      }
    }
    if (baton[0] != expected || baton[1] != 3 * expected) {
      errors++;
    }
    baton[0] = expected + 1;
    baton[1] = 3 * (expected + 1);
    turn = expected + 1;
  }

  if (errors != 0) {
    LOCK(Global->errlock);
    Global->errors += errors;
    UNLOCK(Global->errlock);
  }
}

int main(int argc, char *argv[])
{
  int c;

  while ((c = getopt(argc, argv, "p:r:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    case 'r': rounds = atol(optarg); break;
    default:
      fprintf(stderr, "usage: spin [-p P] [-r ROUNDS]\n");
      exit(2);
    }
  }
  if (P < 1 || rounds < 0) {
    fprintf(stderr, "spin: bad arguments\n");
    exit(2);
  }

  MAIN_INITENV
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  baton = (volatile long *) G_MALLOC(2 * sizeof(long));
  Global->id = 0;
  Global->arrived = 0;
  Global->errors = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->countlock);
  LOCKINIT(Global->errlock);
  turn = 0;
  baton[0] = 0;
  baton[1] = 0;

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  if (Global->errors != 0 || turn != rounds * P || baton[0] != rounds * P) {
    printf("FAIL spin p=%ld: %ld errors, turn %ld, baton %ld\n", P, Global->errors, turn,
           baton[0]);
    exit(1);
  }
  printf("PASS spin p=%ld rounds=%ld\n", P, rounds);
  MAIN_END
}
