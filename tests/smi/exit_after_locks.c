/* A program that takes a lock again and again (so its thread caches the lock's fast-path word)
 * and then returns from main without SMI_Finalize: the job ends in the exit handlers, after
 * the main thread's thread-local destructors ran. The end must still wait for every process and
 * exit 0 (it once panicked there: "cannot access a Thread Local Storage value during or after
 * destruction"). */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size, mutex, i;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    OK(SMI_Mutex_init(&mutex));
    for (i = 0; i < 200; i++) {
        OK(SMI_Mutex_lock(mutex));
        OK(SMI_Mutex_unlock(mutex));
    }
    OK(SMI_Barrier());
    printf("PASS exit_after_locks %d of %d\n", rank, size);
    fflush(stdout);
    return 0;
}
