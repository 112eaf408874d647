/* A buffer handed back and forth by signals and messages, each side writing it with plain
 * stores or a copy: what a process stored before it signals (or sends a message) is what the
 * receiver reads, under every protocol that makes a release visible at its receiver's next
 * read (sc-sw, sc-mw). The shape of MP-MPICH's `put` example: the owner checks the data,
 * clears the buffer with plain stores and signals; the writer copies the same data again.
 * A writer that kept a stale copy of the cleared page would send no change (its copy already
 * held the data) and the owner would read zeros. Processes other than 0 and 1 only meet the
 * final barrier. */
#include <string.h>
#include "check.h"

#define INTS 4096 /* 16 KiB: four pages */
#define ROUNDS 6

int main(int argc, char **argv) {
    int rank, size, i, round, *buf;
    static int pattern[INTS];
    char token[8] = "token";
    smi_region_info_t info;
    int id;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    /* One region, every page homed on process 1 (the owner), or 0 alone. */
    SMI_Init_reginfo(&info, sizeof(int) * INTS, size > 1 ? 1 : 0);
    OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (void **)&buf));
    for (i = 0; i < INTS; i++)
        pattern[i] = 17 * i + 13;
    if (rank == 1)
        memset(buf, 0, sizeof(int) * INTS);
    SMI_Barrier();
    if (size > 1 && rank < 2) {
        for (round = 0; round < ROUNDS; round++) {
            /* Even rounds hand over by signals, odd rounds by messages. */
            int by_message = round % 2;
            if (rank == 0) {
                /* The owner cleared the buffer before it handed it over. */
                for (i = 0; i < INTS; i++)
                    CHECK(buf[i] == 0, "round %d: buf[%d] = %d, not the owner's 0", round, i,
                          buf[i]);
                if (round % 3 == 2) {
                    for (i = 0; i < INTS; i++) /* plain stores, then the hand-over */
                        buf[i] = pattern[i];
                } else {
                    OK(SMI_Memcpy(buf, pattern, sizeof pattern, SMI_MEMCPY_NOBARRIER));
                }
                if (by_message)
                    OK(SMI_Send(token, sizeof token, 1));
                else
                    OK(SMI_Signal_send(1));
                if (by_message)
                    OK(SMI_Recv(token, sizeof token, 1));
                else
                    OK(SMI_Signal_wait(1));
            } else {
                if (by_message)
                    OK(SMI_Recv(token, sizeof token, 0));
                else
                    OK(SMI_Signal_wait(0));
                for (i = 0; i < INTS; i++)
                    CHECK(buf[i] == pattern[i], "round %d: buf[%d] = %d, not %d", round, i,
                          buf[i], pattern[i]);
                memset(buf, 0, sizeof(int) * INTS);
                if (by_message)
                    OK(SMI_Send(token, sizeof token, 0));
                else
                    OK(SMI_Signal_send(0));
            }
        }
    }
    SMI_Barrier();
    if (rank == 0)
        printf("PASS handoff\n");
    SMI_Finalize();
    return 0;
}
