//! `mandelbrot [--mode seq|dsm|deck] [--size W] [--max-iter M] [--slices S]`: the Mandelbrot set
//! on a W×W picture (default 600, as in the DECK papers) of the square [-2, 1] × [-1.5, 1.5], with
//! at most M iterations per pixel (default 1000). The picture is cut into S horizontal slices
//! (default 64; slice k holds rows `k*W/S .. (k+1)*W/S`) handed out dynamically, master/slave:
//!
//! - `--mode seq`: one process, no job; every slice in order (the baseline).
//! - `--mode dsm` (default): over shared memory. The next slice number is a shared counter taken
//!   under an `svm::Mutex`; every node computes the slices it takes and writes the rows into a
//!   shared image (`u32` iteration counts, homed on node 0). A barrier ends the run.
//! - `--mode deck`: over µDECK messages. Node 0 runs the master in a thread of its own: it owns the
//!   image, answers every request with the next slice number (or -1: stop) and receives the
//!   results; every node (node 0 too) runs one slave that posts "give me work + my last result"
//!   to the master's mailbox (`master`, found through the name server) and waits in its own
//!   mailbox. The transport is `SVM_TRANSPORT` (svmrun `--transport`; default DECK-SCI).
//!
//! Rank 0 prints `checksum=<FNV-1a 64 of the image, hex> sum=<total iterations> slices=S
//! time_s=<seconds>`, where the time runs from a barrier before the first slice to the end of the
//! last one. The image is the same in every mode, bit for bit (iteration counts are integers).
//!
//! ```text
//! target/release/examples/mandelbrot --mode seq --slices 64
//! svmrun -n 2 target/release/examples/mandelbrot --mode dsm --slices 64
//! svmrun -n 2 target/release/examples/mandelbrot --mode deck --slices 64
//! ```

mod common;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use svm_comm::deck::{Deck, Message};

const USAGE: &str =
    "usage: mandelbrot [--mode seq|dsm|deck] [--size W] [--max-iter M] [--slices S]";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Seq,
    Dsm,
    Deck,
}

