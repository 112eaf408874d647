/*
 * tree.C -- processes communicate through globals after CREATE:
 *   1. one process (the one numbered P-1) builds a tree in G_MALLOC memory and publishes its
 *      root in a global under a lock; after a barrier every process walks it;
 *   2. for several frames, whichever process is number 0 recomputes a "view" held in globals;
 *      after a barrier every process reads it.
 *
 *   tree [-p P] [-d DEPTH] [-f FRAMES]
 *
 * Prints "PASS tree ..." or "FAIL tree ..." (exit 1).
 */
MAIN_ENV
#include <unistd.h>

struct node {
  long value;
  struct node *left;
  struct node *right;
};

struct GlobalMemory {
  LOCKDEC(idlock)
  long id;
  LOCKDEC(rootlock)
  LOCKDEC(errlock)
  long errors;
  BARDEC(published)
  BARDEC(frame_ready)
  BARDEC(frame_read)
};

struct GlobalMemory *Global;
long P = 1;
long depth = 10;
long frames = 20;
struct node *root;        /* published by one process, in .bss */
double view[16];          /* recomputed by process 0 every frame */
long view_frame = -1;

void SlaveStart(void);

static struct node *build(long d, long *next)
{
  struct node *t;
  if (d == 0) return NULL;
  t = (struct node *) G_MALLOC(sizeof(struct node));
  t->value = (*next)++;
  t->left = build(d - 1, next);
  t->right = build(d - 1, next);
  return t;
}

static long walk(struct node *t, long *count)
{
  if (t == NULL) return 0;
  (*count)++;
  return t->value + walk(t->left, count) + walk(t->right, count);
}

static void error(long who, const char *what)
{
  fprintf(stderr, "tree: process %ld: %s\n", who, what);
  LOCK(Global->errlock);
  Global->errors++;
  UNLOCK(Global->errlock);
}

void SlaveStart(void)
{
  long MyNum, frame, k, count = 0, sum, nodes;

  LOCK(Global->idlock);
  MyNum = Global->id;
  Global->id++;
  UNLOCK(Global->idlock);

  if (MyNum == P - 1) {
    long next = 1;
    struct node *t = build(depth, &next);
    LOCK(Global->rootlock);
    root = t;
    UNLOCK(Global->rootlock);
  }
  BARRIER(Global->published, P);
  nodes = (1L << depth) - 1;
  sum = walk(root, &count);
  if (count != nodes || sum != nodes * (nodes + 1) / 2) {
    error(MyNum, "the published tree is wrong");
  }

  for (frame = 0; frame < frames; frame++) {
    if (MyNum == 0) {
      for (k = 0; k < 16; k++) view[k] = (double)(frame * 100 + k) * 0.5;
      view_frame = frame;
    }
    BARRIER(Global->frame_ready, P);
    if (view_frame != frame) {
      error(MyNum, "stale view frame number");
    }
    for (k = 0; k < 16; k++) {
      if (view[k] != (double)(frame * 100 + k) * 0.5) {
        error(MyNum, "stale view");
        break;
      }
    }
    BARRIER(Global->frame_read, P);
  }
}

int main(int argc, char *argv[])
{
  int c;

  while ((c = getopt(argc, argv, "p:d:f:")) != -1) {
    switch (c) {
    case 'p': P = atol(optarg); break;
    case 'd': depth = atol(optarg); break;
    case 'f': frames = atol(optarg); break;
    default:
      fprintf(stderr, "usage: tree [-p P] [-d DEPTH] [-f FRAMES]\n");
      exit(2);
    }
  }
  if (P < 1 || depth < 1 || depth > 20 || frames < 0) {
    fprintf(stderr, "tree: bad arguments\n");
    exit(2);
  }

  MAIN_INITENV
  Global = (struct GlobalMemory *) G_MALLOC(sizeof(struct GlobalMemory));
  Global->id = 0;
  Global->errors = 0;
  LOCKINIT(Global->idlock);
  LOCKINIT(Global->rootlock);
  LOCKINIT(Global->errlock);
  BARINIT(Global->published, P);
  BARINIT(Global->frame_ready, P);
  BARINIT(Global->frame_read, P);

  CREATE(SlaveStart, P);
  WAIT_FOR_END(P);

  if (Global->errors != 0 || root == NULL || view_frame != frames - 1) {
    printf("FAIL tree p=%ld: %ld errors\n", P, Global->errors);
    exit(1);
  }
  printf("PASS tree p=%ld depth=%ld frames=%ld\n", P, depth, frames);
  MAIN_END
}
