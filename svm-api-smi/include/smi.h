/*
 * smi.h — the SMI (Shared Memory Interface) API on svm, a page-based software DSM.
 *
 * Written for svm from the interface facts of the project's spec (shared/spec/smi.md); programs
 * written for SMI 2.x compile against it unchanged and link with libsvm_smi:
 *
 *     cc $(svm-config --cflags) prog.c $(svm-config --libs smi) -o prog
 *     svmrun -n 4 ./prog args...
 *
 * Every process runs main (SPMD). One svm node is one SMI process and one SMI "node"
 * (so Node_size == Proc_size and Local_proc_size == 1). See docs/smi.md for what each call
 * maps to and for what is not supported.
 *
 * Pointer out-parameters: where SMI takes `void **address` (SMI_Create_shreg,
 * SMI_Connect_shreg, SMI_Imalloc, SMI_Cmalloc) this header declares `void *address`: pass the
 * address of any pointer variable — `&p`, `(void **)&p` and the old `(char **)&p` all compile
 * without a diagnostic, also under -Werror=incompatible-pointer-types. The library stores a
 * pointer (of the platform's pointer size) there.
 */
#ifndef SVM_SMI_H
#define SVM_SMI_H

#include <pthread.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int smi_error_t;

/* Error codes. */
#define SMI_SUCCESS        0
#define SMI_ERR_OTHER      1
#define SMI_ERR_NOINIT     2
#define SMI_ERR_PARAM      3
#define SMI_ERR_BADADR     4
#define SMI_ERR_MAPFAILED  5
#define SMI_ERR_NODEVICE   6
#define SMI_ERR_NOSEGMENT  7
#define SMI_ERR_NOMEM      8
#define SMI_ERR_NOTIMPL    9
#define SMI_ERR_TRANSFER   10
#define SMI_ERR_PENDING    11
#define SMI_ERR_NOTPOSTED  12
#define SMI_ERR_BADALIGN   13
#define SMI_ERR_BUSY       14

/* Region types (low bits of region_type) and flags (OR-ed in). */
#define SMI_SHM_UNDIVIDED   0
#define SMI_SHM_BLOCKED     1
#define SMI_SHM_CYCLIC      2
#define SMI_SHM_CUSTOMIZED  3
#define SMI_SHM_SMP         4
#define SMI_SHM_PT2PT       5
#define SMI_SHM_FRAGMENTED  6
#define SMI_SHM_LOCAL       7
#define SMI_SHM_REMOTE      8
#define SMI_SHM_RDMA        9
#define SMI_SHM_DELAYED     (1 << 10)
#define SMI_SHM_NONFIXED    (1 << 11)
#define SMI_SHM_REGISTER    (1 << 12)
#define SMI_SHM_PRIVATE     (1 << 13)
#define SMI_SHM_INTERN      (1 << 14)
#define SMI_SHM_SHRINKABLE  (1 << 15)
#define SMI_SHM_CALLBACK    (1 << 16)

/* SMI_Check_transfer flags. */
#define SMI_CHECK_FULL      0
#define SMI_CHECK_NOFLUSH   1
#define SMI_CHECK_NOBARRIER 2
#define SMI_CHECK_FAST      3
#define SMI_CHECK_PROBE     4

/* Region callbacks. */
#define SMI_CB_REASON_CONNECT    1
#define SMI_CB_REASON_DISCONNECT 2
#define SMI_CB_ACTION_NOTHING    1
#define SMI_CB_ACTION_FREEREG    2
#define SMI_CB_ACTION_TERMINATE  4
typedef int (*smi_region_callback_t)(int region_id, int cb_reason);

/* Adapters. */
#define SMI_ADPT_DEFAULT        0xf0
#define SMI_ADPT_CYCLIC         0xf1
#define SMI_ADPT_IMPEXP         0xf2
#define SMI_ADPT_SMP            0xf3
#define SMI_ADPT_BIDIRECTIONAL  0xf4
#define SMI_ADPT_INVALID        (-1)

