/* Using SMI after SMI_Finalize (as MP-MPICH's put and registering do at other than two
 * processes): calls return SMI_ERR_NOINIT, and the job ends with the status the program
 * chooses (here SMI_Abort(3) on the last process) — no process may die of SIGPIPE. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size, id, r;
    smi_region_info_t info;
    char *p;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    OK(SMI_Finalize());
    CHECK(SMI_Proc_rank(&r) == SMI_ERR_NOINIT, "rank after finalize");
    SMI_Init_reginfo(&info, 4096, 0, rank, SMI_ADPT_DEFAULT, 0, 0, NULL);
    CHECK(SMI_Create_shreg(SMI_SHM_LOCAL, &info, &id, (void **)&p) == SMI_ERR_NOINIT, "create after finalize");
    CHECK(SMI_Signal_send(((rank + 1) % size) | SMI_SIGNAL_ANY) == SMI_ERR_NOINIT, "signal after finalize");
    printf("after finalize %d\n", rank);
    fflush(stdout);
    if (rank == size - 1) SMI_Abort(3);
    return 0;
}
