/* Hello world with queries, the runtime information calls and both SMI_Init_reginfo forms. */
#include <string.h>
#include <unistd.h>
#include "check.h"

int main(int argc, char **argv) {
    int init = -1, rank, size, lrank, lsize, nrank, nsize, node, first, page, pid, ncpu;
    char name[256];
    size_t len = sizeof name;
    void *adr = NULL;
    long rsize = 0;
    smi_region_info_t info;
    int id;
    char *p;

    CHECK(SMI_Query(SMI_Q_SMI_INITIALIZED, 0, &init) == SMI_SUCCESS && init == 0, "before init: %d", init);
    OK(SMI_Init(&argc, &argv));
    CHECK(argc == 3 && strcmp(argv[1], "user1") == 0 && strcmp(argv[2], "user2") == 0 && argv[3] == NULL,
          "argc %d", argc);
    OK(SMI_Query(SMI_Q_SMI_INITIALIZED, 0, &init));
    CHECK(init == 1, "initialized %d", init);
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    OK(SMI_Local_proc_rank(&lrank));
    OK(SMI_Local_proc_size(&lsize));
    OK(SMI_Node_rank(&nrank));
    OK(SMI_Node_size(&nsize));
    OK(SMI_Proc_to_node(rank, &node));
    OK(SMI_First_proc_on_node(node, &first));
    OK(SMI_Get_node_name(name, &len));
    OK(SMI_Page_size(&page));
    CHECK(rank >= 0 && rank < size && lrank == 0 && lsize == 1 && nsize == size && nrank == rank, "ranks");
    CHECK(first == rank && len == strlen(name) && len > 0, "node name/first");
    CHECK(page >= 4096 && page % 4096 == 0, "page %d", page);
    OK(SMI_Query(SMI_Q_SYS_PID, rank, &pid));
    CHECK(pid == (int)getpid(), "pid %d", pid);
    OK(SMI_Query(SMI_Q_SYS_NBRCPUS, 0, &ncpu));
    CHECK(ncpu >= 1, "cpus");
    {
        int n = -1;
        OK(SMI_Query(SMI_Q_SCI_NBRADAPTERS, 0, &n));
        CHECK(n == 0, "adapters %d", n);
        OK(SMI_Query(SMI_Q_SCI_SYSTEM_TYPE, 0, &n));
        CHECK(n == SMI_SCI_NONE, "system %d", n);
        CHECK(SMI_Query((smi_query_t)999, 0, &n) == SMI_ERR_PARAM, "bad query");
    }
    /* The three-argument form, an UNDIVIDED region on the last process. */
    SMI_Init_reginfo(&info, 3 * page + 1, size - 1);
    OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (char **)&p));
    OK(SMI_Query(SMI_Q_SMI_REGION_ADDRESS, id, &adr));
    OK(SMI_Query(SMI_Q_SMI_REGION_SIZE, id, &rsize));
    CHECK(adr == (void *)p && rsize == 4 * page, "address/size %p %ld", adr, rsize);
    if (rank == size - 1) strcpy(p + 3 * page, "hello from the owner");
    SMI_Barrier();
    CHECK(strcmp(p + 3 * page, "hello from the owner") == 0, "shared contents");
    /* The eight-argument form. */
    SMI_Init_reginfo(&info, page, 0, 0, SMI_ADPT_DEFAULT, SMI_ADPT_DEFAULT, 0, NULL);
    OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (void **)&p));
    OK(SMI_Free_shreg(id));
    CHECK(SMI_Free_shreg(id) == SMI_ERR_PARAM, "double free");
    printf("hello from process %d of %d on %s\n", rank, size, name);
    OK(SMI_Finalize());
    if (rank == 0) printf("PASS hello\n");
    return 0;
}