/* Replication / sharing modes. */
#define SMI_SHR_SINGLE_SOURCE      1
#define SMI_SHR_LOOP_SPLITTING     2
#define SMI_SHR_ADD                4
#define SMI_REP_NOTHING            8
#define SMI_SHR_NOTHING            8
#define SMI_REP_EVERYTHING         16
#define SMI_REP_LOCAL_AND_BEYOND   32
#define SMI_SHR_EVERY_LOCAL        64
#define SMI_SHR_SPARSE             256
#define SMI_SHR_BAND               512
#define SMI_REP_ONE_PER_NODE       1024
#define SMI_DTYPE_FIXPOINT         2048
#define SMI_DTYPE_FLOATINGPOINT    4096
#define SMI_DTYPE_HIGHPRECISION    8192

/* Loop splitting. */
#define SMI_SPLIT_REGULAR    0
#define SMI_SPLIT_OWNER      1
#define SMI_LOOP_SET_GLOBAL  0
#define SMI_LOOP_GET_GLOBAL  1
#define SMI_LOOP_SET_LOCAL   2
#define SMI_LOOP_GET_LOCAL   3

/* Loop scheduling. */
#define SMI_PART_BLOCKED          1
#define SMI_PART_CYCLIC           2
#define SMI_PART_ADAPTED_BLOCKED  3
#define SMI_PART_TIMED_BLOCKED    4
#define SMI_LOOP_READY   0
#define SMI_LOOP_LOCAL   1
#define SMI_LOOP_REMOTE  2
#define SMI_NO_ADAPT     1
#define SMI_ADAPT_EXPO   2
#define SMI_ADAPT_LINEAR 3
#define SMI_ADAPT_OPT    4
#define SMI_HELP_ONLY_SMP (-1)
#define SMI_NO_CHANGE     0

/* SMI_Memcpy flags and direction hints. */
#define SMI_MEMCPY_NOBARRIER  1
#define SMI_MEMCPY_NOVERIFY   2
#define SMI_MEMCPY_ENQUEUE    4
#define SMI_MEMCPY_FORCE_DMA  8
#define SMI_MEMCPY_ALIGN      16
#define SMI_MEMCPY_FAST       3
#define SMI_MEMCPY_LP_LP      128
#define SMI_MEMCPY_LS_LP      128
#define SMI_MEMCPY_LS_LS      128
#define SMI_MEMCPY_LP_LS      256
#define SMI_MEMCPY_LP_RS      512
#define SMI_MEMCPY_RS_RS      512
#define SMI_MEMCPY_RS_LP      1024
#define SMI_MEMCPY_LS_RS      2048
#define SMI_MEMCPY_RS_LS      4096

/* I/O redirection. */
#define SMI_IO_ASIS  0
#define SMI_IO_FILE  1

/* SCI topology, write combining, watchdog, SCI system types. */
#define SMI_SCI_TOPOLOGY_UNKNOWN 0
#define SMI_SCI_TOPOLOGY_SWITCH  1
#define SMI_SCI_TOPOLOGY_TORUS   2
#define SMI_SCI_TOPOLOGY_SMP     3
#define SMI_WC_ENABLED    1
#define SMI_WC_DISABLED   0
#define SMI_WC_UNKNOWN    (-1)
#define SMI_WATCHDOG_DISABLE 0
#define SMI_WATCHDOG_OFF     (-1)
#define SMI_SCI_NONE     0
#define SMI_SCI_DOLPHIN  1
#define SMI_SCI_SCALI    2
#define SMI_SCI_UNKNOWN  256

/* Progress counters, signals, flushes. */
#define SMI_OWNPC          (-1)
#define SMI_SIGNAL_ANY     (256*256*256*64)
#define SMI_SIGNAL_BCAST   (SMI_SIGNAL_ANY-1)
#define SMI_FLUSH_ALL      (-1)

/* Algorithm selectors (accepted; svm has one lock and one barrier algorithm). */
#define PROGRESS_COUNTER_BARRIER 0
#define SCHULZ_BARRIER           1
#define L_MUTEX                  0
#define BL_MUTEX                 1
#define SCH_MUTEX                2
/* OR-ed into a mutex id: lock/unlock without consistency actions (svm performs them anyway,
 * which is stronger and therefore correct). */
#define NOCONSISTENCY            (1024*1024*1024)

