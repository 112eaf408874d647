/*
 * macros.C -- every macro of the classic set and of Splash-3 that the other programs do not
 * use, so that the whole macro file is compiled (with -std=c99 -Wall -Wextra -Werror in the
 * tests) and run: NEWPROC, ENV, EXTERN_ENV, GET_PID, GET_HOME, SET_HOME, NU_GS*, ADEC, AINIT,
 * PROBEND, EVENT and PAUSE (a ring of events), the monitor macros, the simulator hooks,
 * BAREXCLUDE/BARINCLUDE, ST_LOG, NU_MALLOC_F, NU_FREE, the Splash-3 region of interest.
 *
 *   macros [-p P]
 *
 * Prints "PASS macros ..." or "FAIL macros ..." (exit 1).
 */
MAIN_ENV
EXTERN_ENV
ENV
NEWPROC
#include <unistd.h>

#define MAX_PROCS 64
#define NITEMS 50

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  PAUSEDEC(ev[MAX_PROCS])
  long token;
  NU_GSDEC(sub)
  long done[NITEMS];
  ADEC(ask)
  BARDEC(bar)
  LOCKDEC(errlock)
  long errors;
};

struct GlobalMemory *Global;
long P = 1;

void SlaveStart(void);

static void error(long who, const char *what)
{
  fprintf(stderr, "macros: process %ld: %s\n", who, what);
  LOCK(Global->errlock);
  Global->errors++;
  UNLOCK(Global->errlock);
}

void SlaveStart(void)
{
  long MyNum, pid = -1, home = -1, s;
  unsigned long t;
  double *scratch;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  GET_PID(pid);
  GET_HOME(home);
  SET_HOME(Global, MyNum);
  if (pid < 0 || home < 0) error(MyNum, "GET_PID/GET_HOME");

  AUG_ON
  TRACE_ON
  REF_TRACE_ON
  DYN_TRACE_ON
  DYN_REF_TRACE_ON
  DYN_SIM_ON
  DYN_SCHED_ON
  AUG_SET_LOLIMIT(Global, 0)
  AUG_SET_HILIMIT(Global, 0)
  ST_LOG(0, 0)
  MENTER(mon)
  DELAY(mon, 0)
  CONTINUE(mon, 0)
  MEXIT(mon)
  BAREXCLUDE(Global->bar)
  BARINCLUDE(Global->bar)
  AINIT(Global->ask)
  PROBEND(Global->ask)
  DYN_SCHED_OFF
  DYN_SIM_OFF
  DYN_REF_TRACE_OFF
  DYN_TRACE_OFF
  REF_TRACE_OFF
  TRACE_OFF
  AUG_OFF

  /* A ring of events: process 0 starts it, each passes it on, process 0 ends it. */
  if (MyNum == 0) {
    Global->token = 1;
    EVENT(Global->ev[1 % P]);
    PAUSE(Global->ev[0]);
    if (Global->token != P) error(MyNum, "event ring");
  } else {
    PAUSE(Global->ev[MyNum]);
    Global->token++;
    EVENT(Global->ev[(MyNum + 1) % P]);
  }

  for (;;) {
    NU_GETSUB(Global->sub, s, NITEMS - 1, P);
    if (s < 0) break;
    Global->done[s]++;
  }

  scratch = (double *) NU_MALLOC_F(64 * sizeof(double));
  scratch[63] = 1.0;
  NU_FREE(scratch);
  CLOCK(t);
  (void)t;
  BARRIER(Global->bar, P);
}

int main(int argc, char *argv[])
{
  long i;
  int c;

  while ((c = getopt(argc, argv, "p:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    default:
      fprintf(stderr, "usage: macros [-p P]\n");
      exit(2);
    }
  }
  if (P < 1 || P > MAX_PROCS) {
    fprintf(stderr, "macros: -p must be in 1..%d\n", MAX_PROCS);
    exit(2);
  }

  MAIN_INITENV(0, 1000000, 0)
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory), 0);
  Global->id = 0;
  Global->token = 0;
  Global->errors = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->errlock);
  BARINIT(Global->bar);
  for (i = 0; i < MAX_PROCS; i++) {
    PAUSEINIT(Global->ev[i]);
  }
  NU_GSINIT(Global->sub);
  for (i = 0; i < NITEMS; i++) Global->done[i] = 0;
  MONINIT(mon, 0)
  AUG_DELAY(0)
  EVENT
  PAUSE

  SPLASH3_ROI_BEGIN
  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);
  SPLASH3_ROI_END

  for (i = 0; i < NITEMS; i++) {
    if (Global->done[i] != 1) {
      printf("macros: item %ld handed out %ld times\n", i, Global->done[i]);
      Global->errors++;
      break;
    }
  }
  if (Global->errors != 0) {
    printf("FAIL macros p=%ld: %ld errors\n", P, Global->errors);
    exit(1);
  }
  printf("PASS macros p=%ld\n", P);
  MAIN_END
}
