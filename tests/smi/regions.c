/* Region types: FRAGMENTED, CUSTOMIZED, CYCLIC, SMP, LOCAL imported as REMOTE and RDMA (with
 * SMI_Put/SMI_Get and the asynchronous forms), DELAYED + SMI_Connect_shreg, callbacks,
 * address lookups, and limits. */
#include <string.h>
#include <unistd.h>
#include "check.h"

static volatile int connects = 0;
static int on_region(int region, int reason) {
    (void)region;
    if (reason == SMI_CB_REASON_CONNECT) connects++;
    return SMI_CB_ACTION_NOTHING;
}

int main(int argc, char **argv) {
    int rank, size, page, id, i, rid;
    smi_region_info_t info;
    char *frag[16];
    char *p;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    OK(SMI_Page_size(&page));

    /* Limits. */
    SMI_Init_reginfo(&info, 0, 0);
    CHECK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, &p) == SMI_ERR_PARAM, "size 0");
    SMI_Init_reginfo(&info, page, size);
    CHECK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, &p) == SMI_ERR_PARAM, "owner out of range");
    SMI_Init_reginfo(&info, page, 0);
    CHECK(SMI_Create_shreg(99, &info, &id, &p) == SMI_ERR_PARAM, "bad type");

    /* FRAGMENTED: the caller's array receives nprocs pointers, one fragment per process. */
    CHECK(size <= 16, "at most 16 processes");
    SMI_Init_reginfo(&info, size * 3 * page, 0);
    OK(SMI_Create_shreg(SMI_SHM_FRAGMENTED, &info, &id, (void **)frag));
    memset(frag[rank], 'a' + rank, 3 * page);
    SMI_Barrier();
    for (i = 0; i < size; i++) CHECK(frag[i][0] == 'a' + i && frag[i][3 * page - 1] == 'a' + i, "fragment %d", i);
    OK(SMI_Adr_to_region(frag[size - 1] + 5, &rid));
    CHECK(rid == id, "fragment lookup");

    /* CUSTOMIZED: two segments, the second on the last process. */
    {
        int owners[2] = {0, size - 1};
        size_t sizes[2] = {(size_t)page, (size_t)2 * page};
        smi_rlayout_t *l;
        SMI_Init_reginfo(&info, 3 * page, 0);
        info.nbr_sgmts = 2;
        info.sgmt_owner = owners;
        info.sgmt_size = sizes;
        OK(SMI_Create_shreg(SMI_SHM_CUSTOMIZED, &info, &id, &p));
        OK(SMI_Region_layout(id, &l));
        CHECK(l->nsegments == 2 && l->seg_machine[1] == size - 1 && l->seg_size[1] == (size_t)2 * page, "custom layout");
        if (rank == size - 1) p[page] = 42;
        SMI_Barrier();
        CHECK(p[page] == 42, "custom contents");
        OK(SMI_Range_to_region(p + page, 2 * page, &rid));
        CHECK(rid == id, "range lookup");
        CHECK(SMI_Range_to_region(p + page, 3 * page, &rid) == SMI_ERR_BADADR, "range beyond the region");
    }

    /* CYCLIC: pages dealt round-robin. */
    {
        smi_rlayout_t *l;
        SMI_Init_reginfo(&info, 4 * page, 0);
        OK(SMI_Create_shreg(SMI_SHM_CYCLIC, &info, &id, &p));
        OK(SMI_Region_layout(id, &l));
        CHECK(l->nsegments == 4 && l->seg_machine[3] == 3 % size, "cyclic layout");
        p[rank * page] = 1;
        SMI_Barrier();
        for (i = 0; i < size && i < 4; i++) CHECK(p[i * page] == 1, "cyclic page %d", i);
    }

    /* SMP: private to this process's node (itself). */
    SMI_Init_reginfo(&info, page, rank);
    OK(SMI_Create_shreg(SMI_SHM_SMP, &info, &id, &p));
    p[0] = 1;
    OK(SMI_Free_shreg(id));

    /* LOCAL on every process, imported as REMOTE by the next one and as RDMA by the one after. */
    {
        int lid, rem, rdma, next = (rank + 1) % size, prev = (rank + size - 1) % size, prev2 = (rank + 2 * size - 2) % size;
        int *mine, *theirs, *none = (int *)1;
        int buf[4] = {0}, val[4] = {1, 2, 3, 4};
        smi_memcpy_handle h[2];
        smi_error_t st[2];
        SMI_Init_reginfo(&info, 2 * page, 0, rank, 0, 0, 500 + rank, on_region);
        OK(SMI_Create_shreg(SMI_SHM_LOCAL | SMI_SHM_CALLBACK, &info, &lid, (void **)&mine));
        for (i = 0; i < 4; i++) mine[i] = rank * 10 + i;
        OK(SMI_Flush_write(SMI_FLUSH_ALL));
        SMI_Init_reginfo(&info, 2 * page, 0, prev, 0, 0, 500 + prev, NULL);
        OK(SMI_Create_shreg(SMI_SHM_REMOTE, &info, &rem, (void **)&theirs));
        SMI_Barrier();
        CHECK(theirs[3] == prev * 10 + 3, "remote contents %d", theirs[3]);
        SMI_Init_reginfo(&info, 2 * page, 0, prev2, 0, 0, 500 + prev2, NULL);
        OK(SMI_Create_shreg(SMI_SHM_RDMA, &info, &rdma, (void **)&none));
        CHECK(none == NULL, "RDMA regions are not mapped");
        OK(SMI_Get(buf, rdma, 0, sizeof buf));
        CHECK(buf[2] == (prev2) * 10 + 2, "SMI_Get %d", buf[2]);
        SMI_Barrier();
        OK(SMI_Iput(rdma, 4 * sizeof(int), val, sizeof val, &h[0]));
        OK(SMI_Iget(buf, rdma, 4 * sizeof(int), sizeof buf, &h[1]));
        OK(SMI_Memtest(h[0]));
        OK(SMI_MemwaitAll(2, h, st));
        CHECK(st[0] == SMI_SUCCESS && buf[3] == 4, "Iput/Iget");
        CHECK(SMI_Put(rdma, 2 * page - 2, val, 4) == SMI_ERR_PARAM, "Put beyond the region");
        OK(SMI_Check_transfer(SMI_CHECK_FULL));
        OK(SMI_Check_transfer_proc(next, SMI_CHECK_NOFLUSH));
        SMI_Barrier();
        /* Region callbacks are asynchronous (a signal thread runs them): wait up to 5 s. */
        for (i = 0; size > 1 && connects < 1 && i < 5000; i++) usleep(1000);
        if (size > 1) CHECK(connects >= 1, "connect callbacks: %d", connects);
        OK(SMI_Free_shreg(rem));
        OK(SMI_Free_shreg(rdma));
        SMI_Barrier();
        OK(SMI_Free_shreg(lid));
    }

    /* DELAYED: non-owners connect later. */
    {
        char *q = (char *)1;
        int conn = -1;
        SMI_Init_reginfo(&info, page, 0);
        OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED | SMI_SHM_DELAYED, &info, &id, &q));
        CHECK(rank == 0 ? q != NULL : q == NULL, "delayed address %p", (void *)q);
        OK(SMI_Query(SMI_Q_SMI_REGION_CONNECTED, id, &conn));
        CHECK(conn == (rank == 0), "connected %d", conn);
        if (rank == 0) strcpy(q, "delayed");
        SMI_Barrier();
        OK(SMI_Connect_shreg(id, &q));
        CHECK(q != NULL && strcmp(q, "delayed") == 0, "connected contents");
    }
    {
        void *nm = SMI_Nodemem_address(size - 1), *mem = SMI_Nodemem_alloc(100);
        CHECK(nm != NULL && mem != NULL && SMI_Nodemem_address(size) == NULL, "node memory");
        OK(SMI_Nodemem_free(mem));
    }
    if (rank == 0) print_region();
    OK(SMI_Finalize());
    if (rank == 0) printf("PASS regions\n");
    return 0;
}
