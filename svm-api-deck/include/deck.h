/* deck.h — the DECK (µDECK) C API of svm.
 *
 * Link with -lsvm_deck and start the program with `svmrun -n N ./prog` (or any launcher that
 * sets SVM_RANK/SVM_SIZE/SVM_COORD/SVM_JOB_KEY). SVM_TRANSPORT=deck (default under svmrun) uses
 * the DECK-SCI shared-memory transport, SVM_TRANSPORT=tcp the TCP mesh.
 *
 * Every function returns DECK_OK (0) or a negative DECK_E* code, unless documented otherwise.
 * Threads and semaphores are local and are thin inline wrappers over POSIX threads. */
#ifndef SVM_DECK_H
#define SVM_DECK_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>
#include <sched.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DECK_OK 0
#define DECK_ERROR (-1)     /* communication or setup failure */
#define DECK_EINVAL (-2)    /* bad argument (NULL pointer, unknown node, bad name) */
#define DECK_ETIMEDOUT (-3) /* timed retrieve/fetch: nothing within the time */
#define DECK_EOVERFLOW (-4) /* packing past the end of the message */
#define DECK_EEND (-5)      /* unpacking past the end of the message */
#define DECK_ETYPE (-6)     /* unpacking a different type than was packed */
#define DECK_ENOINIT (-7)   /* deck_init was not called (or deck_done was) */
#define DECK_EAGAIN (-8)    /* non-blocking retrieve: no message */
#define DECK_EINTERNAL (-9) /* internal error (a bug): reported, never crashes the caller */

/* A mailbox: its global address. Post to any; retrieve only from the ones you created. */
typedef struct deck_mbox {
    uint32_t node;
    uint32_t id;
} deck_mbox_t;

/* A message (opaque): a buffer with a cursor. */
typedef struct deck_msg deck_msg_t;

/* --- init ---------------------------------------------------------------------------------- */
int deck_init(int *argc, char ***argv);
int deck_done(void);
/* This node's rank, or a negative DECK_E* code. */
int deck_node(void);
/* Number of nodes, or a negative DECK_E* code. */
int deck_nodes(void);
/* Text of the last error of the calling thread ("" if none). */
const char *deck_strerror(void);

/* --- messages ------------------------------------------------------------------------------ */
int deck_msg_create(deck_msg_t **msg, size_t size);
int deck_msg_destroy(deck_msg_t *msg);
int deck_msg_clear(deck_msg_t *msg);
int deck_msg_reset(deck_msg_t *msg);
/* Bytes packed so far. */
size_t deck_msg_length(const deck_msg_t *msg);
/* Raw bytes. */
int deck_msg_pack(deck_msg_t *msg, const void *data, size_t len);
/* Unpacks raw bytes packed by deck_msg_pack into buf (capacity cap); *len gets their length. */
int deck_msg_unpack(deck_msg_t *msg, void *buf, size_t cap, size_t *len);
int deck_msg_pack_int32(deck_msg_t *msg, int32_t v);
int deck_msg_unpack_int32(deck_msg_t *msg, int32_t *v);
int deck_msg_pack_uint32(deck_msg_t *msg, uint32_t v);
int deck_msg_unpack_uint32(deck_msg_t *msg, uint32_t *v);
int deck_msg_pack_int64(deck_msg_t *msg, int64_t v);
int deck_msg_unpack_int64(deck_msg_t *msg, int64_t *v);
int deck_msg_pack_uint64(deck_msg_t *msg, uint64_t v);
int deck_msg_unpack_uint64(deck_msg_t *msg, uint64_t *v);
int deck_msg_pack_double(deck_msg_t *msg, double v);
int deck_msg_unpack_double(deck_msg_t *msg, double *v);
int deck_msg_pack_mbox(deck_msg_t *msg, const deck_mbox_t *mbox);
int deck_msg_unpack_mbox(deck_msg_t *msg, deck_mbox_t *mbox);
/* Nested messages: packs a copy of inner; unpack creates a new message (destroy it). */
int deck_msg_pack_msg(deck_msg_t *msg, const deck_msg_t *inner);
int deck_msg_unpack_msg(deck_msg_t *msg, deck_msg_t **inner);

