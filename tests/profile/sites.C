/*
 * sites.C -- for the profiler's test (tests/tests/profile.rs): shared memory whose origin the
 * profile must name.
 *   - grid: G_MALLOC'd by the function make_grid (not inlined), written by every process in
 *     interleaved words (false sharing);
 *   - shared_table: static .bss data, every process writes its own interleaved words.
 *
 *   sites [-p P]
 *
 * Prints "PASS sites ..." or "FAIL sites ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

#define ROUNDS 20
#define N 2048
#define TABLE 1024

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  BARDEC(bar)
};

struct GlobalMemory *Global;
long P = 1;
double *grid;
long shared_table[TABLE];
long errors;

double *make_grid(long len) __attribute__((noinline));
double *make_grid(long len)
{
  long i;
  double *g = (double *) G_MALLOC(len * sizeof(double));
  for (i = 0; i < len; i++) g[i] = 0.0; /* work after the call: no tail call to G_MALLOC */
  return g;
}

void Slave(void);

void Slave(void)
{
  long me, i, r;

  LOCK(Global->idlock);
  me = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);
  for (r = 1; r <= ROUNDS; r++) {
    for (i = me; i < N; i += P) grid[i] = r * 10000.0 + i;
    for (i = me; i < TABLE; i += P) shared_table[i] = r * 10000 + i;
    BARRIER(Global->bar, P);
  }
}

int main(int argc, char *argv[])
{
  long i;
  int c;

  while ((c = getopt(argc, argv, "p:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    default:
      fprintf(stderr, "usage: sites [-p P]\n");
      exit(2);
    }
  }
  MAIN_INITENV(,1000000,)
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  LOCKINIT(Global->idlock);
  BARINIT(Global->bar);
  grid = make_grid(N);

  CREATE(Slave, P);
  WAIT_FOR_END(P);

  for (i = 0; i < N; i++)
    if (grid[i] != ROUNDS * 10000.0 + i) errors++;
  for (i = 0; i < TABLE; i++)
    if (shared_table[i] != ROUNDS * 10000 + i) errors++;
  if (errors != 0) {
    printf("FAIL sites p=%ld: %ld wrong words\n", P, errors);
    exit(1);
  }
  printf("PASS sites p=%ld\n", P);
  MAIN_END
}
