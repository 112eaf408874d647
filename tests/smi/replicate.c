/* Replication: the three-argument SMI_Init_reginfo, SMI_Switch_to_replication, every process
 * writing its own private copy, then SMI_Switch_to_sharing with SINGLE_SOURCE and with ADD
 * reductions, and SMI_Ensure_consistency inside a replicated phase. */
#include "check.h"

#define COUNT (64 * 1024 / 4)

int main(int argc, char **argv) {
    int rank, size, id, i, round;
    int *a;
    smi_region_info_t info;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    SMI_Init_reginfo(&info, COUNT * sizeof(int), 0);
    OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED | SMI_SHM_NONFIXED, &info, &id, (char **)&a));
    if (rank == 0)
        for (i = 0; i < COUNT; i++) a[i] = 7;
    SMI_Barrier();

    /* Private copies start as the shared contents; the source's copy wins. */
    OK(SMI_Switch_to_replication(id, SMI_REP_EVERYTHING, 0, 0, 0));
    for (i = 0; i < COUNT; i++) {
        CHECK(a[i] == 7, "copy starts with the contents: %d", a[i]);
        a[i] = rank + 100;
    }
    for (i = 0; i < COUNT; i++) CHECK(a[i] == rank + 100, "private copy changed: %d", a[i]);
    OK(SMI_Switch_to_sharing(id, SMI_SHR_SINGLE_SOURCE, size - 1, 0));
    for (i = 0; i < COUNT; i++) CHECK(a[i] == size - 1 + 100, "single source: a[%d] = %d", i, a[i]);
    SMI_Barrier();

    /* ADD of integer copies, with a consistency point in the middle. */
    OK(SMI_Switch_to_replication(id, SMI_REP_NOTHING, 0, 0, 0));
    for (i = 0; i < COUNT; i++) a[i] = rank + 1;
    OK(SMI_Ensure_consistency(id, SMI_SHR_ADD | SMI_DTYPE_FIXPOINT, COUNT, 0));
    for (i = 0; i < COUNT; i++) CHECK(a[i] == size * (size + 1) / 2, "ensure: a[%d] = %d", i, a[i]);
    for (round = 0; round < 2; round++)
        for (i = 0; i < COUNT; i++) a[i] += 1;
    OK(SMI_Switch_to_sharing(id, SMI_SHR_ADD | SMI_DTYPE_FIXPOINT, COUNT / 2, 0));
    for (i = 0; i < COUNT / 2; i++)
        CHECK(a[i] == size * (size * (size + 1) / 2 + 2), "add: a[%d] = %d", i, a[i]);
    SMI_Barrier();

    /* ADD of doubles (8-byte values). */
    {
        double *d = (double *)a;
        OK(SMI_Switch_to_replication(id, SMI_REP_EVERYTHING | SMI_REP_ONE_PER_NODE, 0, 0, 0));
        for (i = 0; i < COUNT / 2; i++) d[i] = 0.5 * rank;
        OK(SMI_Switch_to_sharing(id, SMI_SHR_ADD | SMI_DTYPE_FLOATINGPOINT | SMI_DTYPE_HIGHPRECISION, COUNT / 2, 0));
        for (i = 0; i < COUNT / 2; i++) CHECK(d[i] == 0.25 * size * (size - 1), "double add: %g", d[i]);
    }
    SMI_Barrier();
    OK(SMI_Finalize());
    if (rank == 0) printf("PASS replicate\n");
    return 0;
}
