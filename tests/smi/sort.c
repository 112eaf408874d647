/* Parallel merge sort: every process sorts its part in its own UNDIVIDED region (homed on
 * it), then the parts are merged pairwise in log2(nprocs) rounds, each merge reading the
 * partner's region remotely; process 0 checks the result. */
#include <string.h>
#include "check.h"

#define PER_PROC 20000

static void msort(int *a, int *tmp, int n) {
    int i, j, k, h;
    if (n < 2) return;
    h = n / 2;
    msort(a, tmp, h);
    msort(a + h, tmp, n - h);
    for (i = 0, j = h, k = 0; k < n; k++)
        tmp[k] = (j >= n || (i < h && a[i] <= a[j])) ? a[i++] : a[j++];
    memcpy(a, tmp, n * sizeof(int));
}

int main(int argc, char **argv) {
    int rank, size, p, step, *tmp;
    int **part, *len;
    smi_region_info_t info;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    part = malloc(size * sizeof(int *));
    len = malloc(size * sizeof(int));
    /* Region p is homed on process p and big enough for everything merged into it. */
    for (p = 0; p < size; p++) {
        int id;
        SMI_Init_reginfo(&info, (int)(size * PER_PROC * sizeof(int)), p);
        OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (char **)&part[p]));
        len[p] = PER_PROC;
    }
    {
        unsigned x = 12345u + 7919u * rank;
        int i;
        for (i = 0; i < PER_PROC; i++) {
            x = x * 1103515245u + 12345u;
            part[rank][i] = (int)((x >> 8) % 1000000);
        }
    }
    tmp = malloc(size * PER_PROC * sizeof(int));
    msort(part[rank], tmp, PER_PROC);
    SMI_Barrier();
    for (step = 1; step < size; step *= 2) {
        if (rank % (2 * step) == 0 && rank + step < size) {
            int *a = part[rank], *b = part[rank + step];
            int na = len[rank], nb = len[rank + step], i = 0, j = 0, k;
            for (k = 0; k < na + nb; k++)
                tmp[k] = (j >= nb || (i < na && a[i] <= b[j])) ? a[i++] : b[j++];
            memcpy(a, tmp, (na + nb) * sizeof(int));
        }
        for (p = 0; p + step < size; p += 2 * step) len[p] += len[p + step];
        SMI_Barrier();
    }
    if (rank == 0) {
        int i;
        CHECK(len[0] == size * PER_PROC, "length %d", len[0]);
        for (i = 1; i < len[0]; i++) CHECK(part[0][i - 1] <= part[0][i], "unsorted at %d", i);
        printf("PASS sort\n");
    }
    OK(SMI_Finalize());
    return 0;
}