/* SMI_Query commands. */
typedef enum {
    SMI_Q_SCI_STREAMBUFSIZE = 101,
    SMI_Q_SCI_NBRSTREAMBUFS,
    SMI_Q_SCI_NBRADAPTERS,
    SMI_Q_SCI_ADAPTERTYPE,
    SMI_Q_SCI_DEFADAPTER,
    SMI_Q_SCI_VALIDADAPTER,
    SMI_Q_SCI_ID,
    SMI_Q_SCI_PROC_ID,
    SMI_Q_SCI_CONNECTION_STATE,
    SMI_Q_SCI_ERRORS,
    SMI_Q_SCI_API_VERSION,
    SMI_Q_SCI_PACKETSIZE,
    SMI_Q_SCI_DMA_SIZE_ALIGN,
    SMI_Q_SCI_DMA_OFFSET_ALIGN,
    SMI_Q_SCI_DMA_MINSIZE,
    SMI_Q_SCI_DMA_MAXSIZE,
    SMI_Q_SCI_NBR_PHYS_DIMS,
    SMI_Q_SCI_PHYS_DIM_EXTENT,
    SMI_Q_SCI_SCI_TOPOLOGY_TYPE,
    SMI_Q_SCI_SCIIDS_VALID,
    SMI_Q_SCI_SYSTEM_TYPE,            /* 121 */
    SMI_Q_SMI_INITIALIZED = 201,      /* int; allowed before SMI_Init */
    SMI_Q_SMI_REGION_CONNECTED,       /* int, arg = region id */
    SMI_Q_SMI_REGION_SGMT_ID,         /* int, arg = region id */
    SMI_Q_SMI_SIGNALS_AVAILABLE,      /* int */
    SMI_Q_SMI_DMA_AVAILABLE,          /* int */
    SMI_Q_SMI_REGION_ADPTNBR,         /* int, arg = region id */
    SMI_Q_SMI_REGION_ADDRESS,         /* void *, arg = region id */
    SMI_Q_SMI_REGION_SIZE,            /* long, arg = region id */
    SMI_Q_SMI_REGION_OWNER,           /* int, arg = region id */
    SMI_Q_SMI_REGION_OFFSET,          /* long, arg = region id */
    SMI_Q_SMI_NBR_APP_DIMS,           /* int */
    SMI_Q_SMI_APP_DIM_EXTENT,         /* int, arg = dimension */
    SMI_Q_SMI_APP_DIM_OFFSET,         /* int, arg = dimension (213) */
    SMI_Q_SYS_NBRCPUS = 301,          /* int */
    SMI_Q_SYS_CPUFREQ,                /* int, MHz */
    SMI_Q_SYS_PAGESIZE,               /* int */
    SMI_Q_SYS_WRITECOMBINING,         /* int */
    SMI_Q_SYS_PID,                    /* int, arg = rank */
    SMI_Q_SYS_TICK_DURATION,          /* int, picoseconds per tick of SMI_Get_ticks */
    SMI_Q_SYS_CPU_CACHELINELEN        /* int (307) */
} smi_query_t;

/* Types. Field order and types are part of the interface: programs fill these in. */
typedef struct {
    int sci_id;
    int segment_id;
} smi_sgmt_locator_t;

typedef struct {
    size_t size;
    int owner;
    size_t offset;
    int sgmt_id;
    int partner;
    int nbr_sgmts;
    int *sgmt_owner;
    size_t *sgmt_size;
    int adapter;
    int rmt_adapter;
    int shrinkable;
    smi_region_callback_t cb_fcn;
} smi_region_info_t;

typedef struct {
    size_t nsegments;
    size_t size;
    char *adr;
    size_t *seg_size;
    char **seg_adr;
    int *seg_machine;
} smi_rlayout_t;

typedef struct smi_memcpy_handle_s *smi_memcpy_handle;

typedef struct {
    pthread_t ptThread;
    int iProcRank;
    void (*callback_fcn)(void *);
    void *callback_arg;
} smi_signal_handle_t;
typedef smi_signal_handle_t *smi_signal_handle;

/* ---- Init and runtime information ------------------------------------------------------ */
smi_error_t SMI_Init(int *argc, char ***argv);
smi_error_t SMI_Finalize(void);
void SMI_Abort(int code);
smi_error_t SMI_Proc_rank(int *rank);
smi_error_t SMI_Proc_size(int *size);
smi_error_t SMI_Local_proc_rank(int *rank);
smi_error_t SMI_Local_proc_size(int *size);
smi_error_t SMI_Max_local_proc_size(int *size);
smi_error_t SMI_Node_rank(int *rank);
smi_error_t SMI_Node_size(int *size);
smi_error_t SMI_Proc_to_node(int proc, int *node);
smi_error_t SMI_First_proc_on_node(int node, int *proc);
smi_error_t SMI_Get_node_name(char *name, size_t *len);
smi_error_t SMI_Page_size(int *size);
smi_error_t SMI_Query(smi_query_t cmd, int arg, void *result);

