/*
 * svm.h: the native C API of svm, a page-based software distributed shared memory
 * (libsvm.so). Reference and examples: docs/c-api.md.
 *
 *   cc $(pkg-config --cflags svm) prog.c $(pkg-config --libs svm) -o prog
 *   svmrun -n 4 ./prog
 *
 * Every function returns SVM_OK (0) or a negative error code; svm_strerror() names a code and
 * svm_last_error() gives the full message of the calling thread's last failure. Misuse (a bad
 * id, size or pointer, a destroyed region, a call before svm_init or after svm_finish) is an
 * error, never a crash.
 *
 * Collective calls (svm_region_create, svm_region_destroy, svm_region_alloc,
 * svm_region_free, svm_barrier) must be made by one thread on every node, in the same order,
 * with the same arguments.
 */
#ifndef SVM_H
#define SVM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes ---------------------------------------------------------------------- */
#define SVM_OK 0
#define SVM_E_STATE (-1)    /* not initialised, initialised twice, or already finished */
#define SVM_E_ARG (-2)      /* a bad argument: NULL pointer, zero size, bad home policy */
#define SVM_E_REGION (-3)   /* not a live region (never created, or destroyed) */
#define SVM_E_NOMEM (-4)    /* the shared window or the region is full */
#define SVM_E_PROTOCOL (-5) /* unknown protocol */
#define SVM_E_NODE (-6)     /* no such node in this job */
#define SVM_E_LOCK (-7)     /* unlock of a lock the calling thread does not hold */
#define SVM_E_BARRIER (-8)  /* barrier count of 0, or different counts in one round */
#define SVM_E_ID (-9)       /* lock, barrier, semaphore id or tag reserved (>= 2^63) */
#define SVM_E_ADDR (-10)    /* an address that is no live allocation / in no region */
#define SVM_E_TIMEOUT (-11) /* nothing arrived in time */
#define SVM_E_TRUNC (-12)   /* the buffer is too small (the needed length is reported) */
#define SVM_E_INIT (-13)    /* joining the job failed (configuration, network, memory) */
#define SVM_E_NOTSUP (-14)  /* not supported (e.g. destroying regions of a protocol) */
#define SVM_E_DESTROY (-15) /* the nodes disagree about the region being destroyed */
#define SVM_E_INTERNAL (-16) /* an internal error (reported on stderr) */

/* The name of an error code ("SVM_E_ARG: bad argument"). Never NULL. */
const char *svm_strerror(int code);
/* The full message of the calling thread's last failed call ("" if none). Valid until the
 * thread's next failing call. */
const char *svm_last_error(void);

/* ---- the job -------------------------------------------------------------------------- */
/* Joins the job started by svmrun (or Slurm / Open MPI; alone: a job of one node). */
int svm_init(void);
/* Orderly end: waits until every node has finished. Nothing but svm_strerror and
 * svm_last_error may be called afterwards. */
int svm_finish(void);
/* The profiler switches (docs/profiling.md), before svm_init only (SVM_E_STATE after), on
 * every node: svm_set_profile(FILE) is SVM_PROFILE=FILE (one merged report of all nodes at the
 * end of the job, Markdown at FILE and JSON at FILE.json), svm_set_trace(FILE) is
 * SVM_TRACE=FILE (a Chrome trace of the whole job). A relative FILE is taken from the current
 * directory; NULL switches the instrument off. The environment (svmrun --profile / --trace)
 * works as well. */
int svm_set_profile(const char *file);
int svm_set_trace(const char *file);
int svm_node_id(int *id);
int svm_nodes(int *count);
/* Size of the coherence unit (a page) in bytes. */
int svm_page_size(size_t *bytes);

/* ---- regions -------------------------------------------------------------------------- */
typedef uint32_t svm_region_t;

typedef enum {
    SVM_PROTOCOL_DEFAULT = 0, /* SVM_PROTOCOL, or sc-sw */
    SVM_PROTOCOL_SC_SW = 1,   /* sequential consistency, single writer */
    SVM_PROTOCOL_SC_MW = 2,   /* sequential consistency, multiple writers (home-based diffs) */
    SVM_PROTOCOL_SCOPE = 3    /* scope consistency (visibility at lock / barrier) */
} svm_protocol_t;

typedef enum {
    SVM_HOME_NODE = 0,       /* every page on `node` */
    SVM_HOME_BLOCK = 1,      /* pages split in one contiguous block per node */
    SVM_HOME_CYCLIC = 2,     /* page i on node i % nodes */
    SVM_HOME_CUSTOM = 3,     /* page i on nodes[i % count] */
    SVM_HOME_RUNS = 4,       /* runs of pages[i] pages on nodes[i]; the rest on the last */
    SVM_HOME_FIRST_TOUCH = 5 /* each page on the first node that touches it */
} svm_home_kind_t;

