//! `jacobi [N] [ITERS] [--verify]`: Jacobi relaxation on an N×N grid of `f64` (default 1024,
//! 100 iterations). The top row is held at 1.0, the other boundary cells at 0.0.
//!
//! The rows are split in `nodes()` contiguous blocks, block k computed by node k. Each grid (old
//! and new) is allocated as one collective allocation per block, homed on the node that computes
//! it (`Home::Node(k)`), so every block starts on a page boundary and a node's own rows never
//! leave it; only the rows next to a block boundary travel. A barrier ends every iteration.
//!
//! Before the clock starts each node fills its own rows of the grid written first, as each
//! thread of the pthreads baseline (`--threads`) fills its private copy of it.
//!
//! Rank 0 prints `checksum=<sum of the final grid> time_s=<seconds of the iteration loop>`. With
//! `--verify` it also runs the same iterations sequentially in private memory (same operations in
//! the same order per cell, so the results are bit-identical), compares every cell and appends
//! `OK` to the line; a mismatch is reported on stderr and the exit status is 1.
//!
//! With `--seq` no job is joined: the same iterations run sequentially in private memory and the
//! process prints the same `checksum=… time_s=…` line (the baseline of `svm-bench apps`).
//!
//! With `--threads T` no job is joined either: T threads of this process compute the same row
//! blocks in private memory (each keeps its block plus one halo row on each side, publishes its
//! edge rows after every iteration and meets the others at a `std::sync::Barrier`), as a
//! pthreads program would; same line, same checksum (the baseline of "N nodes vs N threads").
//!
//! ```text
//! svmrun -n 4 target/release/examples/jacobi 1024 100 --verify
//! target/release/examples/jacobi 1024 100 --seq
//! target/release/examples/jacobi 1024 100 --threads 2
//! ```

mod common;
mod row_grid;

use std::cell::Cell;
use std::process::ExitCode;
use std::time::Instant;

use row_grid::{block, Grid, Halos};

const USAGE: &str =
    "usage: jacobi [N] [ITERS] [--verify] [--seq] [--threads T]    (N×N grid, default N=1024 ITERS=100)";
const DEFAULT_N: usize = 1024;
const DEFAULT_ITERS: usize = 100;
const TOP: f64 = 1.0;

type BoxError = Box<dyn std::error::Error>;

struct Args {
    n: usize,
    iters: usize,
    verify: bool,
    /// Sequential baseline in private memory, no job.
    seq: bool,
    /// Threads in private memory, no job (0 = not this mode).
    threads: usize,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut positional = Vec::new();
    let mut verify = false;
    let mut seq = false;
    let mut threads = 0;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--verify" => verify = true,
            "--seq" => seq = true,
            "--threads" => {
                let v = it.next().ok_or("--threads needs a value")?;
                threads = match v.parse::<usize>() {
                    Ok(t) if (1..=256).contains(&t) => t,
                    _ => return Err(format!("T must be an integer from 1 to 256, got {v:?}")),
                };
            }
            "-h" | "--help" => return Ok(None),
            s if s.starts_with('-') => return Err(format!("unknown option {s:?}")),
            _ => positional.push(a),
        }
    }
    if positional.len() > 2 {
        return Err(format!(
            "expected at most 2 numbers (N ITERS), got {}",
            positional.len()
        ));
    }
    let n = match positional.first() {
        Some(s) => s
            .parse::<usize>()
            .map_err(|_| format!("N must be a positive integer, got {s:?}"))?,
        None => DEFAULT_N,
    };
    let iters = match positional.get(1) {
        Some(s) => s
            .parse::<usize>()
            .map_err(|_| format!("ITERS must be a non-negative integer, got {s:?}"))?,
        None => DEFAULT_ITERS,
    };
    if n < 3 {
        return Err(format!(
            "N must be at least 3 (a grid with an interior), got {n}"
        ));
    }
    if n.checked_mul(n).and_then(|c| c.checked_mul(8)).is_none() {
        return Err(format!("N={n} is too large"));
    }
    Ok(Some(Args {
        n,
        iters,
        verify,
        seq,
        threads,
    }))
}

