/*
 * splash_svm.h — the C interface of libsvm_splash, the SPLASH-2 (ANL macro) personality of svm.
 *
 * Programs do not call these functions directly: the macro file c.m4.svm expands the ANL macros
 * (MAIN_ENV, CREATE, G_MALLOC, LOCK, BARRIER, ...) into calls to them. Written for svm from the
 * facts in the project's spec; every function is safe to call from any node and any thread.
 *
 * Identity, allocation and synchronisation objects are job-wide: an id or a pointer returned on
 * one node means the same object on every node.
 */
#ifndef SPLASH_SVM_H
#define SPLASH_SVM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Entry point used by the __wrap_main stub linked into the executable (svm-config --libs
 * splash adds -Wl,--wrap=main and the stub). Joins the job, makes [data_start, data_end) — the
 * executable's writable data — a shared region homed on the master, then runs real_main on the
 * master (node 0) and the worker loop on every other node. Returns the process exit status. */
int svm_splash_main(int argc, char **argv, int (*real_main)(int, char **),
                    void *data_start, void *data_end);

/* MAIN_INITENV(...): the runtime is already initialised; kept for symmetry (and for the size
 * hint, which is accepted and ignored). */
void svm_splash_initenv(void);

/* MAIN_END: flushes stdio on every node, stops the workers, ends the job with status 0. */
void svm_splash_main_end(void) __attribute__((noreturn));

/* CLOCK(var): microseconds since the master started, one time base for the whole job. */
unsigned long svm_splash_clock(void);

/* G_MALLOC(size[, node]) / NU_MALLOC: job-wide allocation callable from any node; the same
 * pointer is valid on every node. 16-byte aligned (page aligned from one page up). Never
 * returns NULL: on failure the job ends with a message. */
void *svm_splash_malloc(size_t size);
/* G_FREE / NU_FREE: returns memory allocated on this node; other pointers are ignored. */
void svm_splash_free(void *ptr);

/* CREATE(fn): runs fn on an idle node (round-robin over the workers; more CREATEs than nodes
 * run as extra threads). The master's writes before CREATE are visible to fn (release/acquire). */
void svm_splash_create(void (*fn)(void));
/* CREATE(fn, n): n-1 workers run fn, then the caller runs fn itself. */
void svm_splash_create_n(void (*fn)(void), long n);
/* Waits until n more dispatched workers have returned (an acquire). WAIT_FOR_END(n) passes
 * the number of workers CREATE dispatched on the calling thread since the last wait (the
 * macros count them): CREATE(fn, P) dispatches P-1 and runs fn on the caller itself. */
void svm_splash_wait_for_end(long n);

/* Locks and barriers are named by the address of their LOCKDEC / ALOCKDEC element / BARDEC
 * variable, as in the suite's pthread macros (the variable's contents are never read or
 * written): every node runs the program at the same addresses. Nothing to initialise. */
void svm_splash_lock_at(const void *lock);
void svm_splash_unlock_at(const void *lock);
/* BARRIER(b, n): waits for n participants. */
void svm_splash_barrier_at(const void *barrier, long n);

/* Pause flags (PAUSEDEC/PAUSEINIT/SETPAUSE/WAITPAUSE/CLEARPAUSE; EVENT/PAUSE too). */
long svm_splash_pause_new(void);
void svm_splash_pause_set(long id);
void svm_splash_pause_wait(long id);
void svm_splash_pause_clear(long id);

/* Splash-3 condition variables: wait releases `lock`, waits for a signal, re-acquires `lock`. */
long svm_splash_condvar_new(void);
void svm_splash_condvar_wait(long cv, const void *lock);
void svm_splash_condvar_signal(long cv);
void svm_splash_condvar_broadcast(long cv);

/* RELEASE_FENCE / ACQUIRE_FENCE / FULL_FENCE. */
void svm_splash_fence(void);

/* This node's rank and the job size (GET_PID uses the rank). */
long svm_splash_node(void);
long svm_splash_nodes(void);

#ifdef __cplusplus
}
#endif

#endif /* SPLASH_SVM_H */
