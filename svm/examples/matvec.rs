//! `matvec [N] [NNZ] [ITERS] [--seq]`: repeated sparse matrix–vector product `x ← A·x` with an
//! N×N matrix in CSR form (default N=40000, NNZ=64 non-zeros per row, ITERS=50).
//!
//! The matrix is random but seeded: row i draws its NNZ column indices and values from a
//! SplitMix64 generator seeded with `0x5eed ^ i`, the values of a row are scaled to sum to 1 (so
//! x stays bounded), and the columns of a row are sorted. Every node builds the rows it owns in
//! private memory (not timed, as in the sequential baseline); the vectors x and y are shared, one
//! collective allocation per row block homed on the node that computes it. Per iteration every
//! node reads the whole of x (the pages other nodes wrote are fetched again), computes its rows
//! of y, and a barrier ends the iteration. Each row is summed in the same order in every run, so
//! the result is bit-identical to the sequential run.
//!
//! Rank 0 prints `checksum=<FNV-1a 64 of the bits of x, hex> sum=<sum of x> time_s=<seconds of
//! the iteration loop>`. `--seq` runs the same in private memory without a job (the baseline).
//!
//! ```text
//! svmrun -n 2 target/release/examples/matvec 40000 64 50
//! target/release/examples/matvec 40000 64 50 --seq
//! ```

mod common;

use std::process::ExitCode;
use std::time::Instant;

use svm::{Home, SharedSlice};

const USAGE: &str =
    "usage: matvec [N] [NNZ] [ITERS] [--seq]    (default N=40000 NNZ=64 per row, ITERS=50)";

type BoxError = Box<dyn std::error::Error>;

struct Args {
    n: usize,
    nnz: usize,
    iters: usize,
    seq: bool,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut pos = Vec::new();
    let mut seq = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--seq" => seq = true,
            "-h" | "--help" => return Ok(None),
            s if s.starts_with('-') => return Err(format!("unknown option {s:?}")),
            _ => pos.push(a),
        }
    }
    if pos.len() > 3 {
        return Err("expected at most 3 numbers (N NNZ ITERS)".into());
    }
    let get = |i: usize, def: usize, what: &str| -> Result<usize, String> {
        match pos.get(i) {
            None => Ok(def),
            Some(s) => s
                .parse::<usize>()
                .ok()
                .filter(|&v| v > 0 && v <= 50_000_000)
                .ok_or_else(|| format!("{what} must be an integer in 1..=50000000, got {s:?}")),
        }
    };
    let n = get(0, 40_000, "N")?;
    let nnz = get(1, 64, "NNZ")?.min(n);
    let iters = get(2, 50, "ITERS")?;
    Ok(Some(Args { n, nnz, iters, seq }))
}

fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Some rows of the matrix in CSR form (row pointers relative to the first of them).
struct Csr {
    ptr: Vec<usize>,
    col: Vec<u32>,
    val: Vec<f64>,
}

impl Csr {
    fn build(a: &Args, rows: std::ops::Range<usize>) -> Csr {
        let mut m = Csr {
            ptr: vec![0],
            col: Vec::with_capacity(rows.len() * a.nnz),
            val: Vec::with_capacity(rows.len() * a.nnz),
        };
        let mut entries = Vec::with_capacity(a.nnz);
        for i in rows {
            let mut s = 0x5eed ^ i as u64;
            entries.clear();
            for _ in 0..a.nnz {
                let c = (splitmix(&mut s) % a.n as u64) as u32;
                let v = (splitmix(&mut s) >> 11) as f64 / (1u64 << 53) as f64 + 1e-3;
                entries.push((c, v));
            }
            entries.sort_by_key(|e| e.0);
            let total: f64 = entries.iter().map(|e| e.1).sum();
            for &(c, v) in &entries {
                m.col.push(c);
                m.val.push(v / total);
            }
            m.ptr.push(m.col.len());
        }
        m
    }

    /// `y[i - first] = (A·x)[i]` for the rows of this block.
    fn mul(&self, x: &[f64], y: &mut [f64]) {
        for (r, out) in y.iter_mut().enumerate() {
            let mut acc = 0.0f64;
            for k in self.ptr[r]..self.ptr[r + 1] {
                acc += self.val[k] * x[self.col[k] as usize];
            }
            *out = acc;
        }
    }
}

fn x0(n: usize) -> Vec<f64> {
    (0..n)
        .map(|j| ((j * 7919) % 1000) as f64 / 1000.0)
        .collect()
}

fn report(x: &[f64], time_s: f64) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in x {
        for b in v.to_bits().to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    let sum: f64 = x.iter().sum();
    println!("checksum={h:016x} sum={sum:.16e} time_s={time_s:.6}");
}

fn sequential(a: &Args) {
    let m = Csr::build(a, 0..a.n);
    let mut x = x0(a.n);
    let mut y = vec![0.0; a.n];
    let t0 = Instant::now();
    for _ in 0..a.iters {
        m.mul(&x, &mut y);
        std::mem::swap(&mut x, &mut y);
    }
    report(&x, t0.elapsed().as_secs_f64());
}

fn block(k: usize, nodes: usize, n: usize) -> std::ops::Range<usize> {
    k * n / nodes..(k + 1) * n / nodes
}

/// A vector of N f64 stored as one shared allocation per row block, block k homed on node k.
struct Vector {
    blocks: Vec<(usize, SharedSlice<f64>)>,
}

impl Vector {
    fn alloc(n: usize, nodes: usize) -> Result<Vector, BoxError> {
        let mut blocks = Vec::new();
        for k in 0..nodes {
            let r = block(k, nodes, n);
            blocks.push((
                r.start,
                svm::alloc_collective_with::<f64>(r.len().max(1), Home::Node(k as u16))?,
            ));
        }
        Ok(Vector { blocks })
    }
    fn read_all(&self, out: &mut [f64]) {
        let n = out.len();
        for (k, (start, s)) in self.blocks.iter().enumerate() {
            let end = self.blocks.get(k + 1).map_or(n, |b| b.0);
            s.read_into(0, &mut out[*start..end]);
        }
    }
}

fn distributed(a: &Args) -> Result<(), BoxError> {
    let svm = svm::init()?;
    let (me, nodes, n) = (svm::node_id(), svm::nodes(), a.n);
    if n < nodes {
        if me == 0 {
            eprintln!("matvec: N={n} is smaller than the number of nodes ({nodes})");
        }
        svm.finish()?;
        return Err("bad arguments".into());
    }
    let mut x = Vector::alloc(n, nodes)?;
    let mut y = Vector::alloc(n, nodes)?;
    let rows = block(me, nodes, n);
    let m = Csr::build(a, rows.clone());
    let init = x0(n);
    x.blocks[me].1.write_from(0, &init[rows.clone()]);
    let mut xl = vec![0.0f64; n];
    let mut yl = vec![0.0f64; rows.len()];
    svm::barrier()?;
    let t0 = Instant::now();
    for _ in 0..a.iters {
        x.read_all(&mut xl);
        m.mul(&xl, &mut yl);
        y.blocks[me].1.write_from(0, &yl);
        svm::barrier()?;
        std::mem::swap(&mut x, &mut y);
    }
    let time_s = t0.elapsed().as_secs_f64();
    if me == 0 {
        x.read_all(&mut xl);
        report(&xl, time_s);
    }
    svm.finish()?;
    Ok(())
}

fn main() -> ExitCode {
    common::main("matvec", USAGE, parse_args(), |a| {
        if a.seq {
            sequential(&a);
            return Ok(());
        }
        distributed(&a)
    })
}
