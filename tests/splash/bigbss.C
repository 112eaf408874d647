/*
 * bigbss.C -- a 512 MiB zero array in .bss of which one page is touched: the data segment is
 * shared lazily, page by page (run with SVM_STATS=json: few pages are fetched).
 *
 *   bigbss [-p P]
 *
 * Prints "PASS bigbss ..." or "FAIL bigbss ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define BIG (512L * 1024 * 1024)
#define SPOT (BIG / 2 + 12345)

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(errlock)
  long errors;
};

struct GlobalMemory *Global;
long P = 1;
char big[BIG];

void SlaveStart(void);

void SlaveStart(void)
{
  long MyNum;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  if (big[SPOT] != 42 || big[SPOT + 1] != 0) {
    fprintf(stderr, "bigbss: process %ld reads %d %d\n", MyNum, big[SPOT], big[SPOT + 1]);
    LOCK(Global->errlock);
    Global->errors++;
    UNLOCK(Global->errlock);
  }
}

int main(int argc, char *argv[])
{
  int c;

  while ((c = getopt(argc, argv, "p:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    default:
      fprintf(stderr, "usage: bigbss [-p P]\n");
      exit(2);
    }
  }
  if (P < 1) {
    fprintf(stderr, "bigbss: bad arguments\n");
    exit(2);
  }

  MAIN_INITENV(,2000000)
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  Global->errors = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->errlock);
  big[SPOT] = 42;

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  if (Global->errors != 0 || big[SPOT] != 42) {
    printf("FAIL bigbss p=%ld: %ld errors\n", P, Global->errors);
    exit(1);
  }
  printf("PASS bigbss p=%ld (%ld MiB of .bss)\n", P, BIG >> 20);
  MAIN_END
}