/* ---- Regions ----------------------------------------------------------------------------- */
/* address: the address of a pointer variable (void ** or char ** etc., see the top). */
smi_error_t SMI_Create_shreg(int region_type, smi_region_info_t *info, int *id, void *address);
smi_error_t SMI_Init_reginfo_full(smi_region_info_t *info, size_t size, size_t offset, int owner,
                                  int loc_adpt, int rmt_adpt, int sgmt_id,
                                  smi_region_callback_t cb);
smi_error_t SMI_Init_reginfo_short(smi_region_info_t *info, int size, int owner);
/* SMI_Init_reginfo(info, size, offset, owner, loc_adpt, rmt_adpt, sgmt_id, cb) and the older
 * SMI_Init_reginfo(info, size, owner): dispatched on the number of arguments. */
#define SMI_REGINFO_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, NAME, ...) NAME
#define SMI_Init_reginfo(...)                                                                \
    SMI_REGINFO_PICK_(__VA_ARGS__, SMI_Init_reginfo_full, SMI_REGINFO_BAD_ARGC_,             \
                      SMI_REGINFO_BAD_ARGC_, SMI_REGINFO_BAD_ARGC_, SMI_REGINFO_BAD_ARGC_,   \
                      SMI_Init_reginfo_short, SMI_REGINFO_BAD_ARGC_, SMI_REGINFO_BAD_ARGC_)  \
    (__VA_ARGS__)
smi_error_t SMI_Connect_shreg(int id, void *address);
smi_error_t SMI_Free_shreg(int id);
smi_error_t SMI_Set_adapter(int adapter);
smi_error_t SMI_Set_region_callback(int id, smi_region_callback_t cb);
smi_error_t SMI_Adr_to_region(void *adr, int *id);
smi_error_t SMI_Range_to_region(void *adr, size_t len, int *id);
smi_error_t SMI_Region_layout(int id, smi_rlayout_t **r);
smi_error_t SMI_Get_region_locator(int id, smi_sgmt_locator_t *locator);
void print_region(void);

/* ---- Dynamic memory inside a region ------------------------------------------------------ */
smi_error_t SMI_Init_shregMMU(int region_id);
smi_error_t SMI_Imalloc(size_t size, int region_id, void *address);
smi_error_t SMI_Cmalloc(size_t size, int region_id, void *address);
smi_error_t SMI_Ifree(void *address);
smi_error_t SMI_Cfree(void *address);
void *SMI_Nodemem_address(int node);
void *SMI_Nodemem_alloc(size_t size);
smi_error_t SMI_Nodemem_free(void *buf);

/* ---- Synchronization (consistency points) ------------------------------------------------ */
smi_error_t SMI_BARRIER(int id);
smi_error_t SMI_BARRIER_INIT(int *id, int algorithm, int is_active);
smi_error_t SMI_BARRIER_DESTROY(int id);
smi_error_t SMI_MUTEX_INIT(int *id, int algorithm, int prank);
#define SMI_Barrier() SMI_BARRIER(0)
#define SMI_Mutex_init(id) SMI_MUTEX_INIT((id), BL_MUTEX, -1)
#define SMI_Mutex_init_with_locality(id, prank) SMI_MUTEX_INIT((id), BL_MUTEX, (prank))
smi_error_t SMI_Mutex_lock(int id);
smi_error_t SMI_Mutex_trylock(int id, int *acquired);
smi_error_t SMI_Mutex_unlock(int id);
smi_error_t SMI_Mutex_destroy(int id);
smi_error_t SMI_Location_of_mutex(int id, int *prank);
smi_error_t SMI_Flush_write(int rank);
smi_error_t SMI_Flush_read(int rank);

/* ---- Progress counters ------------------------------------------------------------------- */
smi_error_t SMI_Init_PC(int *id);
smi_error_t SMI_Reset_PC(int id);
smi_error_t SMI_Increment_PC(int id, int val);
smi_error_t SMI_Get_PC(int id, int proc, int *val);
smi_error_t SMI_Wait_individual_PC(int id, int proc, int val);
smi_error_t SMI_Wait_collective_PC(int id, int val);

