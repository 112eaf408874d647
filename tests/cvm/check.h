/* Shared by the CVM test programs: a failed check prints "FAIL <program>: ..." and ends the
 * whole job with an error (cvm_exit), so no process is left waiting at a barrier. */
#ifndef CVM_TEST_CHECK_H
#define CVM_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cvm.h>

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            char why_[512];                                                                \
            snprintf(why_, sizeof why_, __VA_ARGS__);                                      \
            printf("FAIL %s: process %d: %s:%d: %s: %s\n", PROGRAM, cvm_proc_id, __FILE__,  \
                   __LINE__, #cond, why_);                                                 \
            fflush(stdout);                                                                \
            cvm_exit("FAIL %s: %s", PROGRAM, why_);                                        \
        }                                                                                  \
    } while (0)

/* "-p N": the number of processes the job was started with (checked against cvm_num_procs). */
static inline int expected_procs(int argc, char **argv)
{
    int a;
    for (a = 1; a + 1 < argc; a++)
        if (!strcmp(argv[a], "-p")) return atoi(argv[a + 1]);
    return -1;
}

/* cvm_startup, then the check that the job has as many processes as "-p N" says (if given)
 * and at most `max_procs`. */
static inline void startup_checked(int argc, char **argv, int max_procs)
{
    int want = expected_procs(argc, argv);
    cvm_startup(argc, argv);
    CHECK(want < 0 || cvm_num_procs == want, "cvm_num_procs=%d, expected %d", cvm_num_procs, want);
    CHECK(cvm_num_procs <= max_procs, "at most %d processes", max_procs);
}

/* The value of option `flag` ("-r 5"), or `fallback` if it is not given. */
static inline int int_option(int argc, char **argv, const char *flag, int fallback)
{
    int a;
    for (a = 1; a + 1 < argc; a++)
        if (!strcmp(argv[a], flag)) return atoi(argv[a + 1]);
    return fallback;
}

#endif