/// One relaxation step of an interior row: `out[j]` is the mean of the four neighbours of
/// `cur[j]`; the boundary columns are copied. Both the distributed run (on shared memory in
/// place) and the sequential run (on private memory) use this function, so they perform the
/// same operations in the same order.
fn relax_row(prev: &[Cell<f64>], cur: &[Cell<f64>], next: &[Cell<f64>], out: &[Cell<f64>]) {
    let n = cur.len();
    let (prev, next, out) = (&prev[..n], &next[..n], &out[..n]);
    out[0].set(cur[0].get());
    out[n - 1].set(cur[n - 1].get());
    for j in 1..n - 1 {
        out[j]
            .set(0.25 * (((prev[j].get() + next[j].get()) + cur[j - 1].get()) + cur[j + 1].get()));
    }
}

/// `cells` of private memory, for [`relax_row`].
fn as_cells(v: &mut [f64]) -> &[Cell<f64>] {
    Cell::from_mut(v).as_slice_of_cells()
}

/// Relaxes `rows` (interior rows only) from `old` into `new`, in place in shared memory.
fn step_shared(old: &Grid, new: &Grid, rows: std::ops::Range<usize>) {
    let rows = rows.start.max(1)..rows.end.min(old.n() - 1);
    for r in rows {
        relax_row(old.row(r - 1), old.row(r), old.row(r + 1), new.row(r));
    }
}

/// The same computation in private memory.
fn sequential(n: usize, iters: usize) -> Vec<f64> {
    let mut old = vec![0.0f64; n * n];
    old[..n].fill(TOP);
    let mut new = old.clone();
    for _ in 0..iters {
        let (o, w) = (as_cells(&mut old), as_cells(&mut new));
        for r in 1..n - 1 {
            relax_row(
                &o[(r - 1) * n..r * n],
                &o[r * n..(r + 1) * n],
                &o[(r + 1) * n..(r + 2) * n],
                &w[r * n..(r + 1) * n],
            );
        }
        std::mem::swap(&mut old, &mut new);
    }
    old
}

/// The same computation by `t` threads in private memory: thread k owns rows `block(k, t, n)`
/// and keeps them with one halo row on each side; after each iteration it publishes its edge
/// rows, meets the others at a barrier and copies its neighbours' edge rows into its halos
/// (`row_grid::Halos`). Returns the final grid and the seconds of the iteration loop.
fn threaded(n: usize, iters: usize, t: usize) -> Result<(Vec<f64>, f64), String> {
    if n < t {
        return Err(format!("N={n} is smaller than the number of threads ({t})"));
    }
    let halos = Halos::new(n, t);
    let (blocks, time_s) = row_grid::on_threads(t, |k, barrier, start| {
        let rows = block(k, t, n);
        let lo = halos.local_rows(k).start;
        let mut old = vec![0.0f64; halos.local_rows(k).len() * n];
        if lo == 0 {
            old[..n].fill(TOP);
        }
        let mut new = old.clone();
        let inner = rows.start.max(1)..rows.end.min(n - 1);
        start();
        for it in 0..iters {
            let (o, w) = (as_cells(&mut old), as_cells(&mut new));
            for r in inner.clone() {
                let l = r - lo;
                relax_row(
                    &o[(l - 1) * n..l * n],
                    &o[l * n..(l + 1) * n],
                    &o[(l + 1) * n..(l + 2) * n],
                    &w[l * n..(l + 1) * n],
                );
            }
            halos.publish(k, it % 2, &new, 0.0);
            barrier.wait();
            halos.fetch(k, it % 2, &mut new);
            std::mem::swap(&mut old, &mut new);
        }
        halos.own(k, &old).to_vec()
    })?;
    Ok((blocks.concat(), time_s))
}

/// Row-major sum, the same order in both runs.
fn checksum(cells: &[f64]) -> f64 {
    cells.iter().sum()
}

enum Outcome {
    Passed,
    Failed,
    BadArgs,
}

