//! svm: a page-based software distributed shared memory.
//!
//! Several processes ("nodes") share one address range. Touching a page a node does not hold
//! fetches it; a coherence protocol keeps the copies consistent. Start a job with `svmrun`:
//!
//! ```text
//! target/release/svmrun -n 4 target/release/examples/counter 1000
//! ```
//!
//! ```no_run
//! fn main() -> Result<(), svm::SvmError> {
//!     let svm = svm::init()?;
//!     let counter = svm::alloc_collective::<u64>(1)?;
//!     let lock = svm::Mutex::new(1);
//!     {
//!         let _g = lock.lock()?;
//!         counter.set(0, counter.get(0) + 1);
//!     }
//!     svm::barrier()?;
//!     if svm::node_id() == 0 {
//!         println!("counter={}", counter.get(0));
//!     }
//!     svm.finish()?;
//!     Ok(())
//! }
//! ```

pub use bytemuck;
pub use svm_core::api::free_collective;
pub use svm_core::api::{
    alloc_collective, alloc_collective_with, alloc_local, alloc_local_first_touch, barrier,
    free_local, lock_id, node_id, nodes, page_size, stats, try_lock_id, unlock_id, Barrier, Home,
    Mutex, MutexGuard, Result, SharedSlice, Svm, SvmError, RESERVED_IDS,
};
pub use svm_core::api::{
    alloc_collective_in, home_of, measure_fault_detection, recv_message, sem_post, sem_wait,
    send_message, Semaphore, UserMessage,
};
/// Regions that can be destroyed, with collective allocations inside them.
pub use svm_core::region;
pub use svm_core::stats::Stats;

/// Joins the job started by `svmrun` (or Slurm / Open MPI with `SVM_COORD`); without a launcher
/// the process is a job of one node. Keep the returned handle alive until the end of `main`.
pub fn init() -> Result<Svm> {
    svm_core::api::init_with(svm_protocols::by_name)
}