/* --- mailboxes ----------------------------------------------------------------------------- */
/* Creates a mailbox owned by this node; binds it to name unless name is NULL. */
int deck_mbox_create(deck_mbox_t *mbox, const char *name);
int deck_mbox_destroy(deck_mbox_t *mbox);
/* Asynchronous send of a copy of msg. */
int deck_mbox_post(const deck_mbox_t *mbox, const deck_msg_t *msg);
/* Blocking receive: *msg is a new message (destroy it). */
int deck_mbox_retrv(const deck_mbox_t *mbox, deck_msg_t **msg);
/* Timed receive (DECK_ETIMEDOUT) and non-blocking receive (DECK_EAGAIN). */
int deck_mbox_tretrv(const deck_mbox_t *mbox, deck_msg_t **msg, long timeout_ms);
int deck_mbox_tryretrv(const deck_mbox_t *mbox, deck_msg_t **msg);
int deck_mbox_bind(const deck_mbox_t *mbox, const char *name);
/* Looks name up at the name server, waiting until it is bound. */
int deck_mbox_fetch(deck_mbox_t *mbox, const char *name);
/* Same, giving up after timeout_ms (DECK_ETIMEDOUT). */
int deck_mbox_tfetch(deck_mbox_t *mbox, const char *name, long timeout_ms);

/* --- groups -------------------------------------------------------------------------------- */
int deck_barrier(void);
/* The root's message replaces msg's contents on every other node. */
int deck_bcast(int root, deck_msg_t *msg);
#define DECK_SUM 0
#define DECK_MIN 1
#define DECK_MAX 2
/* *result is written on root only. */
int deck_reduce_double(int root, double v, int op, double *result);
/* On root, out[rank] gets a new message per node (array of deck_nodes() entries). */
int deck_gather(int root, const deck_msg_t *msg, deck_msg_t **out);

/* --- threads and semaphores (local) -------------------------------------------------------- */
typedef pthread_t deck_thread_t;
typedef sem_t deck_sema_t;

/* Creates a detached thread. */
static inline int deck_thread_create(deck_thread_t *t, void *(*fn)(void *), void *arg) {
    pthread_attr_t a;
    int r;
    if (pthread_attr_init(&a) != 0) return DECK_ERROR;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    r = pthread_create(t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return r == 0 ? DECK_OK : DECK_ERROR;
}
static inline void deck_thread_exit(void *ret) { pthread_exit(ret); }
static inline deck_thread_t deck_thread_self(void) { return pthread_self(); }
static inline int deck_thread_sleep(unsigned long usec) {
    struct timespec ts;
    ts.tv_sec = (time_t)(usec / 1000000UL);
    ts.tv_nsec = (long)(usec % 1000000UL) * 1000L;
    return nanosleep(&ts, NULL) == 0 ? DECK_OK : DECK_ERROR;
}
static inline int deck_thread_yield(void) { return sched_yield() == 0 ? DECK_OK : DECK_ERROR; }

static inline int deck_sema_init(deck_sema_t *s, unsigned int value) {
    return sem_init(s, 0, value) == 0 ? DECK_OK : DECK_ERROR;
}
static inline int deck_sema_post(deck_sema_t *s) { return sem_post(s) == 0 ? DECK_OK : DECK_ERROR; }
static inline int deck_sema_wait(deck_sema_t *s) {
    while (sem_wait(s) != 0) { /* EINTR */ }
    return DECK_OK;
}
/* DECK_EAGAIN when the semaphore is zero. */
static inline int deck_sema_trywait(deck_sema_t *s) { return sem_trywait(s) == 0 ? DECK_OK : DECK_EAGAIN; }
static inline int deck_sema_destroy(deck_sema_t *s) { return sem_destroy(s) == 0 ? DECK_OK : DECK_ERROR; }

#ifdef __cplusplus
}
#endif
#endif /* SVM_DECK_H */
