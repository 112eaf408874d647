//! `laplace [N] [TOL] [--seq]`: Laplace's equation on an N×N grid (default 600, as in the DECK
//! papers) by red-black Gauss-Seidel until the largest change of a sweep is below TOL (default
//! 1e-3). The top row is held at 1.0, the other boundary cells at 0.0, the interior starts at 0.
//!
//! One iteration = a red sweep (cells with `(row + col)` even) then a black sweep; a cell's new
//! value is the mean of its four neighbours, which all have the other colour, so the result does
//! not depend on the order in which rows are visited or on how they are split between nodes: the
//! distributed run is bit-identical to the sequential one, iteration count included.
//!
//! The interior rows are split in `nodes()` contiguous blocks, one per node; the grid is one
//! collective allocation per block, homed on the node that computes it (like `jacobi`). Per
//! iteration: red sweep, barrier, black sweep, each node writes its largest change into a shared
//! array, barrier, every node reads the array and decides whether to stop.
//!
//! Rank 0 prints `checksum=<sum of the final grid> iters=<iterations> time_s=<seconds of the
//! iteration loop>`. `--seq` runs the same in private memory without a job (the baseline).
//! `--threads T` runs it on T threads of this process in private memory, as a pthreads program
//! would: thread k owns the same row block as node k, keeps it with one halo row on each side,
//! publishes its edge rows after each sweep and meets the others at a `std::sync::Barrier` —
//! two barriers per iteration, like the nodes; same line, same checksum (the baseline of "N
//! nodes vs N threads").
//!
//! ```text
//! svmrun -n 2 target/release/examples/laplace 600 1e-3
//! target/release/examples/laplace 600 1e-3 --seq
//! target/release/examples/laplace 600 1e-3 --threads 2
//! ```

mod common;
mod row_grid;

use std::cell::Cell;
use std::process::ExitCode;
use std::time::Instant;

use row_grid::{block, Grid, Halos};

const USAGE: &str =
    "usage: laplace [N] [TOL] [--seq] [--threads T]    (N×N grid, default N=600 TOL=1e-3)";
/// Safety net: stop after this many iterations even if TOL is not reached (reported).
const MAX_ITERS: usize = 200_000;
const TOP: f64 = 1.0;

type BoxError = Box<dyn std::error::Error>;

struct Args {
    n: usize,
    tol: f64,
    seq: bool,
    /// 0: a DSM job (or `--seq`).
    threads: usize,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut pos = Vec::new();
    let mut seq = false;
    let mut threads = 0;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seq" => seq = true,
            "--threads" => {
                let v = it.next().ok_or("--threads needs a value")?;
                threads = v
                    .parse::<usize>()
                    .ok()
                    .filter(|&t| (1..=1024).contains(&t))
                    .ok_or_else(|| {
                        format!("--threads must be an integer in 1..=1024, got {v:?}")
                    })?;
            }
            "-h" | "--help" => return Ok(None),
            s if s.starts_with("--") => return Err(format!("unknown option {s:?}")),
            _ => pos.push(a),
        }
    }
    if pos.len() > 2 {
        return Err("expected at most 2 arguments (N TOL)".into());
    }
    let n = match pos.first() {
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|&n| (3..=20000).contains(&n))
            .ok_or_else(|| format!("N must be an integer in 3..=20000, got {s:?}"))?,
        None => 600,
    };
    let tol = match pos.get(1) {
        Some(s) => s
            .parse::<f64>()
            .ok()
            .filter(|t| *t > 0.0 && t.is_finite())
            .ok_or_else(|| format!("TOL must be a positive number, got {s:?}"))?,
        None => 1e-3,
    };
    if seq && threads > 0 {
        return Err("--seq and --threads exclude each other".into());
    }
    Ok(Some(Args {
        n,
        tol,
        seq,
        threads,
    }))
}

/// Updates the cells of colour `color` (0 red, 1 black) of interior row `r` in place; returns
/// the largest change. The distributed run calls it on the shared grid in place, the
/// sequential run on private memory.
fn relax_row(
    r: usize,
    color: usize,
    prev: &[Cell<f64>],
    cur: &[Cell<f64>],
    next: &[Cell<f64>],
) -> f64 {
    let n = cur.len();
    let (prev, next) = (&prev[..n], &next[..n]);
    let mut err = 0.0f64;
    let mut j = 1 + (r + 1 + color) % 2;
    while j < n - 1 {
        let v = 0.25 * (((prev[j].get() + next[j].get()) + cur[j - 1].get()) + cur[j + 1].get());
        err = err.max((v - cur[j].get()).abs());
        cur[j].set(v);
        j += 2;
    }
    err
}

fn initial_row(r: usize, n: usize) -> Vec<f64> {
    vec![if r == 0 { TOP } else { 0.0 }; n]
}

fn checksum(cells: &[f64]) -> f64 {
    cells.iter().sum()
}

