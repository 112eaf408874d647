/* A concurrent linked list in an UNDIVIDED region: the head lives in SMI_Cmalloc memory, nodes
 * come from SMI_Imalloc, every process inserts 100 entries under a mutex (and frees a few
 * scratch blocks with SMI_Ifree); the list must hold nprocs*100 entries, each once. */
#include <string.h>
#include "check.h"

#define PER_PROC 100

typedef struct entry {
    struct entry *next;
    int owner, value;
} entry_t;

typedef struct {
    entry_t *head;
    int count;
} list_t;

int main(int argc, char **argv) {
    int rank, size, id, mutex, i;
    smi_region_info_t info;
    char *base;
    list_t *list;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    SMI_Init_reginfo(&info, 1 << 20, 0);
    OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id, (char **)&base));
    OK(SMI_Init_shregMMU(id));
    OK(SMI_Cmalloc(sizeof(list_t), id, (void **)&list));
    {
        list_t *again = NULL;
        OK(SMI_Cmalloc(64, id, &again));
        CHECK(again != list, "two Cmallocs gave the same block");
        OK(SMI_Cfree(again));
    }
    OK(SMI_Mutex_init(&mutex));
    if (rank == 0) {
        list->head = NULL;
        list->count = 0;
    }
    SMI_Barrier();
    for (i = 0; i < PER_PROC; i++) {
        entry_t *e;
        char *scratch;
        OK(SMI_Imalloc(sizeof *e, id, (char **)&e));
        OK(SMI_Imalloc(40, id, (void **)&scratch));
        memset(scratch, 0x5a, 40);
        e->owner = rank;
        e->value = i;
        OK(SMI_Mutex_lock(mutex));
        e->next = list->head;
        list->head = e;
        list->count++;
        OK(SMI_Mutex_unlock(mutex));
        OK(SMI_Ifree(scratch));
    }
    CHECK(SMI_Ifree(base + 8) == SMI_ERR_BADADR, "freeing a non-block");
    SMI_Barrier();
    {
        int seen[64][PER_PROC];
        int n = 0;
        entry_t *e;
        memset(seen, 0, sizeof seen);
        OK(SMI_Mutex_lock(mutex));
        for (e = list->head; e; e = e->next, n++) {
            CHECK(e->owner >= 0 && e->owner < size && e->value >= 0 && e->value < PER_PROC, "bad entry");
            CHECK(!seen[e->owner][e->value], "entry %d/%d twice", e->owner, e->value);
            seen[e->owner][e->value] = 1;
        }
        CHECK(n == size * PER_PROC && list->count == n, "list has %d entries, count %d", n, list->count);
        OK(SMI_Mutex_unlock(mutex));
    }
    SMI_Barrier();
    OK(SMI_Finalize());
    if (rank == 0) printf("PASS list\n");
    return 0;
}
