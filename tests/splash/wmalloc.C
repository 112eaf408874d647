/*
 * wmalloc.C -- workers call G_MALLOC (and NU_MALLOC, G_MALLOC(size, node), G_MALLOC_F):
 * allocation is job-wide, so a block allocated by any process is valid for every process.
 * Every process allocates blocks of several sizes (some under a page, some of many pages),
 * fills them, and publishes them; after a barrier every process checks every block, the
 * alignment (16 bytes; a page from one page up) and that no two blocks overlap.
 *
 *   wmalloc [-p P]
 *
 * Prints "PASS wmalloc ..." or "FAIL wmalloc ..." (exit 1).
 */
MAIN_ENV
#include <stdint.h>
#include <unistd.h>

#define MAX_PROCS 64
#define NBLOCKS 6

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  BARDEC(published)
  LOCKDEC(errlock)
  long errors;
  long *block[MAX_PROCS][NBLOCKS];
  size_t size[MAX_PROCS][NBLOCKS];
};

struct GlobalMemory *Global;
long P = 1;
long page_size;

void SlaveStart(void);

static size_t block_size(long who, long b)
{
  static const size_t sizes[NBLOCKS] = { 24, 200, 4096, 3 * 4096 + 8, 40000, 1 << 18 };
  return sizes[b] + 8 * (size_t)who;
}

void SlaveStart(void)
{
  long MyNum, q, b, q2, b2, errors = 0;
  size_t i;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  for (b = 0; b < NBLOCKS; b++) {
    size_t size = block_size(MyNum, b);
    long *p;
    switch (b % 4) {
    case 0: p = (long *) G_MALLOC(size); break;
    case 1: p = (long *) G_MALLOC(size, MyNum); break;
    case 2: p = (long *) NU_MALLOC(size); break;
    default: p = (long *) G_MALLOC_F(size); break;
    }
    for (i = 0; i < size / sizeof(long); i++) p[i] = MyNum * 1000003L + b * 10007L + (long)i;
    Global->block[MyNum][b] = p;
    Global->size[MyNum][b] = size;
  }
  BARRIER(Global->published, P);

  for (q = 0; q < P; q++) {
    for (b = 0; b < NBLOCKS; b++) {
      long *p = Global->block[q][b];
      size_t size = Global->size[q][b];
      uintptr_t start = (uintptr_t)p;
      if (p == NULL || start % 16 != 0 ||
          (size >= (size_t)page_size && start % (uintptr_t)page_size != 0)) {
        fprintf(stderr, "wmalloc: block %ld of process %ld (%zu bytes) at %p is misaligned\n",
                b, q, size, (void *)p);
        errors++;
        continue;
      }
      for (i = 0; i < size / sizeof(long); i++) {
        if (p[i] != q * 1000003L + b * 10007L + (long)i) {
          fprintf(stderr, "wmalloc: block %ld of process %ld is wrong at word %zu\n", b, q, i);
          errors++;
          break;
        }
      }
      if (MyNum == 0) {
        for (q2 = 0; q2 < P; q2++) {
          for (b2 = 0; b2 < NBLOCKS; b2++) {
            uintptr_t s2 = (uintptr_t)Global->block[q2][b2];
            if ((q2 != q || b2 != b) && s2 < start + size && start < s2 + Global->size[q2][b2]) {
              fprintf(stderr, "wmalloc: blocks (%ld,%ld) and (%ld,%ld) overlap\n", q, b, q2, b2);
              errors++;
            }
          }
        }
      }
    }
  }
  if (errors != 0) {
    LOCK(Global->errlock);
    Global->errors += errors;
    UNLOCK(Global->errlock);
  }
  BARRIER(Global->published, P);
  /* G_FREE is accepted (memory is never returned to other nodes). */
  G_FREE(Global->block[MyNum][0]);
  NU_FREE(Global->block[MyNum][2]);
}

int main(int argc, char *argv[])
{
  int c;

  while ((c = getopt(argc, argv, "p:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    default:
      fprintf(stderr, "usage: wmalloc [-p P]\n");
      exit(2);
    }
  }
  if (P < 1 || P > MAX_PROCS) {
    fprintf(stderr, "wmalloc: -p must be in 1..%d\n", MAX_PROCS);
    exit(2);
  }
  page_size = sysconf(_SC_PAGESIZE);

  MAIN_INITENV
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  Global->errors = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->errlock);
  BARINIT(Global->published, P);

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  if (Global->errors != 0) {
    printf("FAIL wmalloc p=%ld: %ld errors\n", P, Global->errors);
    exit(1);
  }
  printf("PASS wmalloc p=%ld\n", P);
  MAIN_END
}
