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
