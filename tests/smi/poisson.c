/* Jacobi iterations for a Poisson problem over a BLOCKED region (one block of rows per
 * process), the rows handed out by loop scheduling; the result must equal a sequential run.
 * A second loop with every scheduling mode checks that each index is handed out exactly once. */
#include <math.h>
#include <string.h>
#include "check.h"

#define N 64
#define ITERS 20

static void seq(double *g, double *h) {
    int it, i, j;
    for (it = 0; it < ITERS; it++) {
        double *src = it % 2 ? h : g, *dst = it % 2 ? g : h;
        for (i = 1; i < N - 1; i++)
            for (j = 1; j < N - 1; j++)
                dst[i * N + j] = 0.25 * (src[(i - 1) * N + j] + src[(i + 1) * N + j] + src[i * N + j - 1] +
                                         src[i * N + j + 1]) + 0.001;
    }
}

static double init_val(int i, int j) {
    return (i == 0 || j == 0 || i == N - 1 || j == N - 1) ? 0.5 + 0.5 * sin(8.0 * i / N + 8.0 * j / N) : 0.0;
}

int main(int argc, char **argv) {
    int rank, size, id, id2, loop, status, lo, hi, i, j, it, mode;
    double *grid;
    smi_region_info_t info;
    long *hits; /* 8-byte words: processes write neighbouring entries concurrently */
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    SMI_Init_reginfo(&info, 2 * N * N * sizeof(double), 0, 0, 0, 0, 0, NULL);
    OK(SMI_Create_shreg(SMI_SHM_BLOCKED, &info, &id, (char **)&grid));
    {
        smi_rlayout_t *l;
        size_t s, total = 0;
        OK(SMI_Region_layout(id, &l));
        CHECK(l->nsegments == (size_t)size && l->adr == (char *)grid, "layout: %zu segments", l->nsegments);
        for (s = 0; s < l->nsegments; s++) {
            CHECK(l->seg_machine[s] == (int)s && l->seg_adr[s] == (char *)grid + total, "segment %zu", s);
            total += l->seg_size[s];
        }
        CHECK(total >= 2 * N * N * sizeof(double), "total %zu", total);
        free(l->seg_size); free(l->seg_adr); free(l->seg_machine); free(l);
    }
    /* Initialise through loop scheduling (the SMI example's pattern). */
    OK(SMI_Loop_init(&loop, 0, N - 1, SMI_PART_BLOCKED));
    do {
        OK(SMI_Get_iterations(loop, &status, &lo, &hi));
        for (i = lo; i <= hi; i++)
            for (j = 0; j < N; j++) grid[i * N + j] = grid[N * N + i * N + j] = init_val(i, j);
    } while (status != SMI_LOOP_READY);
    OK(SMI_Loop_free(loop));
    SMI_Barrier();
    for (it = 0; it < ITERS; it++) {
        double *src = grid + (it % 2) * N * N, *dst = grid + ((it + 1) % 2) * N * N;
        OK(SMI_Loop_init(&loop, 1, N - 2, SMI_PART_BLOCKED));
        OK(SMI_Set_loop_param(loop, SMI_NO_CHANGE, 2, 1, SMI_NO_CHANGE, SMI_NO_CHANGE));
        do {
            OK(SMI_Get_iterations(loop, &status, &lo, &hi));
            for (i = lo; i <= hi; i++)
                for (j = 1; j < N - 1; j++)
                    dst[i * N + j] = 0.25 * (src[(i - 1) * N + j] + src[(i + 1) * N + j] + src[i * N + j - 1] +
                                             src[i * N + j + 1]) + 0.001;
        } while (status != SMI_LOOP_READY);
        OK(SMI_Loop_free(loop));
        SMI_Barrier();
    }
    if (rank == 0) {
        double *g = malloc(N * N * sizeof(double)), *h = malloc(N * N * sizeof(double));
        for (i = 0; i < N; i++)
            for (j = 0; j < N; j++) g[i * N + j] = h[i * N + j] = init_val(i, j);
        seq(g, h);
        for (i = 0; i < N * N; i++) CHECK(fabs(g[i] - grid[i]) < 1e-12, "cell %d: %g vs %g", i, g[i], grid[i]);
        free(g); free(h);
    }
    SMI_Barrier();
    /* Every index exactly once, for every partitioning, with stealing and a slow process. */
    SMI_Init_reginfo(&info, 1000 * sizeof(long), 0);
    OK(SMI_Create_shreg(SMI_SHM_UNDIVIDED, &info, &id2, (char **)&hits));
    {
        double speeds[64];
        OK(SMI_Evaluate_speed(speeds));
        CHECK(speeds[0] > 0.0, "speed %g", speeds[0]);
    }
    for (mode = SMI_PART_BLOCKED; mode <= SMI_PART_TIMED_BLOCKED; mode++) {
        int mutex, local = 0, remote = 0;
        OK(SMI_Mutex_init(&mutex));
        if (rank == 0) memset(hits, 0, 1000 * sizeof(long));
        SMI_Barrier();
        OK(SMI_Loop_init(&loop, 3, 999, mode));
        if (mode == SMI_PART_ADAPTED_BLOCKED) OK(SMI_Use_evaluated_speed(loop));
        OK(SMI_Set_loop_param(loop, 2.0, SMI_NO_CHANGE, SMI_NO_CHANGE, 50, 20));
        OK(SMI_Loop_k_adaption_mode(loop, SMI_ADAPT_LINEAR, 0));
        do {
            OK(SMI_Get_iterations(loop, &status, &lo, &hi));
            if (status == SMI_LOOP_LOCAL) local++;
            if (status == SMI_LOOP_REMOTE) remote++;
            OK(SMI_Mutex_lock(mutex));
            for (i = lo; i <= hi; i += (mode == SMI_PART_CYCLIC ? size : 1)) hits[i]++;
            OK(SMI_Mutex_unlock(mutex));
            if (rank == 0) { volatile double x = 0; int k; for (k = 0; k < 200000; k++) x += k; }
        } while (status != SMI_LOOP_READY);
        OK(SMI_Loop_free(loop));
        SMI_Barrier();
        if (rank == 0)
            for (i = 0; i < 1000; i++) CHECK(hits[i] == (i >= 3), "mode %d: index %d handed out %ld times", mode, i, hits[i]);
        SMI_Barrier();
    }
    /* Old loop splitting: REGULAR and OWNER over the BLOCKED region. */
    {
        int sp, glo, ghi, llo, lhi, total;
        OK(SMI_Loop_split_init(&sp));
        glo = 0; ghi = 2 * N * N - 1;
        OK(SMI_Loop_index_range(sp, &glo, &ghi, SMI_LOOP_SET_GLOBAL));
        OK(SMI_Determine_loop_splitting(sp, SMI_SPLIT_OWNER, sizeof(double), id));
        OK(SMI_Loop_index_range(sp, &llo, &lhi, SMI_LOOP_GET_LOCAL));
        {
            int rid;
            if (lhi >= llo) {
                OK(SMI_Adr_to_region(&grid[llo], &rid));
                CHECK(rid == id, "region of an owned element");
            }
        }
        OK(SMI_Determine_loop_splitting(sp, SMI_SPLIT_REGULAR, 0, 0));
        OK(SMI_Loop_time_start(sp));
        OK(SMI_Loop_index_range(sp, &llo, &lhi, SMI_LOOP_GET_LOCAL));
        OK(SMI_Loop_time_stop(sp));
        OK(SMI_Loop_balance_index_range(sp));
        OK(SMI_Loop_index_range(sp, &llo, &lhi, SMI_LOOP_GET_LOCAL));
        hits[rank] = lhi - llo + 1;
        SMI_Barrier();
        for (i = 0, total = 0; i < size; i++) total += (int)hits[i];
        CHECK(total == 2 * N * N, "balanced ranges cover %d", total);
    }
    OK(SMI_Finalize());
    if (rank == 0) printf("PASS poisson\n");
    return 0;
}
