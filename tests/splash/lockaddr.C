/*
 * lockaddr.C -- locks and barriers are their variables, as with the suite's pthread macros:
 * LOCK, ALOCK and BARRIER name the object by its address and never read it, so taking a lock
 * or passing a barrier whose variable shares a page with data another node keeps writing costs
 * no page fault.
 *
 *   1. ROUNDS rounds: process 0 writes a word on the page of the objects ("hot"), then every
 *      process takes and releases the lock of that page, holds both locks of a two-lock array
 *      at once (adjacent elements are distinct locks), and passes the barrier of that page.
 *      Only process 0 touches the page. The harness checks the remote faults of the run
 *      (SVM_STATS=json): reading the objects would make at least ROUNDS of them.
 *   2. mutual exclusion: every process adds to a counter INCS times, alternately through
 *      LOCK(Global->countlock) and LOCK(*p) with p = &Global->countlock (one lock, two forms).
 *
 *   lockaddr [-p P] [-r ROUNDS]
 *
 * Prints "PASS lockaddr ..." or "FAIL lockaddr ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define INCS 20
#define PAGE 4096

struct Hot {
  LOCKDEC(lock)
  BARDEC(bar)
  ALOCKDEC(pair, 2)
  long written;
};

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(countlock)
  long count;
  long held;
  LOCKDEC(errlock)
  long errors;
};

struct GlobalMemory *Global;
struct Hot *hot;
long P = 1;
long rounds = 1000;

void SlaveStart(void);

void SlaveStart(void)
{
  long MyNum, r, errors = 0;
  long *countlock;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  BARRIER(hot->bar, P);
  for (r = 0; r < rounds; r++) {
    if (MyNum == 0) {
      hot->written = r;
    }
    LOCK(hot->lock);
    UNLOCK(hot->lock);
    ALOCK(hot->pair, 0);
    ALOCK(hot->pair, 1);
    AULOCK(hot->pair, 1);
    AULOCK(hot->pair, 0);
    BARRIER(hot->bar, P);
  }

  countlock = &Global->countlock;
  for (r = 0; r < INCS; r++) {
    if (r % 2 == 0) {
      LOCK(Global->countlock);
    } else {
      LOCK(*countlock);
    }
    if (Global->held != 0) {
      errors++;
    }
    Global->held = 1;
    Global->count++;
    Global->held = 0;
    if (r % 2 == 0) {
      UNLOCK(Global->countlock);
    } else {
      UNLOCK(*countlock);
    }
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
      fprintf(stderr, "usage: lockaddr [-p P] [-r ROUNDS]\n");
      exit(2);
    }
  }
  if (P < 1 || rounds < 0) {
    fprintf(stderr, "lockaddr: bad arguments\n");
    exit(2);
  }

  MAIN_INITENV
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  /* A page of its own (G_MALLOC of a page or more is page aligned). */
  hot = (struct Hot *) G_MALLOC(PAGE);
  Global->id = 0;
  Global->count = 0;
  Global->held = 0;
  Global->errors = 0;
  hot->written = -1;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->countlock);
  LOCKINIT(Global->errlock);
  LOCKINIT(hot->lock);
  BARINIT(hot->bar, P);
  ALOCKINIT(hot->pair, 2);

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  if (Global->errors != 0 || Global->count != P * INCS || hot->written != rounds - 1) {
    printf("FAIL lockaddr p=%ld: %ld errors, count %ld (want %ld), written %ld\n", P,
           Global->errors, Global->count, P * INCS, hot->written);
    exit(1);
  }
  printf("PASS lockaddr p=%ld rounds=%ld\n", P, rounds);
  MAIN_END
}