#[derive(Clone, Copy)]
struct Args {
    mode: Mode,
    w: usize,
    max_iter: u32,
    slices: usize,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut a = Args {
        mode: Mode::Dsm,
        w: 600,
        max_iter: 1000,
        slices: 64,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "-h" || k == "--help" {
            return Ok(None);
        }
        let mut val = || it.next().ok_or_else(|| format!("{k} needs a value"));
        let num = |v: String| {
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{k} needs a positive integer, got {v:?}"))
        };
        match k.as_str() {
            "--mode" => {
                a.mode = match val()?.as_str() {
                    "seq" => Mode::Seq,
                    "dsm" => Mode::Dsm,
                    "deck" => Mode::Deck,
                    m => return Err(format!("unknown mode {m:?} (seq, dsm or deck)")),
                }
            }
            "--size" => a.w = num(val()?)?,
            "--max-iter" => {
                a.max_iter = u32::try_from(num(val()?)?).map_err(|_| "--max-iter is too large")?
            }
            "--slices" => a.slices = num(val()?)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.slices > a.w {
        return Err(format!(
            "--slices {} is more than the {} rows of the picture",
            a.slices, a.w
        ));
    }
    if a.w > 16384 {
        return Err(format!("--size {} is too large (at most 16384)", a.w));
    }
    Ok(Some(a))
}

/// Rows of slice `k`.
fn slice_rows(a: &Args, k: usize) -> std::ops::Range<usize> {
    k * a.w / a.slices..(k + 1) * a.w / a.slices
}

/// Iteration counts of the rows `rows`, row-major, into `out`.
fn compute(a: &Args, rows: std::ops::Range<usize>, out: &mut Vec<u32>) {
    out.clear();
    let scale = 3.0 / a.w as f64;
    for y in rows {
        let ci = -1.5 + y as f64 * scale;
        for x in 0..a.w {
            let cr = -2.0 + x as f64 * scale;
            let (mut zr, mut zi, mut n) = (0.0f64, 0.0f64, 0u32);
            while n < a.max_iter {
                let (zr2, zi2) = (zr * zr, zi * zi);
                if zr2 + zi2 > 4.0 {
                    break;
                }
                zi = 2.0 * zr * zi + ci;
                zr = zr2 - zi2 + cr;
                n += 1;
            }
            out.push(n);
        }
    }
}

fn report(image: &[u32], a: &Args, time_s: f64) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in image {
        for b in v.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    let sum: u64 = image.iter().map(|&v| v as u64).sum();
    println!(
        "checksum={h:016x} sum={sum} slices={} time_s={time_s:.6}",
        a.slices
    );
}

fn run_seq(a: &Args) {
    let t0 = Instant::now();
    let mut image = Vec::with_capacity(a.w * a.w);
    let mut buf = Vec::new();
    for k in 0..a.slices {
        compute(a, slice_rows(a, k), &mut buf);
        image.extend_from_slice(&buf);
    }
    report(&image, a, t0.elapsed().as_secs_f64());
}

fn run_dsm(a: &Args) -> Result<(), BoxError> {
    let svm = svm::init()?;
    let image = svm::alloc_collective::<u32>(a.w * a.w)?;
    let counter = svm::alloc_collective::<u64>(1)?;
    let lock = svm::Mutex::new(1);
    let mut buf = Vec::new();
    svm::barrier()?;
    let t0 = Instant::now();
    loop {
        let k = {
            let _g = lock.lock()?;
            let k = counter.get(0);
            counter.set(0, k + 1);
            k as usize
        };
        if k >= a.slices {
            break;
        }
        let rows = slice_rows(a, k);
        let start = rows.start * a.w;
        compute(a, rows, &mut buf);
        image.write_from(start, &buf);
    }
    svm::barrier()?;
    let time_s = t0.elapsed().as_secs_f64();
    if svm::node_id() == 0 {
        let mut all = vec![0u32; a.w * a.w];
        image.read_into(0, &mut all);
        report(&all, a, time_s);
    }
    svm.finish()?;
    Ok(())
}

fn deck_timeout() -> Duration {
    std::env::var("SVM_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .map_or(Duration::from_secs(60), Duration::from_secs_f64)
}

/// The master: answers `nodes` slaves until every slice is computed and every slave stopped.
/// Requests: (reply mailbox, slice number of the result or -1, result bytes if any).
fn master(
    deck: Arc<Deck>,
    a: Args,
    ready: std::sync::mpsc::Sender<()>,
) -> Result<Vec<u32>, BoxError> {
    let inbox = deck.mbox_create_named("master")?;
    let _ = ready.send(());
    let mut image = vec![0u32; a.w * a.w];
    let (mut next, mut done, mut stopped) = (0usize, 0usize, 0usize);
    let slaves = deck.nodes() as usize;
    let timeout = deck_timeout();
    while stopped < slaves {
        let mut req = inbox
            .retrieve_timeout(timeout)
            .ok_or("master: no request from any slave within SVM_TIMEOUT")?;
        let reply_to = req.unpack::<svm_comm::deck::MboxId>()?;
        let k = req.unpack::<i64>()?;
        if k >= 0 {
            let rows = slice_rows(&a, k as usize);
            let bytes = req.unpack_bytes()?;
            let dst = &mut image[rows.start * a.w..rows.end * a.w];
            if bytes.len() != dst.len() * 4 {
                return Err(
                    format!("master: slice {k} came back with {} bytes", bytes.len()).into(),
                );
            }
            for (d, c) in dst.iter_mut().zip(bytes.chunks_exact(4)) {
                *d = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            done += 1;
        }
        let mut ans = Message::new(16);
        if next < a.slices {
            ans.pack(&(next as i64))?;
            next += 1;
        } else {
            ans.pack(&-1i64)?;
            stopped += 1;
        }
        deck.post(reply_to, &ans)?;
    }
    if done != a.slices {
        return Err(format!("master: {done} of {} slices came back", a.slices).into());
    }
    Ok(image)
}

fn slave(deck: &Arc<Deck>, a: &Args) -> Result<(), BoxError> {
    let timeout = deck_timeout();
    let master = deck.fetch_timeout("master", timeout)?;
    let mine = deck.mbox_create();
    let mut buf = Vec::new();
    let mut last: i64 = -1;
    let max_rows = a.w.div_ceil(a.slices) + 1;
    loop {
        let mut req = Message::new(64 + max_rows * a.w * 4);
        req.pack(&mine.id())?;
        req.pack(&last)?;
        if last >= 0 {
            let bytes: Vec<u8> = buf.iter().flat_map(|v: &u32| v.to_le_bytes()).collect();
            req.pack_bytes(&bytes)?;
        }
        deck.post(master, &req)?;
        let mut ans = mine
            .retrieve_timeout(timeout)
            .ok_or("slave: no answer from the master within SVM_TIMEOUT")?;
        let k = ans.unpack::<i64>()?;
        if k < 0 {
            return Ok(());
        }
        compute(a, slice_rows(a, k as usize), &mut buf);
        last = k;
    }
}

fn run_deck(a: &Args) -> Result<(), BoxError> {
    let deck = Deck::init(None)?;
    deck.barrier()?;
    let t0 = Instant::now();
    let mut image = None;
    if deck.node() == 0 {
        let (tx, rx) = std::sync::mpsc::channel();
        let (d, args) = (deck.clone(), *a);
        let m = std::thread::Builder::new()
            .name("master".into())
            .spawn(move || master(d, args, tx).map_err(|e| e.to_string()))?;
        // Bind "master" before our own slave fetches it (fetch would wait anyway).
        let _ = rx.recv();
        let s = slave(&deck, a);
        let img = m.join().map_err(|_| "the master thread panicked")?;
        s?;
        image = Some(img?);
    } else {
        slave(&deck, a)?;
    }
    let time_s = t0.elapsed().as_secs_f64();
    deck.barrier()?;
    let errors = deck.errors();
    deck.done();
    if !errors.is_empty() {
        return Err(format!("DECK reported: {}", errors.join("; ")).into());
    }
    if let Some(img) = image {
        report(&img, a, time_s);
    }
    Ok(())
}

fn main() -> ExitCode {
    common::main("mandelbrot", USAGE, parse_args(), |a| match a.mode {
        Mode::Seq => {
            run_seq(&a);
            Ok(())
        }
        Mode::Dsm => run_dsm(&a),
        Mode::Deck => run_deck(&a),
    })
}
