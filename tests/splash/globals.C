/*
 * globals.C -- the executable's data segment is shared: globals written by the master before
 * CREATE (initialised .data, zero .bss, pointers to G_MALLOC memory, a FILE * equal to stdout,
 * a table of function pointers) are read by every process, and what the processes write into
 * globals is read by the master after WAIT_FOR_END.
 *
 *   globals [-p P]
 *
 * Prints "PASS globals ..." or "FAIL globals ..." (exit 1).
 */
MAIN_ENV
#include <string.h>
#include <unistd.h>

#define MAX_PROCS 64

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(errlock)
  long errors;
  long seen;
};

static long add_one(long v) { return v + 1; }
static long twice(long v) { return 2 * v; }

struct GlobalMemory *Global;
long P = 1;
long initialised = 17;                 /* .data, changed by the master */
double ratio = 0.5;                    /* .data, changed by the master */
long zeroed;                           /* .bss, set by the master */
char banner[64];                       /* .bss, set by the master */
long big_table[20000];                 /* .bss, several pages, set by the master */
double *shared_vec;                    /* points to G_MALLOC memory */
long vec_len;
FILE *six;                             /* = stdout, set by the master */
long (*ops[2])(long) = { add_one, twice };  /* function pointers in .data */
long (*chosen_op)(long);               /* a function pointer set by the master */
long results[MAX_PROCS];               /* .bss, written by the processes */
unsigned long when[MAX_PROCS];         /* CLOCK values of the processes */

void SlaveStart(void);

static void check(int ok, long who, const char *what)
{
  if (!ok) {
    fprintf(stderr, "globals: process %ld sees a wrong %s\n", who, what);
    LOCK(Global->errlock);
    Global->errors++;
    UNLOCK(Global->errlock);
  }
}

void SlaveStart(void)
{
  long MyNum, i, sum;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  check(initialised == 42, MyNum, "initialised long");
  check(ratio == 2.25, MyNum, "double");
  check(zeroed == -5, MyNum, "bss long");
  check(strcmp(banner, "set by the master") == 0, MyNum, "bss string");
  sum = 0;
  for (i = 0; i < 20000; i++) sum += big_table[i];
  check(sum == 20000L * 19999L / 2 * 3, MyNum, "bss table");
  check(vec_len == 5000, MyNum, "vector length");
  for (i = 0; i < vec_len; i++) {
    if (shared_vec[i] != (double)i * 0.25) {
      check(0, MyNum, "G_MALLOC vector");
      break;
    }
  }
  check(six == stdout, MyNum, "FILE pointer");
  check(ops[0](1) == 2 && ops[1](5) == 10, MyNum, "function table");
  check(chosen_op == twice && chosen_op(21) == 42, MyNum, "function pointer");
  fprintf(six, "globals: process %ld writes through six\n", MyNum);
  fflush(six);

  results[MyNum] = MyNum * MyNum + 1;
  CLOCK(when[MyNum]);
  LOCK(Global->errlock);
  Global->seen++;
  UNLOCK(Global->errlock);
}

int main(int argc, char *argv[])
{
  long i;
  int c;
  unsigned long before;

  while ((c = getopt(argc, argv, "p:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    default:
      fprintf(stderr, "usage: globals [-p P]\n");
      exit(2);
    }
  }
  if (P < 1 || P > MAX_PROCS) {
    fprintf(stderr, "globals: -p must be in 1..%d\n", MAX_PROCS);
    exit(2);
  }

  MAIN_INITENV(,1000000)
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  Global->errors = 0;
  Global->seen = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->errlock);

  initialised = 42;
  ratio = 2.25;
  zeroed = -5;
  strcpy(banner, "set by the master");
  for (i = 0; i < 20000; i++) big_table[i] = 3 * i;
  vec_len = 5000;
  shared_vec = (double *) G_MALLOC(vec_len * sizeof(double));
  for (i = 0; i < vec_len; i++) shared_vec[i] = (double)i * 0.25;
  six = stdout;
  chosen_op = ops[1];
  CLOCK(before);

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  for (i = 0; i < P; i++) {
    if (results[i] != i * i + 1) {
      printf("globals: results[%ld] = %ld, expected %ld\n", i, results[i], i * i + 1);
      Global->errors++;
    }
    /* One time base for the job: every process started after the master's CLOCK
       (1 ms of slack for the per-host correction). */
    if (when[i] + 1000 < before) {
      printf("globals: process %ld's CLOCK %lu is before the master's %lu\n", i, when[i],
             before);
      Global->errors++;
    }
  }
  if (Global->errors != 0 || Global->seen != P) {
    printf("FAIL globals p=%ld: %ld errors, %ld of %ld processes ran\n", P, Global->errors,
           Global->seen, P);
    exit(1);
  }
  printf("PASS globals p=%ld\n", P);
  MAIN_END
}