/* ---- Loop splitting ---------------------------------------------------------------------- */
smi_error_t SMI_Loop_split_init(int *loop_id);
smi_error_t SMI_Loop_index_range(int loop_id, int *lower, int *upper, int mode);
smi_error_t SMI_Determine_loop_splitting(int loop_id, int mode, int param1, int param2);
smi_error_t SMI_Loop_time_start(int loop_id);
smi_error_t SMI_Loop_time_stop(int loop_id);
smi_error_t SMI_Loop_balance_index_range(int loop_id);

/* ---- Loop scheduling --------------------------------------------------------------------- */
smi_error_t SMI_Loop_init(int *id, int lo, int hi, int mode);
smi_error_t SMI_Get_iterations(int id, int *status, int *lo, int *hi);
smi_error_t SMI_Loop_free(int id);
smi_error_t SMI_Evaluate_speed(double *speeds);
smi_error_t SMI_Use_evaluated_speed(int id);
smi_error_t SMI_Set_loop_param(int id, double k, int minLocal, int minRemote, int maxLocal,
                               int maxRemote);
smi_error_t SMI_Set_loop_help_param(int id, int maxHelpDist);
smi_error_t SMI_Loop_k_adaption_mode(int id, int mode, int maxCalcDist);

/* ---- Switching consistency --------------------------------------------------------------- */
smi_error_t SMI_Switch_to_replication(int id, int mode, int param1, int param2, int param3);
smi_error_t SMI_Switch_to_sharing(int id, int comb_mode, int param1, int param2);
smi_error_t SMI_Ensure_consistency(int id, int comb_mode, int param1, int param2);

/* ---- Transfers --------------------------------------------------------------------------- */
smi_error_t SMI_Memcpy(void *dst, void *src, size_t len, int flags);
smi_error_t SMI_Imemcpy(void *dst, void *src, size_t len, int flags, smi_memcpy_handle *h);
smi_error_t SMI_Memwait(smi_memcpy_handle h);
smi_error_t SMI_Memtest(smi_memcpy_handle h);
smi_error_t SMI_MemwaitAll(int n, smi_memcpy_handle *h, smi_error_t *status);
smi_error_t SMI_MemtestAll(int n, smi_memcpy_handle *h, smi_error_t *status);
smi_error_t SMI_Put(int region, int offset, void *src, size_t len);
smi_error_t SMI_Get(void *dst, int region, int offset, size_t len);
smi_error_t SMI_Iput(int region, int offset, void *src, size_t len, smi_memcpy_handle *h);
smi_error_t SMI_Iget(void *dst, int region, int offset, size_t len, smi_memcpy_handle *h);
smi_error_t SMI_Check_transfer(int flags);
smi_error_t SMI_Check_transfer_addr(void *adr, int flags);
smi_error_t SMI_Check_transfer_proc(int proc, int flags);

/* ---- Signals and small messages ---------------------------------------------------------- */
smi_error_t SMI_Signal_send(int rank);
smi_error_t SMI_Signal_wait(int rank);
smi_error_t SMI_Signal_setCallBack(int rank, void (*fn)(void *), void *arg, smi_signal_handle *h);
smi_error_t SMI_Signal_joinCallBack(smi_signal_handle *h);
smi_error_t SMI_Send(void *buf, int count, int dest);
smi_error_t SMI_Recv(void *buf, int count, int src);
smi_error_t SMI_Isend(void *buf, int count, int dest);
smi_error_t SMI_Send_wait(int dest);
smi_error_t SMI_Sendrecv(void *sbuf, void *rbuf, int count, int peer);

/* ---- Time and the rest ------------------------------------------------------------------- */
smi_error_t SMI_Get_timer(int *sec, int *usec);
smi_error_t SMI_Get_timespan(int *sec, int *usec);
double SMI_Wtime(void);
long SMI_Wticks(void);
void SMI_Get_ticks(void *ticks64);
smi_error_t SMI_Debug(int level);
smi_error_t SMI_Watchdog(int seconds);
smi_error_t SMI_Watchdog_callback(void (*fn)(void));
smi_error_t SMI_Redirect_IO(int err, void *errparam, int out, void *outparam, int in,
                            void *inparam);

#ifdef __cplusplus
}
#endif

#endif /* SVM_SMI_H */
