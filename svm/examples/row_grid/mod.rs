//! The N×N grid of `f64` the grid examples (`jacobi`, `laplace`) share: its rows split into
//! `nodes` contiguous blocks, block k one collective allocation homed on node k, so every block
//! starts on a page boundary and a node's own rows never leave it.

use std::cell::Cell;

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
