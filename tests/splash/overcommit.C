/*
 * overcommit.C -- more CREATEs than nodes: P workers (default 4) are created while the master
 * only waits, so several of them share a node (as extra threads). They number themselves, hammer
 * a lock-protected counter, fill their slots of a shared array, meet at barriers and check each
 * other's slots. A second round uses CREATE(Worker, P), where the master is one of the P.
 *
 *   overcommit [-p P] [-i INCREMENTS]
 *
 * Prints "PASS overcommit ..." or "FAIL overcommit ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define MAX_PROCS 256

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(countlock)
  long counter;
  LOCKDEC(errlock)
  long errors;
  BARDEC(filled)
  BARDEC(checked)
  long slot[MAX_PROCS];
};

struct GlobalMemory *Global;
long P = 4;
long increments = 200;

void Worker(void);

void Worker(void)
{
  long MyNum, i, errors = 0;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  for (i = 0; i < increments; i++) {
    LOCK(Global->countlock);
    Global->counter++;
    UNLOCK(Global->countlock);
  }
  Global->slot[MyNum] = 1000 + MyNum;
  BARRIER(Global->filled, P);
  for (i = 0; i < P; i++) {
    if (Global->slot[i] != 1000 + i) errors++;
  }
  if (Global->counter != P * increments) errors++;
  BARRIER(Global->checked, P);
  if (errors != 0) {
    LOCK(Global->errlock);
    Global->errors += errors;
    UNLOCK(Global->errlock);
  }
}

int main(int argc, char *argv[])
{
  long i, round;
  int c;

  while ((c = getopt(argc, argv, "p:i:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    case 'i': increments = atol(optarg); break;
    default:
      fprintf(stderr, "usage: overcommit [-p P] [-i INCREMENTS]\n");
      exit(2);
    }
  }
  if (P < 1 || P > MAX_PROCS || increments < 0) {
    fprintf(stderr, "overcommit: bad arguments\n");
    exit(2);
  }

  MAIN_INITENV
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->errors = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->countlock);
  LOCKINIT(Global->errlock);
  BARINIT(Global->filled, P);
  BARINIT(Global->checked, P);

  for (round = 1; round <= 2; round++) {
    Global->id = 0;
    Global->counter = 0;
    for (i = 0; i < MAX_PROCS; i++) Global->slot[i] = -1;
    if (round == 1) {
      for (i = 0; i < P; i++) {
        CREATE(Worker);
      }
    } else {
      CREATE(Worker, P);
    }
    WAIT_FOR_END(P);
    if (Global->id != P || Global->counter != P * increments) {
      printf("overcommit: round %ld: %ld workers ran, counter %ld (expected %ld, %ld)\n",
             round, Global->id, Global->counter, P, P * increments);
      Global->errors++;
    }
  }

  if (Global->errors != 0) {
    printf("FAIL overcommit p=%ld: %ld errors\n", P, Global->errors);
    exit(1);
  }
  printf("PASS overcommit p=%ld\n", P);
  MAIN_END
}
