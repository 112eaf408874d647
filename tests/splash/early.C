/*
 * early.C -- CLOCK and G_MALLOC used before MAIN_INITENV (several programs of the suite do),
 * and CLOCK values taken on different processes compared (one time base for the job, in
 * microseconds, fitting an unsigned 32-bit variable).
 *
 *   early [-p P]
 *
 * Prints "PASS early ..." or "FAIL early ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define MAX_PROCS 64

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  BARDEC(go)
  unsigned long stamp[MAX_PROCS];
  long errors[MAX_PROCS];
};

struct GlobalMemory *Global;
long *early_block;
long P = 1;
unsigned int start32;     /* CLOCK into a 32-bit variable */
unsigned long start;

void SlaveStart(void);

void SlaveStart(void)
{
  long MyNum, i;
  unsigned long now;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  Global->errors[MyNum] = 0;
  for (i = 0; i < 1000; i++) {
    if (early_block[i] != 7 * i) {
      Global->errors[MyNum]++;
      break;
    }
  }
  BARRIER(Global->go, P);
  CLOCK(now);
  Global->stamp[MyNum] = now;
}

int main(int argc, char *argv[])
{
  long i, errors = 0;
  int c;
  unsigned long before, after;

  CLOCK(start);
  CLOCK(start32);
  early_block = (long *) G_MALLOC(1000 * sizeof(long));
  for (i = 0; i < 1000; i++) early_block[i] = 7 * i;

  while ((c = getopt(argc, argv, "p:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    default:
      fprintf(stderr, "usage: early [-p P]\n");
      exit(2);
    }
  }
  if (P < 1 || P > MAX_PROCS) {
    fprintf(stderr, "early: -p must be in 1..%d\n", MAX_PROCS);
    exit(2);
  }

  MAIN_INITENV(,4000000)
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  LOCKINIT(Global->idlock);
  BARINIT(Global->go, P);
  usleep(20000);
  CLOCK(before);

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);
  CLOCK(after);

  if (!(start <= before && before <= after)) {
    printf("early: master's CLOCK goes backwards: %lu %lu %lu\n", start, before, after);
    errors++;
  }
  if (before - start < 20000) {
    printf("early: CLOCK is not in microseconds: %lu us across a 20 ms sleep\n",
           before - start);
    errors++;
  }
  if ((unsigned long)start32 > start + 1000000 || after > 3600UL * 1000000UL) {
    printf("early: CLOCK values too large for a fresh job: %u, %lu\n", start32, after);
    errors++;
  }
  for (i = 0; i < P; i++) {
    errors += Global->errors[i];
    /* Taken on other processes between the master's before and after (1 ms of slack). */
    if (Global->stamp[i] + 1000 < before || Global->stamp[i] > after + 1000) {
      printf("early: process %ld's CLOCK %lu is outside [%lu, %lu]\n", i, Global->stamp[i],
             before, after);
      errors++;
    }
  }
  if (errors != 0) {
    printf("FAIL early p=%ld: %ld errors\n", P, errors);
    exit(1);
  }
  printf("PASS early p=%ld\n", P);
  MAIN_END
}