fn sequential(a: &Args) {
    let n = a.n;
    let mut g: Vec<f64> = (0..n).flat_map(|r| initial_row(r, n)).collect();
    let t0 = Instant::now();
    let mut iters = 0;
    loop {
        let mut err = 0.0f64;
        for color in 0..2 {
            let cells = Cell::from_mut(&mut g[..]).as_slice_of_cells();
            for r in 1..n - 1 {
                let row = |r: usize| &cells[r * n..(r + 1) * n];
                err = err.max(relax_row(r, color, row(r - 1), row(r), row(r + 1)));
            }
        }
        iters += 1;
        if err < a.tol || iters >= MAX_ITERS {
            break;
        }
    }
    let time_s = t0.elapsed().as_secs_f64();
    println!(
        "checksum={:.16e} iters={iters} time_s={time_s:.6}",
        checksum(&g)
    );
}

/// The same iteration on `t` threads in private memory (see the module docs;
/// `row_grid::Halos`). Returns the final grid, the iterations and the seconds of the
/// iteration loop.
fn threaded(a: &Args, t: usize) -> Result<(Vec<f64>, usize, f64), String> {
    let n = a.n;
    if n < t {
        return Err(format!("N={n} is smaller than the number of threads ({t})"));
    }
    let halos = Halos::new(n, t);
    let (results, time_s) = row_grid::on_threads(t, |k, barrier, start| {
        let rows = block(k, t, n);
        let lo = halos.local_rows(k).start;
        let mut g: Vec<f64> = halos
            .local_rows(k)
            .flat_map(|r| initial_row(r, n))
            .collect();
        let inner = rows.start.max(1)..rows.end.min(n - 1);
        start();
        let (mut iters, mut sweep) = (0, 0usize);
        loop {
            let mut err = 0.0f64;
            for color in 0..2 {
                let cells = Cell::from_mut(&mut g[..]).as_slice_of_cells();
                for r in inner.clone() {
                    let row = |r: usize| &cells[(r - lo) * n..(r - lo + 1) * n];
                    err = err.max(relax_row(r, color, row(r - 1), row(r), row(r + 1)));
                }
                halos.publish(k, sweep % 2, &g, err);
                barrier.wait();
                halos.fetch(k, sweep % 2, &mut g);
                sweep += 1;
            }
            // Every thread's largest change of this iteration, published with its black
            // sweep's rows (the next sweep of that parity is two barriers away).
            let all = halos.max_err((sweep - 1) % 2);
            iters += 1;
            if all < a.tol || iters >= MAX_ITERS {
                break;
            }
        }
        (halos.own(k, &g).to_vec(), iters)
    })?;
    let iters = results.first().map_or(0, |r| r.1);
    let grid: Vec<f64> = results.into_iter().flat_map(|r| r.0).collect();
    Ok((grid, iters, time_s))
}

/// One colour over this node's interior rows, in place; returns the largest change.
fn sweep(g: &Grid, rows: &std::ops::Range<usize>, color: usize) -> f64 {
    let rows = rows.start.max(1)..rows.end.min(g.n() - 1);
    let mut err = 0.0f64;
    for r in rows {
        err = err.max(relax_row(r, color, g.row(r - 1), g.row(r), g.row(r + 1)));
    }
    err
}

fn distributed(a: &Args) -> Result<(), BoxError> {
    let svm = svm::init()?;
    let (me, nodes, n) = (svm::node_id(), svm::nodes(), a.n);
    if n < nodes {
        if me == 0 {
            eprintln!("laplace: N={n} is smaller than the number of nodes ({nodes})");
        }
        svm.finish()?;
        return Err("bad arguments".into());
    }
    let g = Grid::alloc(n, nodes)?;
    let errs = svm::alloc_collective::<f64>(nodes)?;
    let mine = block(me, nodes, n);
    for r in mine.clone() {
        g.write_row(r, &initial_row(r, n));
    }
    let mut all = vec![0.0f64; nodes];
    svm::barrier()?;
    let t0 = Instant::now();
    let mut iters = 0;
    loop {
        let e0 = sweep(&g, &mine, 0);
        svm::barrier()?;
        let e1 = sweep(&g, &mine, 1);
        errs.set(me, e0.max(e1));
        svm::barrier()?;
        errs.read_into(0, &mut all);
        let err = all.iter().fold(0.0f64, |m, &e| m.max(e));
        iters += 1;
        if err < a.tol || iters >= MAX_ITERS {
            break;
        }
    }
    let time_s = t0.elapsed().as_secs_f64();
    if me == 0 {
        let mut grid = vec![0.0f64; n * n];
        for (r, row) in grid.chunks_mut(n).enumerate() {
            g.read_row(r, row);
        }
        println!(
            "checksum={:.16e} iters={iters} time_s={time_s:.6}",
            checksum(&grid)
        );
    }
    svm.finish()?;
    Ok(())
}

fn main() -> ExitCode {
    common::main("laplace", USAGE, parse_args(), |a| {
        if a.seq {
            sequential(&a);
            return Ok(());
        }
        if a.threads > 0 {
            let (grid, iters, time_s) = threaded(&a, a.threads)?;
            println!(
                "checksum={:.16e} iters={iters} time_s={time_s:.6}",
                checksum(&grid)
            );
            return Ok(());
        }
        distributed(&a)
    })
}
