//! The native API's synchronisation: locks (`Mutex`, lock ids), barriers and semaphores.

use super::*;

/// A job-wide mutex named by an id (the same id is the same lock on every node). Acquiring it
/// is an acquire and releasing it a release for the coherence protocol.
#[derive(Debug, Clone, Copy)]
pub struct Mutex {
    id: u64,
}

/// Holds a [`Mutex`]; unlocks on drop.
pub struct MutexGuard<'a> {
    m: &'a Mutex,
    done: bool,
}

impl Mutex {
    pub const fn new(id: u64) -> Mutex {
        Mutex { id }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn lock(&self) -> Result<MutexGuard<'_>> {
        let n = node()?;
        check_id(n, "lock", self.id)?;
        n.lock(self.id, false);
        Ok(MutexGuard {
            m: self,
            done: false,
        })
    }

    /// Takes the lock only if no one holds it.
    pub fn try_lock(&self) -> Result<Option<MutexGuard<'_>>> {
        let n = node()?;
        check_id(n, "lock", self.id)?;
        Ok(n.lock(self.id, true).then_some(MutexGuard {
            m: self,
            done: false,
        }))
    }

    fn unlock_id(&self) -> Result<()> {
        let n = node()?;
        if n.unlock(self.id) {
            Ok(())
        } else {
            Err(SvmError::NotLockHolder {
                node: n.me,
                lock: self.id,
            })
        }
    }
}

impl MutexGuard<'_> {
    /// Unlocks and reports errors (drop unlocks too but cannot report).
    pub fn unlock(mut self) -> Result<()> {
        self.done = true;
        self.m.unlock_id()
    }
}

impl Drop for MutexGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.m.unlock_id();
        }
    }
}

/// Low-level lock calls by id, for personalities that lock and unlock in separate calls.
pub fn lock_id(id: u64) -> Result<()> {
    let n = node()?;
    check_id(n, "lock", id)?;
    n.lock(id, false);
    Ok(())
}

/// Try-lock by id: `Ok(true)` if taken.
pub fn try_lock_id(id: u64) -> Result<bool> {
    let n = node()?;
    check_id(n, "lock", id)?;
    Ok(n.lock(id, true))
}

/// Unlock by id; an error if the calling thread does not hold it.
pub fn unlock_id(id: u64) -> Result<()> {
    Mutex::new(id).unlock_id()
}

/// A job-wide barrier for `count` threads (over all nodes), named by an id.
#[derive(Debug, Clone, Copy)]
pub struct Barrier {
    id: u64,
    count: u32,
}

impl Barrier {
    pub const fn new(id: u64, count: u32) -> Barrier {
        Barrier { id, count }
    }

    pub fn wait(&self) -> Result<()> {
        let n = node()?;
        check_id(n, "barrier", self.id)?;
        barrier_raw(n, self.id, self.count)
    }
}

/// Barrier `id` of every node of the job with exactly one calling thread on each node — what a
/// personality knows of its barriers when each of its processes is a node. It needs no
/// manager: a dissemination barrier of ⌈log2 N⌉ rounds (`docs/sync.md`). Every node must use
/// this form for `id` (never [`Barrier`] with the same id); a second thread of a node arriving
/// while the first waits gets [`SvmError::BarrierBusy`].
pub fn barrier_nodes(id: u64) -> Result<()> {
    let n = node()?;
    check_id(n, "barrier", id)?;
    barrier_result(n, id, n.barrier_all_nodes(id))
}

fn barrier_raw(n: &Node, id: u64, count: u32) -> Result<()> {
    barrier_result(n, id, n.barrier(id, count))
}

/// The global barrier: every node, one thread each, no manager (`Node::barrier_all_nodes`).
pub(super) fn global_barrier(n: &Node) -> Result<()> {
    barrier_result(n, GLOBAL_BARRIER, n.barrier_all_nodes(GLOBAL_BARRIER))
}

fn barrier_result(n: &Node, id: u64, r: WaitResult) -> Result<()> {
    match r {
        WaitResult::BarrierBusy => Err(SvmError::BarrierBusy {
            node: n.me,
            barrier: id,
        }),
        WaitResult::BarrierMismatch { expected, got } => Err(SvmError::BarrierMismatch {
            node: n.me,
            barrier: id,
            expected,
            got,
        }),
        WaitResult::ZeroCount => Err(SvmError::ZeroCount {
            node: n.me,
            barrier: id,
        }),
        _ => Ok(()),
    }
}

/// Posts job-wide counting semaphore `id` (a release: writes before it are visible to the
/// thread whose wait it satisfies).
pub fn sem_post(id: u64) -> Result<()> {
    let n = node()?;
    check_id(n, "semaphore", id)?;
    n.sem_post(id);
    Ok(())
}

/// Waits on job-wide counting semaphore `id` until a post is available (an acquire).
pub fn sem_wait(id: u64) -> Result<()> {
    let n = node()?;
    check_id(n, "semaphore", id)?;
    n.sem_wait(id);
    Ok(())
}

/// A job-wide counting semaphore named by an id, initially 0.
#[derive(Debug, Clone, Copy)]
pub struct Semaphore {
    id: u64,
}

impl Semaphore {
    pub const fn new(id: u64) -> Semaphore {
        Semaphore { id }
    }
    pub fn post(&self) -> Result<()> {
        sem_post(self.id)
    }
    pub fn wait(&self) -> Result<()> {
        sem_wait(self.id)
    }
}

pub use crate::node::UserMessage;

/// Barrier of all nodes (one calling thread per node).
pub fn barrier() -> Result<()> {
    let n = node()?;
    global_barrier(n)
}