fn run(args: &Args) -> Result<Outcome, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let nodes = svm::nodes();
    let n = args.n;
    if n < nodes {
        // Every node sees the same N and node count, so every node stops here.
        if me == 0 {
            eprintln!("jacobi: N={n} is smaller than the number of nodes ({nodes}): each node needs a row");
        }
        svm.finish()?;
        return Ok(Outcome::BadArgs);
    }

    let mut old = Grid::alloc(n, nodes)?;
    let mut new = Grid::alloc(n, nodes)?;
    if me == 0 {
        let top = vec![TOP; n];
        old.write_row(0, &top);
        new.write_row(0, &top);
    }
    let mine = block(me, nodes, n);
    // Each node fills its own rows of the grid it writes first, before the clock starts, as
    // each thread of the pthreads baseline does with its private copy (`new = old.clone()`
    // in `threaded`): both runs then time the same first touches — of the other grid's rows,
    // read as zeros in the first sweep and written in the second.
    let zeros = vec![0.0f64; n];
    for r in mine.clone().filter(|&r| r != 0) {
        new.write_row(r, &zeros);
    }

    svm::barrier()?;
    let t0 = Instant::now();
    for _ in 0..args.iters {
        step_shared(&old, &new, mine.clone());
        svm::barrier()?;
        std::mem::swap(&mut old, &mut new);
    }
    let time_s = t0.elapsed().as_secs_f64();

    let mut outcome = Outcome::Passed;
    if me == 0 {
        let mut grid = vec![0.0f64; n * n];
        for (r, row) in grid.chunks_mut(n).enumerate() {
            old.read_row(r, row);
        }
        let sum = checksum(&grid);
        let line = format!("checksum={sum:.16e} time_s={time_s:.6}");
        if args.verify {
            let reference = sequential(n, args.iters);
            let bad = grid
                .iter()
                .zip(&reference)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            match bad {
                None => println!("{line} OK"),
                Some(i) => {
                    println!("{line}");
                    let mismatches = grid
                        .iter()
                        .zip(&reference)
                        .filter(|(a, b)| a.to_bits() != b.to_bits())
                        .count();
                    eprintln!(
                        "jacobi: verification FAILED: {mismatches} of {} cells differ from the sequential run; first at row {} column {}: shared={:e} sequential={:e} (sequential checksum={:.16e})",
                        n * n,
                        i / n,
                        i % n,
                        grid[i],
                        reference[i],
                        checksum(&reference)
                    );
                    outcome = Outcome::Failed;
                }
            }
        } else {
            println!("{line}");
        }
    }
    svm.finish()?;
    Ok(outcome)
}

impl common::Outcome for Outcome {
    fn exit_code(self) -> ExitCode {
        match self {
            Outcome::Passed => ExitCode::SUCCESS,
            Outcome::Failed => ExitCode::FAILURE,
            Outcome::BadArgs => ExitCode::from(2),
        }
    }
}

fn main() -> ExitCode {
    common::main("jacobi", USAGE, parse_args(), |args| {
        if args.seq {
            let t0 = Instant::now();
            let grid = sequential(args.n, args.iters);
            let time_s = t0.elapsed().as_secs_f64();
            println!("checksum={:.16e} time_s={time_s:.6}", checksum(&grid));
            return Ok(Outcome::Passed);
        }
        if args.threads > 0 {
            let (grid, time_s) = threaded(args.n, args.iters, args.threads)?;
            let line = format!("checksum={:.16e} time_s={time_s:.6}", checksum(&grid));
            if args.verify {
                let reference = sequential(args.n, args.iters);
                if grid
                    .iter()
                    .zip(&reference)
                    .any(|(a, b)| a.to_bits() != b.to_bits())
                {
                    println!("{line}");
                    eprintln!("jacobi: verification FAILED: the threaded grid differs from the sequential one");
                    return Ok(Outcome::Failed);
                }
                println!("{line} OK");
            } else {
                println!("{line}");
            }
            return Ok(Outcome::Passed);
        }
        run(&args)
    })
}
