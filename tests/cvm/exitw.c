/*
 * exitw.c -- cvm_exit("...") from a worker ends the whole job with an error: the last process
 * calls it while every other process waits at a barrier that can never complete.
 *
 *   exitw -p P
 *
 * Prints "exitw: process <k> calls cvm_exit" before the call; the job must end non-zero with
 * the message "exitw: worker <k> gives up" and nothing may keep running. "FAIL exitw" if the
 * barrier ever completes.
 */
#define PROGRAM "exitw"
#include "check.h"

static void worker(void)
{
    int P = cvm_num_procs;
    if (PID == P - 1) {
        printf("exitw: process %d calls cvm_exit\n", PID);
        fflush(stdout);
        cvm_exit("exitw: worker %d gives up", PID);
    }
    cvm_barrier(0);
    printf("FAIL exitw: process %d passed a barrier that process %d never reached\n", PID, P - 1);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    cvm_startup(argc, argv);
    cvm_create_procs(worker);
    worker();
    cvm_finish();
    printf("FAIL exitw: the master finished normally\n");
    return 0;
}
