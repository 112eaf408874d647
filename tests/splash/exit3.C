/*
 * exit3.C -- exit() with an error status in a worker ends the whole job with that status, while
 * the other processes are blocked (at a barrier that can never complete, or in WAIT_FOR_END).
 *
 *   exit3 [-p P]      (at least one worker is created even with -p 1)
 *
 * Expected: job exit status 3 and the line "exit3: worker exits with status 3"; never PASS.
 */
MAIN_ENV
#include <unistd.h>

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  BARDEC(never)
};

struct GlobalMemory *Global;
long P = 2;
long workers;

void Worker(void);

void Worker(void)
{
  long MyNum;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  if (MyNum == 0) {
    usleep(100000);
    printf("exit3: worker exits with status 3\n");
    fflush(stdout);
    exit(3);
  }
  BARRIER(Global->never, workers + 1);
}

int main(int argc, char *argv[])
{
  long i;
  int c;

  while ((c = getopt(argc, argv, "p:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    default:
      fprintf(stderr, "usage: exit3 [-p P]\n");
      exit(2);
    }
  }
  workers = P > 1 ? P - 1 : 1;

  MAIN_INITENV
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  LOCKINIT(Global->idlock);
  BARINIT(Global->never);

  for (i = 0; i < workers; i++) {
    CREATE(Worker);
  }
  if (P > 2) {
    BARRIER(Global->never, workers + 1);
  }
  WAIT_FOR_END(workers);
  printf("FAIL exit3: the job went on after a worker called exit(3)\n");
  MAIN_END
}
