//! The numeric interface of `smi.h` (values fixed by the SMI spec).

#![allow(dead_code)]

pub const SMI_SUCCESS: i32 = 0;
pub const SMI_ERR_OTHER: i32 = 1;
pub const SMI_ERR_NOINIT: i32 = 2;
pub const SMI_ERR_PARAM: i32 = 3;
pub const SMI_ERR_BADADR: i32 = 4;
pub const SMI_ERR_MAPFAILED: i32 = 5;
pub const SMI_ERR_NODEVICE: i32 = 6;
pub const SMI_ERR_NOSEGMENT: i32 = 7;
pub const SMI_ERR_NOMEM: i32 = 8;
pub const SMI_ERR_NOTIMPL: i32 = 9;
pub const SMI_ERR_TRANSFER: i32 = 10;
pub const SMI_ERR_PENDING: i32 = 11;
pub const SMI_ERR_NOTPOSTED: i32 = 12;
pub const SMI_ERR_BADALIGN: i32 = 13;
pub const SMI_ERR_BUSY: i32 = 14;

pub const SHM_UNDIVIDED: i32 = 0;
pub const SHM_BLOCKED: i32 = 1;
pub const SHM_CYCLIC: i32 = 2;
pub const SHM_CUSTOMIZED: i32 = 3;
pub const SHM_SMP: i32 = 4;
pub const SHM_PT2PT: i32 = 5;
pub const SHM_FRAGMENTED: i32 = 6;
pub const SHM_LOCAL: i32 = 7;
pub const SHM_REMOTE: i32 = 8;
pub const SHM_RDMA: i32 = 9;
pub const SHM_TYPE_MASK: i32 = 0x3ff;
pub const SHM_DELAYED: i32 = 1 << 10;
pub const SHM_NONFIXED: i32 = 1 << 11;
pub const SHM_REGISTER: i32 = 1 << 12;
pub const SHM_PRIVATE: i32 = 1 << 13;
pub const SHM_INTERN: i32 = 1 << 14;
pub const SHM_SHRINKABLE: i32 = 1 << 15;
pub const SHM_CALLBACK: i32 = 1 << 16;

pub const CHECK_NOFLUSH: i32 = 1;

pub const CB_REASON_CONNECT: i32 = 1;
pub const CB_REASON_DISCONNECT: i32 = 2;
pub const CB_ACTION_NOTHING: i32 = 1;
pub const CB_ACTION_FREEREG: i32 = 2;
pub const CB_ACTION_TERMINATE: i32 = 4;

pub const ADPT_DEFAULT: i32 = 0xf0;
pub const ADPT_BIDIRECTIONAL: i32 = 0xf4;

pub const SHR_SINGLE_SOURCE: i32 = 1;
pub const SHR_LOOP_SPLITTING: i32 = 2;
pub const SHR_ADD: i32 = 4;
pub const REP_NOTHING: i32 = 8;
pub const SHR_NOTHING: i32 = 8;
pub const REP_EVERYTHING: i32 = 16;
pub const REP_LOCAL_AND_BEYOND: i32 = 32;
pub const SHR_EVERY_LOCAL: i32 = 64;
pub const SHR_SPARSE: i32 = 256;
pub const SHR_BAND: i32 = 512;
pub const REP_ONE_PER_NODE: i32 = 1024;
pub const DTYPE_FIXPOINT: i32 = 2048;
pub const DTYPE_FLOATINGPOINT: i32 = 4096;
pub const DTYPE_HIGHPRECISION: i32 = 8192;

pub const SPLIT_REGULAR: i32 = 0;
pub const SPLIT_OWNER: i32 = 1;
pub const LOOP_SET_GLOBAL: i32 = 0;
pub const LOOP_GET_GLOBAL: i32 = 1;
pub const LOOP_SET_LOCAL: i32 = 2;
pub const LOOP_GET_LOCAL: i32 = 3;

pub const PART_BLOCKED: i32 = 1;
pub const PART_CYCLIC: i32 = 2;
pub const PART_ADAPTED_BLOCKED: i32 = 3;
pub const PART_TIMED_BLOCKED: i32 = 4;
pub const LOOP_READY: i32 = 0;
pub const LOOP_LOCAL: i32 = 1;
pub const LOOP_REMOTE: i32 = 2;
pub const NO_ADAPT: i32 = 1;
pub const ADAPT_EXPO: i32 = 2;
pub const ADAPT_LINEAR: i32 = 3;
pub const ADAPT_OPT: i32 = 4;
pub const HELP_ONLY_SMP: i32 = -1;
pub const NO_CHANGE: i32 = 0;

pub const MEMCPY_NOBARRIER: i32 = 1;

pub const IO_ASIS: i32 = 0;
pub const IO_FILE: i32 = 1;

pub const SCI_TOPOLOGY_UNKNOWN: i32 = 0;
pub const WC_DISABLED: i32 = 0;
pub const WATCHDOG_DISABLE: i32 = 0;
pub const WATCHDOG_OFF: i32 = -1;
pub const SCI_NONE: i32 = 0;

pub const OWNPC: i32 = -1;
pub const SIGNAL_ANY: i32 = 256 * 256 * 256 * 64;
pub const SIGNAL_BCAST: i32 = SIGNAL_ANY - 1;
pub const FLUSH_ALL: i32 = -1;
pub const NOCONSISTENCY: i32 = 1024 * 1024 * 1024;

// smi_query_t
pub const Q_SCI_FIRST: i32 = 101;
pub const Q_SCI_ADAPTERTYPE: i32 = 104;
pub const Q_SCI_ID: i32 = 107;
pub const Q_SCI_PROC_ID: i32 = 108;
pub const Q_SCI_CONNECTION_STATE: i32 = 109;
pub const Q_SCI_SCI_TOPOLOGY_TYPE: i32 = 119;
pub const Q_SCI_SYSTEM_TYPE: i32 = 121;
pub const Q_SMI_INITIALIZED: i32 = 201;
pub const Q_SMI_REGION_CONNECTED: i32 = 202;
pub const Q_SMI_REGION_SGMT_ID: i32 = 203;
pub const Q_SMI_SIGNALS_AVAILABLE: i32 = 204;
pub const Q_SMI_DMA_AVAILABLE: i32 = 205;
pub const Q_SMI_REGION_ADPTNBR: i32 = 206;
pub const Q_SMI_REGION_ADDRESS: i32 = 207;
pub const Q_SMI_REGION_SIZE: i32 = 208;
pub const Q_SMI_REGION_OWNER: i32 = 209;
pub const Q_SMI_REGION_OFFSET: i32 = 210;
pub const Q_SMI_NBR_APP_DIMS: i32 = 211;
pub const Q_SMI_APP_DIM_EXTENT: i32 = 212;
pub const Q_SMI_APP_DIM_OFFSET: i32 = 213;
pub const Q_SYS_NBRCPUS: i32 = 301;
pub const Q_SYS_CPUFREQ: i32 = 302;
pub const Q_SYS_PAGESIZE: i32 = 303;
pub const Q_SYS_WRITECOMBINING: i32 = 304;
pub const Q_SYS_PID: i32 = 305;
pub const Q_SYS_TICK_DURATION: i32 = 306;
pub const Q_SYS_CPU_CACHELINELEN: i32 = 307;
