/*
 * create.C -- both CREATE forms, and several CREATE/WAIT_FOR_END rounds (workers go back to
 * idle and are dispatched again):
 *   round 1, the original form:  for (i = 1; i < P; i++) CREATE(Slave); Slave(); WAIT_FOR_END(P-1)
 *   round 2, the newer form:     CREATE(Slave, P); WAIT_FOR_END(P)
 *   round 3, the original form again, then round 4 the newer form again.
 * In every round each process numbers itself under a lock, meets the others at a barrier and
 * records its round; the master checks after each WAIT_FOR_END.
 *
 *   create [-p P]
 *
 * Prints "PASS create ..." or "FAIL create ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define MAX_PROCS 64

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  BARDEC(met)
  long round;
  long ran[MAX_PROCS];
  long ids_seen;
};

struct GlobalMemory *Global;
long P = 1;
long errors;

void Slave(void);

void Slave(void)
{
  long MyNum;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  Global->ids_seen |= 1L << MyNum;
  UNLOCK(Global->idlock);

  BARRIER(Global->met, P);
  Global->ran[MyNum] = Global->round;
}

static void check_round(long round)
{
  long i;
  if (Global->id != P || Global->ids_seen != (P == 64 ? -1L : (1L << P) - 1)) {
    printf("create: round %ld: %ld processes numbered themselves, expected %ld\n", round,
           Global->id, P);
    errors++;
  }
  for (i = 0; i < P; i++) {
    if (Global->ran[i] != round) {
      printf("create: round %ld: process %ld did not run (it says round %ld)\n", round, i,
             Global->ran[i]);
      errors++;
    }
  }
  Global->id = 0;
  Global->ids_seen = 0;
  Global->round = round + 1;
}

int main(int argc, char *argv[])
{
  long i, round;
  int c;

  while ((c = getopt(argc, argv, "p:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    default:
      fprintf(stderr, "usage: create [-p P]\n");
      exit(2);
    }
  }
  if (P < 1 || P > MAX_PROCS) {
    fprintf(stderr, "create: -p must be in 1..%d\n", MAX_PROCS);
    exit(2);
  }

  MAIN_INITENV(,1000000,)
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  Global->ids_seen = 0;
  Global->round = 1;
  for (i = 0; i < MAX_PROCS; i++) Global->ran[i] = 0;
  LOCKINIT(Global->idlock);
  BARINIT(Global->met);

  for (round = 1; round <= 4; round++) {
    if (round % 2 == 1) {
      for (i = 1; i < P; i++) {
        CREATE(Slave)
      }
      Slave();
      WAIT_FOR_END(P - 1)
    } else {
      CREATE(Slave, P);
      WAIT_FOR_END(P);
    }
    check_round(round);
  }

  if (errors != 0) {
    printf("FAIL create p=%ld: %ld errors\n", P, errors);
    exit(1);
  }
  printf("PASS create p=%ld rounds=4\n", P);
  MAIN_END
}
