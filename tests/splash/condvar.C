/*
 * condvar.C -- Splash-3 condition variables:
 *   1. a bounded queue (capacity 2) shared by all processes, each of which alternately puts one
 *      item and takes one, ITEMS times (waits on not_full / not_empty with CONDVARWAIT, wakes
 *      with CONDVARSIGNAL); the lock is a LOCKDEC lock;
 *   2. a gate built from a counter and CONDVARBCAST, its lock taken from a lock array with
 *      AGETL, used for several rounds.
 *
 *   condvar [-p P] [-n ITEMS]
 *
 * Prints "PASS condvar ..." or "FAIL condvar ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define CAPACITY 2

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(qlock)
  CONDVARDEC(not_full)
  CONDVARDEC(not_empty)
  long queue[CAPACITY];
  long head;     /* next slot to take */
  long count;    /* items in the queue */
  long put_sum;
  long taken_sum;
  long taken;
  ALOCKDEC(gatelocks, 2)
  CONDVARDEC(gate_open)
  long arrived;
  long generation;
  long errors;
};

struct GlobalMemory *Global;
long P = 1;
long items = 200;
long gate_rounds = 5;

void SlaveStart(void);

static void gate(void)
{
  long gen;
  ALOCK(Global->gatelocks, 1);
  gen = Global->generation;
  if (++Global->arrived == P) {
    Global->arrived = 0;
    Global->generation++;
    CONDVARBCAST(Global->gate_open);
  } else {
    while (Global->generation == gen) {
      CONDVARWAIT(Global->gate_open, AGETL(Global->gatelocks, 1));
    }
  }
  AULOCK(Global->gatelocks, 1);
}

void SlaveStart(void)
{
  long MyNum, i, r, value;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  for (i = 0; i < items; i++) {
    value = MyNum * 100000 + i + 1;
    LOCK(Global->qlock);
    while (Global->count == CAPACITY) {
      CONDVARWAIT(Global->not_full, Global->qlock);
    }
    Global->queue[(Global->head + Global->count) % CAPACITY] = value;
    Global->count++;
    Global->put_sum += value;
    CONDVARSIGNAL(Global->not_empty);
    UNLOCK(Global->qlock);

    LOCK(Global->qlock);
    while (Global->count == 0) {
      CONDVARWAIT(Global->not_empty, Global->qlock);
    }
    value = Global->queue[Global->head];
    Global->head = (Global->head + 1) % CAPACITY;
    Global->count--;
    Global->taken_sum += value;
    Global->taken++;
    CONDVARSIGNAL(Global->not_full);
    UNLOCK(Global->qlock);
  }

  for (r = 0; r < gate_rounds; r++) {
    gate();
    if (Global->generation < r + 1) {
      ALOCK(Global->gatelocks, 0);
      Global->errors++;
      AULOCK(Global->gatelocks, 0);
    }
  }
}

int main(int argc, char *argv[])
{
  int c;

  while ((c = getopt(argc, argv, "p:n:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    case 'n': items = atol(optarg); break;
    default:
      fprintf(stderr, "usage: condvar [-p P] [-n ITEMS]\n");
      exit(2);
    }
  }
  if (P < 1 || items < 0) {
    fprintf(stderr, "condvar: bad arguments\n");
    exit(2);
  }

  MAIN_INITENV
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  Global->head = Global->count = 0;
  Global->put_sum = Global->taken_sum = Global->taken = 0;
  Global->arrived = Global->generation = Global->errors = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->qlock);
  CONDVARINIT(Global->not_full);
  CONDVARINIT(Global->not_empty);
  ALOCKINIT(Global->gatelocks, 2);
  CONDVARINIT(Global->gate_open);

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  if (Global->errors != 0 || Global->taken != P * items || Global->count != 0 ||
      Global->put_sum != Global->taken_sum || Global->generation != gate_rounds) {
    printf("FAIL condvar p=%ld: %ld errors, %ld of %ld items taken, sums %ld/%ld, "
           "generation %ld\n", P, Global->errors, Global->taken, P * items, Global->put_sum,
           Global->taken_sum, Global->generation);
    exit(1);
  }
  printf("PASS condvar p=%ld items=%ld\n", P, items);
  MAIN_END
}
