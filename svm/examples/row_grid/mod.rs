//! The N×N grid of `f64` the grid examples (`jacobi`, `laplace`) share: its rows split into
//! `nodes` contiguous blocks, block k one collective allocation homed on node k, so every block
//! starts on a page boundary and a node's own rows never leave it.

use std::cell::Cell;
use std::sync::{Barrier, Mutex};
use std::time::Instant;

use svm::{Home, SharedSlice};

/// The rows of node `k` of `nodes`: `[k*n/nodes, (k+1)*n/nodes)`.
pub fn block(k: usize, nodes: usize, n: usize) -> std::ops::Range<usize> {
    k * n / nodes..(k + 1) * n / nodes
}

pub struct Grid {
    n: usize,
    /// `first[k]` = first row of block k; `first[nodes]` = n.
    first: Vec<usize>,
    blocks: Vec<SharedSlice<f64>>,
}

impl Grid {
    /// Collective: every node calls it with the same arguments, in the same order.
    pub fn alloc(n: usize, nodes: usize) -> svm::Result<Grid> {
        let mut first = Vec::with_capacity(nodes + 1);
        let mut blocks = Vec::with_capacity(nodes);
        for k in 0..nodes {
            let rows = block(k, nodes, n);
            first.push(rows.start);
            blocks.push(svm::alloc_collective_with::<f64>(
                rows.len().max(1) * n,
                Home::Node(k as u16),
            )?);
        }
        first.push(n);
        Ok(Grid { n, first, blocks })
    }

    /// Side length N.
    pub fn n(&self) -> usize {
        self.n
    }

    /// (block, offset of the row's first element inside the block)
    fn locate(&self, row: usize) -> (usize, usize) {
        let k = self.first.partition_point(|&f| f <= row) - 1;
        (k, (row - self.first[k]) * self.n)
    }

    /// Row `row` in place in shared memory.
    pub fn row(&self, row: usize) -> &[Cell<f64>] {
        let (k, off) = self.locate(row);
        &self.blocks[k].cells()[off..off + self.n]
    }

    pub fn read_row(&self, row: usize, dst: &mut [f64]) {
        let (k, off) = self.locate(row);
        self.blocks[k].read_into(off, dst);
    }

    pub fn write_row(&self, row: usize, src: &[f64]) {
        let (k, off) = self.locate(row);
        self.blocks[k].write_from(off, src);
    }
}

/// Runs `body` on `t` scoped threads of this process — the examples' pthreads baselines.
/// Thread k gets `k`, the barrier of all `t` threads and `start`, which it calls once its
/// private setup is done: the threads meet there, and the time counts from then. Returns the
/// threads' results in thread order and the seconds since the start.
pub fn on_threads<R: Send>(
    t: usize,
    body: impl Fn(usize, &Barrier, &dyn Fn()) -> R + Sync,
) -> Result<(Vec<R>, f64), String> {
    let barrier = Barrier::new(t);
    let t0 = Mutex::new(None::<Instant>);
    let results: Vec<Option<R>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..t)
            .map(|k| {
                let (barrier, t0, body) = (&barrier, &t0, &body);
                s.spawn(move || {
                    let start = || {
                        if barrier.wait().is_leader() {
                            *t0.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                        }
                    };
                    body(k, barrier, &start)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().ok()).collect()
    });
    let start = t0
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .ok_or("no thread started")?;
    let time_s = start.elapsed().as_secs_f64();
    let results = results
        .into_iter()
        .collect::<Option<Vec<R>>>()
        .ok_or("a thread failed")?;
    Ok((results, time_s))
}

/// The halo exchange of the examples' pthreads baselines: thread k of `t` owns rows
/// `block(k, t, n)` and keeps them in private memory with one halo row on each side (its
/// *local rows*, [`Halos::local_rows`]). After a sweep it publishes its first and last rows
/// (and its largest change) in the slot of the sweep's parity, so that a slow reader of the
/// previous sweep's rows is never overwritten; after the barrier it copies its neighbours'
/// edge rows of that parity into its halos.
pub struct Halos {
    n: usize,
    t: usize,
    slots: Vec<[Mutex<Edges>; 2]>,
}

/// A thread's first and last rows after a sweep, and its largest change so far.
#[derive(Default)]
struct Edges {
    first: Vec<f64>,
    last: Vec<f64>,
    err: f64,
}

impl Halos {
    pub fn new(n: usize, t: usize) -> Halos {
        Halos {
            n,
            t,
            slots: (0..t).map(|_| Default::default()).collect(),
        }
    }

    /// Thread k's local rows: its block and the halo row on each side that exists.
    pub fn local_rows(&self, k: usize) -> std::ops::Range<usize> {
        let rows = block(k, self.t, self.n);
        rows.start.saturating_sub(1)..(rows.end + 1).min(self.n)
    }

    /// Thread k's own rows of `local` (its local rows, row-major).
    pub fn own<'a>(&self, k: usize, local: &'a [f64]) -> &'a [f64] {
        let (rows, lo) = (block(k, self.t, self.n), self.local_rows(k).start);
        &local[(rows.start - lo) * self.n..(rows.end - lo) * self.n]
    }

    /// Thread k publishes the edge rows of `local` and `err` for the sweep of `parity`.
    pub fn publish(&self, k: usize, parity: usize, local: &[f64], err: f64) {
        let own = self.own(k, local);
        let mut e = self.edges(k, parity);
        e.first = own[..self.n].to_vec();
        e.last = own[own.len() - self.n..].to_vec();
        e.err = err;
    }

    /// Thread k copies its neighbours' edge rows of the sweep of `parity` into the halos of
    /// `local` (after the barrier that ends the sweep).
    pub fn fetch(&self, k: usize, parity: usize, local: &mut [f64]) {
        let n = self.n;
        if k > 0 {
            local[..n].copy_from_slice(&self.edges(k - 1, parity).last);
        }
        if k + 1 < self.t {
            let l = local.len() - n;
            local[l..].copy_from_slice(&self.edges(k + 1, parity).first);
        }
    }

    /// The largest change every thread published for the sweep of `parity`.
    #[allow(
        dead_code,
        reason = "each example compiles this module on its own; jacobi runs a fixed number of \
                  iterations and compares no change"
    )]
    pub fn max_err(&self, parity: usize) -> f64 {
        (0..self.t).fold(0.0f64, |m, j| m.max(self.edges(j, parity).err))
    }

    fn edges(&self, k: usize, parity: usize) -> std::sync::MutexGuard<'_, Edges> {
        self.slots[k][parity]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}
