/*
 * cvm.h — the CVM (Coherent Virtual Machine) interface of svm, written for svm from the facts
 * in the project's spec. Link with the flags of `svm-config --libs cvm` (they wrap main: every
 * process but the master waits for cvm_create_procs instead of running main).
 *
 * Semantics: ordinary globals are private to each process; at cvm_create_procs the workers
 * start with the master's globals as they are at that moment. cvm_alloc memory is shared,
 * with lazy-release-style consistency (default protocol `scope`; SVM_PROTOCOL selects another):
 * data written under lock L is seen by the next holder of L, everything written before a
 * barrier by everyone after it.
 */
#ifndef SVM_CVM_H
#define SVM_CVM_H

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Locks: ids 0 .. CVM_MAX_LOCKS-1. */
#define CVM_MAX_LOCKS 4096
/* Worker threads per process (the extension cvm_create_procs_threads). */
#define CVM_MAX_THREADS 64

extern int cvm_num_procs;   /* number of processes (nodes) */
extern int cvm_proc_id;     /* this process, 0 .. cvm_num_procs-1; 0 is the master */

/* The calling CVM thread's id, unique across the job (proc_id * CVM_MAX_THREADS + thread). */
int cvm_tid(void);
#define PID (cvm_proc_id)
#define TID (cvm_tid())

void  cvm_startup(int argc, char **argv);
void  cvm_finish(void);
void  cvm_create_procs(void (*worker)(void));
/* Extension: `threads` CVM threads per process run worker (the master's own call counts as
 * one of the master's); cvm_barrier then waits for cvm_num_procs * threads threads. */
void  cvm_create_procs_threads(void (*worker)(void), int threads);
void *cvm_alloc(int size);
void  cvm_lock(int id);
void  cvm_unlock(int id);
void  cvm_barrier(int id);

/* Ends the whole job with `status` after printing `msg` (used by cvm_exit). */
void  svm_cvm_abort(int status, const char *msg) __attribute__((noreturn));

/* cvm_exit(fmt, ...): print the message, end the whole job with an error. */
static inline void cvm_exit(char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    svm_cvm_abort(1, msg);
}

/* Entry point of the __wrap_main stub (not for programs). */
int svm_cvm_main(int argc, char **argv, int (*real_main)(int, char **),
                 void *data_start, void *data_end);

#ifdef __cplusplus
}
#endif

#endif /* SVM_CVM_H */