/* Where a region's pages have their home. A NULL svm_home_t* means SVM_HOME_NODE, node 0. */
typedef struct {
    int kind;              /* svm_home_kind_t */
    int node;              /* SVM_HOME_NODE */
    const int *nodes;      /* SVM_HOME_CUSTOM, SVM_HOME_RUNS: `count` node ids */
    const uint64_t *pages; /* SVM_HOME_RUNS: `count` run lengths in pages */
    size_t count;
} svm_home_t;

/* Creates a region of `size` bytes (collective), zero-filled, page aligned, at the same
 * address on every node. */
int svm_region_create(size_t size, svm_protocol_t protocol, const svm_home_t *home,
                      svm_region_t *region);
/* The same with the protocol by name ("sc-sw", "sc-mw", "scope"; NULL: the default). */
int svm_region_create_named(size_t size, const char *protocol, const svm_home_t *home,
                            svm_region_t *region);
/* Destroys a region (collective; no thread may use it any more): its memory is released on
 * every node and its address range is reused by later regions. */
int svm_region_destroy(svm_region_t region);
int svm_region_addr(svm_region_t region, void **addr);
int svm_region_size(svm_region_t region, size_t *size);
/* The live region holding `addr`, and the offset of `addr` in it (SVM_E_ADDR if none). */
int svm_region_lookup(const void *addr, svm_region_t *region, size_t *offset);
/* Collective allocation of `size` bytes inside a region (16-byte aligned). */
int svm_region_alloc(svm_region_t region, size_t size, void **ptr);
int svm_region_free(svm_region_t region, void *ptr);

/* Per-node allocation in this node's own arena of the shared window (no messages; homed on
 * this node). Other nodes may use it once they learn the address. */
int svm_alloc_local(size_t size, void **ptr);
/* Like svm_alloc_local, but each page is homed on the first node that touches it (its first
 * touch asks the page's directory node, one round trip): for data this node allocates and
 * other nodes initialise and write, under the home-based protocols (sc-mw, scope). */
int svm_alloc_local_first_touch(size_t size, void **ptr);
/* Frees an svm_alloc_local or svm_alloc_local_first_touch allocation (on the node that made
 * it). */
int svm_free_local(void *ptr);
/* The home node of a shared address as this node knows it (SVM_E_ADDR outside shared memory
 * and for a first-touch page this node has not touched). */
int svm_home_of(const void *addr, int *node);

/* ---- synchronisation (ids below 2^63 name the same object on every node) ---------------- */
int svm_lock(uint64_t id);
/* *acquired = 1 if the lock was free and is now held, else 0. */
int svm_trylock(uint64_t id, int *acquired);
int svm_unlock(uint64_t id);
/* Barrier of all nodes (one calling thread per node). */
int svm_barrier(void);
/* Barrier `id` for `count` threads over all nodes. */
int svm_barrier_id(uint64_t id, unsigned count);
/* Job-wide counting semaphores, initially 0. */
int svm_sem_post(uint64_t id);
int svm_sem_wait(uint64_t id);

/* ---- user messages -------------------------------------------------------------------- */
#define SVM_ANY_NODE (-1)
/* Sends `len` bytes to node `to` (this node included); in order per sender and receiver. */
int svm_send(int to, uint64_t tag, const void *data, size_t len);
/* Receives the first message with `tag` from `from` (or SVM_ANY_NODE) into `buf`; `*len` is
 * set to the message's length, `*sender` (if not NULL) to its sender. Waits up to
 * `timeout_ms` (< 0: until SVM_TIMEOUT ends the job with a diagnostic). A message longer than
 * `cap` is taken, its first `cap` bytes copied, and SVM_E_TRUNC returned. */
int svm_recv(int from, uint64_t tag, void *buf, size_t cap, size_t *len, int *sender,
             int timeout_ms);

/* ---- statistics ----------------------------------------------------------------------- */
typedef struct {
    int node, nodes;
    uint64_t read_faults, write_faults, local_faults, remote_faults;
    uint64_t pages_fetched, bytes_fetched, pages_served, invalidations;
    uint64_t messages_sent, messages_received, bytes_sent, bytes_received;
    uint64_t twins_made, diffs_created, diffs_applied, diff_bytes_sent, diff_bytes_applied;
    uint64_t notices_sent, notice_invalidations;
    double read_fault_mean_us, write_fault_mean_us, lock_acquire_mean_us, barrier_wait_mean_us;
} svm_stats_t;

/* A snapshot of this node's statistics. */
int svm_stats(svm_stats_t *stats);
/* The same as one line of JSON (the format of SVM_STATS=json). `*len` is set to its length
 * without the NUL; SVM_E_TRUNC if `cap` <= that (nothing or a truncated string is written). */
int svm_stats_json(char *buf, size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif
#endif /* SVM_H */
