//! `svm-bench deck`: ping-pong latency and streaming bandwidth of DECK-SCI (protocols 1, 2, 3
//! forced, and automatic), of µDECK mailboxes over DECK-SCI and over TCP, and of `memcpy` of the
//! same sizes — all in the same invocation.
//!
//! svm-bench is rank 0 and re-executes itself (`svm-bench deck-peer`, hidden) as rank 1. The two
//! go through four phases in lockstep, each with its own job key:
//!
//! - A: DECK-SCI links, default geometry: protocols 1/2/3 forced and auto, latency; protocol 3
//!   (zero-copy receive with `recv_view`), protocol 3 received by copying (`recv_msg`) and auto,
//!   bandwidth;
//! - B: DECK-SCI links with an eager buffer large enough for the largest message, so that
//!   protocol 2 can be forced over the whole bandwidth range;
//! - C: µDECK (`Deck::init_with`, mailboxes, post/retrieve) over DECK-SCI;
//! - D: µDECK over TCP loopback.
//!
//! Rank 0 drives: for every measurement it sends a 24-byte command (op, protocol, size, count)
//! and rank 1 serves it. Every echoed message is compared byte for byte with what was sent;
//! every streamed message carries a stamp (its number, every 4 KiB and at its end) that the
//! receiver checks, and the first and last message of every size are compared in full.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use svm_comm::bootstrap::{Bootstrap, Launcher};
use svm_comm::deck::sci::{self, DeckConfig, DeckLink, Protocol};
use svm_comm::deck::{Deck, Mbox, MboxId, Message, Transport};
use svm_comm::transport::Link;

use crate::report::{num, size_label, Plot, Scale, Series, Table};
use crate::util;

mod endpoints;
mod report;
use endpoints::*;
use report::write_report;

const ENV_KEY: &str = "SVM_BENCH_KEY";
const ENV_COORD: &str = "SVM_BENCH_COORD";
const ENV_WIDE: &str = "SVM_BENCH_WIDE";
const ENV_PARENT: &str = "SVM_BENCH_PARENT";
/// Bound of every single receive.
const RECV_TIMEOUT: Duration = Duration::from_secs(60);
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

const OP_PING: u8 = 1;
const OP_STREAM: u8 = 2;
const OP_END: u8 = 3;

/// What to run.
#[derive(Clone, Copy, PartialEq)]
pub enum Level {
    Full,
    Quick,
    Tiny,
}

pub struct Sizes {
    small: Vec<usize>,
    medium: Vec<usize>,
    bw: Vec<usize>,
    lat_iters: usize,
    lat_iters_slow: usize,
    bw_bytes: usize,
    bw_max_msgs: usize,
    /// Time budget of one bandwidth point (seconds, estimated from the warm-up).
    bw_secs: f64,
}

impl Sizes {
    fn new(level: Level) -> Sizes {
        let medium_full = vec![
            64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
        ];
        let bw_full: Vec<usize> = (10..=24).map(|e| 1usize << e).collect();
        match level {
            Level::Full => Sizes {
                small: (0..=62).collect(),
                medium: medium_full,
                bw: bw_full,
                lat_iters: 2000,
                lat_iters_slow: 600,
                bw_bytes: 256 << 20,
                bw_max_msgs: 50_000,
                bw_secs: 1.0,
            },
            Level::Quick => Sizes {
                small: (0..=62).collect(),
                medium: medium_full,
                bw: bw_full,
                lat_iters: 300,
                lat_iters_slow: 100,
                bw_bytes: 32 << 20,
                bw_max_msgs: 5_000,
                bw_secs: 0.25,
            },
            Level::Tiny => Sizes {
                small: vec![0, 1, 8, 31, 62],
                medium: vec![64, 1024, 8192],
                bw: vec![1 << 10, 64 << 10, 1 << 20],
                lat_iters: 20,
                lat_iters_slow: 10,
                bw_bytes: 2 << 20,
                bw_max_msgs: 200,
                bw_secs: 0.05,
            },
        }
    }

    fn max_bw(&self) -> usize {
        self.bw.iter().copied().max().unwrap_or(1 << 20)
    }
}

// ---------------------------------------------------------------------------------------------
// Rank 0: measurements

/// `iters` timed round trips (after a short warm-up) of `n`-byte messages; returns the one-way
/// times (RTT/2) in µs.
fn ping(
    ep: &dyn Ep,
    proto: u8,
    n: usize,
    iters: usize,
    verified: &mut u64,
) -> Result<Vec<f64>, String> {
    let warm = (iters / 10).clamp(2, 20);
    let total = warm + iters;
    ep.force(0);
    ep.send(&cmd(OP_PING, proto, n, total))?;
    ep.force(proto);
    let mut buf = vec![0u8; n];
    let mut times = Vec::with_capacity(iters);
    for i in 0..total {
        ping_fill(&mut buf, i);
        let mut back_len = None;
        let t0 = Instant::now();
        ep.send(&buf)?;
        ep.recv_with(&mut |back| {
            if back != &buf[..] {
                back_len = Some(back.len());
            }
        })?;
        let dt = t0.elapsed();
        if let Some(got) = back_len {
            return Err(format!(
                "echo of round {i} ({n} bytes, protocol {proto}) differs from what was sent ({got} bytes back)"
            ));
        }
        *verified += 1;
        if i >= warm {
            times.push(dt.as_secs_f64() * 1e6 / 2.0);
        }
    }
    ep.force(0);
    Ok(times)
}

/// Streams `count` messages of `n` bytes; the peer acknowledges after checking them all.
/// Returns MB/s (10^6 bytes per second).
fn stream(ep: &dyn Ep, proto: u8, n: usize, sz: &Sizes, verified: &mut u64) -> Result<f64, String> {
    // Warm-up (first touch of buffers and segments) that also estimates the time per message,
    // so that a slow configuration stays within the time budget of one point.
    let warm = 8usize;
    let t_warm = stream_once(ep, proto, n, warm, verified)?;
    let per_msg = t_warm / warm as f64;
    let by_time = (sz.bw_secs / per_msg.max(1e-9)) as usize;
    let count = (sz.bw_bytes / n.max(1))
        .min(by_time)
        .clamp(8, sz.bw_max_msgs);
    // The budget is split into RUNS timed runs and the median is kept, as for memcpy: on this
    // shared machine a burst of load from other processes then spoils one run, not the point.
    let per = count.div_ceil(RUNS).max(4);
    let mut mbs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let dt = stream_once(ep, proto, n, per, verified)?;
        mbs.push((n * per) as f64 / dt / 1e6);
    }
    Ok(util::median(&mbs))
}

/// Timed runs per bandwidth point (median kept).
const RUNS: usize = 5;

/// Sends `c` messages and waits for the receiver's acknowledgement; returns the seconds.
fn stream_once(
    ep: &dyn Ep,
    proto: u8,
    n: usize,
    c: usize,
    verified: &mut u64,
) -> Result<f64, String> {
    ep.force(0);
    ep.send(&cmd(OP_STREAM, proto, n, c))?;
    ep.force(proto);
    let mut buf = base_pattern(n);
    let t0 = Instant::now();
    for i in 0..c {
        stamp(&mut buf, i);
        ep.send(&buf)?;
    }
    ep.force(0);
    let mut ack = Vec::new();
    ep.recv(&mut ack)?;
    let dt = t0.elapsed().as_secs_f64();
    if ack.len() != 16 {
        return Err(format!("bad acknowledgement of {} bytes", ack.len()));
    }
    let good = u64::from_le_bytes(ack[0..8].try_into().unwrap_or_default());
    let bad = u64::from_le_bytes(ack[8..16].try_into().unwrap_or_default());
    if good != c as u64 || bad != 0 {
        return Err(format!(
            "the receiver verified {good} of {c} messages of {n} bytes ({bad} bad), protocol {proto}"
        ));
    }
    *verified += c as u64;
    Ok(dt)
}

fn end_phase(ep: &dyn Ep) -> Result<(), String> {
    ep.force(0);
    ep.send(&cmd(OP_END, 0, 0, 0))
}

// ---------------------------------------------------------------------------------------------
// Rank 1: the server

fn serve(ep: &dyn Ep) -> Result<(), String> {
    let mut c = Vec::new();
    loop {
        ep.force(0);
        ep.recv(&mut c)?;
        if c.len() != 24 {
            return Err(format!("bad command of {} bytes", c.len()));
        }
        let (op, proto) = (c[0], c[1]);
        let n = u64::from_le_bytes(c[8..16].try_into().unwrap_or_default()) as usize;
        let count = u64::from_le_bytes(c[16..24].try_into().unwrap_or_default()) as usize;
        match op {
            OP_PING => {
                ep.force(proto);
                for _ in 0..count {
                    // Echo straight from what was received (in place for zero-copy receives).
                    let mut sent = Ok(());
                    ep.recv_with(&mut |b| sent = ep.send(b))?;
                    sent?;
                }
            }
            OP_STREAM => {
                let mut expect = base_pattern(n);
                let (mut good, mut bad) = (0u64, 0u64);
                for i in 0..count {
                    let mut ok = false;
                    ep.recv_with(&mut |buf| {
                        ok = buf.len() == n && stamp_ok(buf, i);
                        if ok && (i == 0 || i + 1 == count) {
                            stamp(&mut expect, i);
                            ok = buf == &expect[..];
                        }
                    })?;
                    if ok {
                        good += 1;
                    } else {
                        bad += 1;
                    }
                }
                let mut ack = [0u8; 16];
                ack[..8].copy_from_slice(&good.to_le_bytes());
                ack[8..].copy_from_slice(&bad.to_le_bytes());
                ep.send(&ack)?;
            }
            OP_END => return Ok(()),
            other => return Err(format!("unknown command {other}")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Phases (both ranks)

fn boot(rank: u16, key: [u8; 32], coord: Option<String>, coord_fd: Option<i32>) -> Bootstrap {
    Bootstrap {
        rank,
        size: 2,
        launcher: Launcher::Single,
        coord,
        coord_fd,
        job_key: key,
        listen: Some("127.0.0.1".into()),
        advertise: None,
    }
}

fn phase_key(base: &[u8; 32], phase: u8) -> [u8; 32] {
    let mut k = *base;
    k[31] = phase;
    k
}

/// The default geometry, with `DECK_MSG_BUF_LIMIT` and `DECK_SPIN_US` from the environment (both
/// processes inherit the same environment).
fn base_config() -> Result<DeckConfig, String> {
    DeckConfig::from_env()
}

fn wide_config(max: usize) -> Result<DeckConfig, String> {
    let mut c = base_config()?;
    // Two messages of the largest size plus headers, a multiple of 4 KiB.
    c.eager_bytes = c.eager_bytes.max((2 * (max + 4096)).next_multiple_of(4096));
    Ok(c)
}

fn sci_link(rank: u16, key: [u8; 32], cfg: &DeckConfig) -> Result<SciEp, String> {
    let mut links = sci::establish(&boot(rank, key, None, None), cfg, SETUP_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let peer = 1 - rank as usize;
    links[peer]
        .take()
        .map(SciEp::new)
        .ok_or_else(|| "no link".to_string())
}

fn deck_ep(
    rank: u16,
    key: [u8; 32],
    t: Transport,
    coord: String,
    fd: Option<i32>,
) -> Result<DeckEp, String> {
    let deck = Deck::init_with(&boot(rank, key, Some(coord), fd), t, RECV_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let mine = deck
        .mbox_create_named(&format!("bench-{rank}"))
        .map_err(|e| e.to_string())?;
    let peer = deck
        .fetch_timeout(&format!("bench-{}", 1 - rank), SETUP_TIMEOUT)
        .map_err(|e| e.to_string())?;
    Ok(DeckEp { deck, mine, peer })
}

fn deck_finish(ep: DeckEp) -> Result<(), String> {
    let r = ep.deck.barrier().map_err(|e| e.to_string());
    let DeckEp { deck, mine, .. } = ep;
    drop(mine);
    deck.done();
    r
}

/// The peer process (`svm-bench deck-peer`): serves the four phases, then exits.
pub fn peer_main() -> Result<(), String> {
    let key_hex = std::env::var(ENV_KEY).map_err(|_| format!("{ENV_KEY} is not set"))?;
    let base = svm_comm::bootstrap::parse_key(&key_hex).map_err(|e| e.to_string())?;
    let coord = std::env::var(ENV_COORD).map_err(|_| format!("{ENV_COORD} is not set"))?;
    let wide: usize = std::env::var(ENV_WIDE)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{ENV_WIDE} is not set"))?;
    // Never outlive the driver.
    if let Some(ppid) = std::env::var(ENV_PARENT)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    {
        std::thread::spawn(move || loop {
            if nix::unistd::getppid().as_raw() != ppid {
                std::process::exit(3);
            }
            std::thread::sleep(Duration::from_millis(200));
        });
    }
    let a = sci_link(1, phase_key(&base, 1), &base_config()?)?;
    serve(&a)?;
    drop(a);
    let b = sci_link(1, phase_key(&base, 2), &wide_config(wide)?)?;
    serve(&b)?;
    drop(b);
    let c = deck_ep(1, phase_key(&base, 3), Transport::Sci, coord.clone(), None)?;
    serve(&c)?;
    deck_finish(c)?;
    let d = deck_ep(1, phase_key(&base, 4), Transport::Tcp, coord, None)?;
    serve(&d)?;
    deck_finish(d)?;
    Ok(())
}

/// Kills the peer on drop.
struct PeerGuard(Child);

impl Drop for PeerGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Results

/// One curve: (size, value); `None` = not measured.
struct Curve {
    name: &'static str,
    pts: Vec<(usize, Option<f64>)>,
}

impl Curve {
    fn new(name: &'static str) -> Curve {
        Curve {
            name,
            pts: Vec::new(),
        }
    }
    fn at(&self, n: usize) -> Option<f64> {
        self.pts.iter().find(|p| p.0 == n).and_then(|p| p.1)
    }
    fn series(&self, dashed: bool) -> Series {
        Series {
            name: self.name.to_string(),
            points: self
                .pts
                .iter()
                .filter_map(|&(n, v)| v.map(|v| (n as f64, v)))
                .collect(),
            dashed,
        }
    }
}

struct Results {
    small: Vec<Curve>,
    medium: Vec<Curve>,
    bw: Vec<Curve>,
    verified: u64,
    failures: Vec<String>,
}

const P1: &str = "DECK-SCI p1";
const P2: &str = "DECK-SCI p2";
const P3: &str = "DECK-SCI p3";
const P3_COPY: &str = "DECK-SCI p3 copy";
const AUTO: &str = "DECK-SCI auto";
const UD_SCI: &str = "µDECK/SCI";
const UD_TCP: &str = "µDECK/TCP";
const MEMCPY: &str = "memcpy";

fn curve<'a>(cs: &'a mut Vec<Curve>, name: &'static str) -> &'a mut Curve {
    if let Some(i) = cs.iter().position(|c| c.name == name) {
        return &mut cs[i];
    }
    cs.push(Curve::new(name));
    cs.last_mut().expect("just pushed")
}

fn progress_lat(name: &str, what: &str, c: &Curve, iters: usize) {
    let v: Vec<f64> = c.pts.iter().filter_map(|p| p.1).collect();
    let lo = v.iter().copied().fold(f64::MAX, f64::min);
    let hi = v.iter().copied().fold(0.0, f64::max);
    let how = if iters == 0 {
        "one copy, median of 20 batches".to_string()
    } else {
        format!("{iters} round trips each, every echo verified")
    };
    eprintln!(
        "deck: {name:<14} latency {what:<10} median one-way {}..{} µs ({} sizes, {how})",
        num(Some(lo)),
        num(Some(hi)),
        v.len()
    );
}

/// Latency over `sizes` for one configuration.
#[allow(clippy::too_many_arguments)]
fn lat_curve(
    res: &mut Results,
    which: fn(&mut Results) -> &mut Vec<Curve>,
    name: &'static str,
    what: &str,
    ep: &dyn Ep,
    proto: u8,
    sizes: &[usize],
    iters: usize,
) -> Result<(), String> {
    // Interleaved: `rounds` passes over all sizes, so that a burst of load from other processes
    // on this shared machine spreads over every size instead of spoiling a few neighbours.
    let rounds = if iters >= 1000 {
        10
    } else if iters >= 100 {
        4
    } else {
        1
    };
    let per = iters.div_ceil(rounds);
    let mut verified = 0;
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); sizes.len()];
    for _ in 0..rounds {
        for (k, &n) in sizes.iter().enumerate() {
            samples[k].extend(ping(ep, proto, n, per, &mut verified)?);
        }
    }
    let pts = sizes
        .iter()
        .zip(&samples)
        .map(|(&n, t)| (n, Some(util::median(t))))
        .collect();
    res.verified += verified;
    let c = curve(which(res), name);
    c.pts = pts;
    progress_lat(name, what, c, iters);
    Ok(())
}

fn bw_curve(
    res: &mut Results,
    name: &'static str,
    ep: &dyn Ep,
    proto: u8,
    sz: &Sizes,
) -> Result<(), String> {
    let mut verified = 0;
    let mut pts = Vec::new();
    for &n in &sz.bw {
        pts.push((n, Some(stream(ep, proto, n, sz, &mut verified)?)));
    }
    res.verified += verified;
    let c = curve(&mut res.bw, name);
    c.pts = pts;
    let v: Vec<String> = c
        .pts
        .iter()
        .filter(|p| [1 << 20, 4 << 20].contains(&p.0))
        .map(|p| format!("{}: {} MB/s", size_label(p.0), num(p.1)))
        .collect();
    eprintln!(
        "deck: {name:<14} bandwidth {}..{} {} (every message stamp-checked)",
        size_label(sz.bw[0]),
        size_label(sz.max_bw()),
        v.join(", ")
    );
    Ok(())
}

/// memcpy of `n` bytes: median seconds per copy over batches.
fn memcpy_secs(n: usize, budget_bytes: usize) -> Result<f64, String> {
    let src = base_pattern(n.max(1));
    let mut dst = vec![0u8; n.max(1)];
    let reps = (budget_bytes / n.max(64)).clamp(20, 200_000);
    let batch = (reps / 20).max(1);
    let mut times = Vec::new();
    dst.copy_from_slice(&src);
    for _ in 0..20 {
        let t0 = Instant::now();
        for _ in 0..batch {
            let s = std::hint::black_box(&src[..n]);
            dst[..n].copy_from_slice(s);
            std::hint::black_box(&mut dst);
        }
        times.push(t0.elapsed().as_secs_f64() / batch as f64);
    }
    if dst != src {
        return Err(format!("memcpy of {n} bytes produced different bytes"));
    }
    Ok(util::median(&times))
}

fn memcpy_curves(res: &mut Results, sz: &Sizes, level: Level) -> Result<(), String> {
    let budget = match level {
        Level::Full => 256 << 20,
        Level::Quick => 64 << 20,
        Level::Tiny => 4 << 20,
    };
    for (which, sizes) in [(0, &sz.small), (1, &sz.medium)] {
        let mut pts = Vec::new();
        for &n in sizes.iter() {
            pts.push((n, Some(memcpy_secs(n, budget.min(64 << 20))? * 1e6)));
        }
        let c = curve(
            if which == 0 {
                &mut res.small
            } else {
                &mut res.medium
            },
            MEMCPY,
        );
        c.pts = pts;
        progress_lat(
            MEMCPY,
            if which == 0 {
                "0–62 B"
            } else {
                "64 B–8 KiB"
            },
            c,
            0,
        );
    }
    let mut pts = Vec::new();
    for &n in &sz.bw {
        pts.push((n, Some(n as f64 / memcpy_secs(n, budget)? / 1e6)));
    }
    curve(&mut res.bw, MEMCPY).pts = pts;
    eprintln!(
        "deck: {MEMCPY:<14} bandwidth {}: {} MB/s",
        size_label(4 << 20),
        num(curve(&mut res.bw, MEMCPY).at(4 << 20))
    );
    Ok(())
}

fn run_phases(
    res: &mut Results,
    sz: &Sizes,
    base: &[u8; 32],
    listener: std::net::TcpListener,
) -> Result<(), String> {
    // Phase A: default geometry.
    let a = sci_link(0, phase_key(base, 1), &base_config()?)?;
    let small_p3: Vec<usize> = sz.small.clone();
    lat_curve(
        res,
        |r| &mut r.small,
        P1,
        "0–62 B",
        &a,
        1,
        &sz.small,
        sz.lat_iters,
    )?;
    lat_curve(
        res,
        |r| &mut r.small,
        P2,
        "0–62 B",
        &a,
        2,
        &sz.small,
        sz.lat_iters,
    )?;
    lat_curve(
        res,
        |r| &mut r.small,
        P3,
        "0–62 B",
        &a,
        3,
        &small_p3,
        sz.lat_iters,
    )?;
    lat_curve(
        res,
        |r| &mut r.small,
        AUTO,
        "0–62 B",
        &a,
        0,
        &sz.small,
        sz.lat_iters,
    )?;
    lat_curve(
        res,
        |r| &mut r.medium,
        P2,
        "64 B–8 KiB",
        &a,
        2,
        &sz.medium,
        sz.lat_iters,
    )?;
    lat_curve(
        res,
        |r| &mut r.medium,
        P3,
        "64 B–8 KiB",
        &a,
        3,
        &sz.medium,
        sz.lat_iters,
    )?;
    lat_curve(
        res,
        |r| &mut r.medium,
        AUTO,
        "64 B–8 KiB",
        &a,
        0,
        &sz.medium,
        sz.lat_iters,
    )?;
    bw_curve(res, P3, &a, 3, sz)?;
    bw_curve(res, P3_COPY, &a, P3_COPY_CODE, sz)?;
    bw_curve(res, AUTO, &a, 0, sz)?;
    end_phase(&a)?;
    drop(a);
    // Phase B: protocol 2 over the whole bandwidth range.
    let b = sci_link(0, phase_key(base, 2), &wide_config(sz.max_bw())?)?;
    bw_curve(res, P2, &b, 2, sz)?;
    end_phase(&b)?;
    drop(b);
    // Phase C: µDECK over DECK-SCI.
    let coord = listener
        .local_addr()
        .map_err(|e| e.to_string())?
        .to_string();
    let c = deck_ep(0, phase_key(base, 3), Transport::Sci, coord.clone(), None)?;
    lat_curve(
        res,
        |r| &mut r.small,
        UD_SCI,
        "0–62 B",
        &c,
        0,
        &sz.small,
        sz.lat_iters_slow,
    )?;
    lat_curve(
        res,
        |r| &mut r.medium,
        UD_SCI,
        "64 B–8 KiB",
        &c,
        0,
        &sz.medium,
        sz.lat_iters_slow,
    )?;
    bw_curve(res, UD_SCI, &c, 0, sz)?;
    end_phase(&c)?;
    deck_finish(c)?;
    // Phase D: µDECK over TCP; our listener becomes rank 0's rendezvous.
    let fd = std::os::fd::IntoRawFd::into_raw_fd(listener);
    let d = deck_ep(0, phase_key(base, 4), Transport::Tcp, coord, Some(fd))?;
    lat_curve(
        res,
        |r| &mut r.small,
        UD_TCP,
        "0–62 B",
        &d,
        0,
        &sz.small,
        sz.lat_iters_slow,
    )?;
    lat_curve(
        res,
        |r| &mut r.medium,
        UD_TCP,
        "64 B–8 KiB",
        &d,
        0,
        &sz.medium,
        sz.lat_iters_slow,
    )?;
    bw_curve(res, UD_TCP, &d, 0, sz)?;
    end_phase(&d)?;
    deck_finish(d)?;
    Ok(())
}

pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::Full => "full",
        Level::Quick => "quick",
        Level::Tiny => "tiny (test)",
    }
}

pub fn which(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// `svm-bench deck`. Returns Ok(true) when every measurement ran and verified.
pub fn run(level: Level, out: &Path) -> Result<bool, String> {
    let t0 = Instant::now();
    let sz = Sizes::new(level);
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let base = util::fresh_key(0);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let coord = listener
        .local_addr()
        .map_err(|e| e.to_string())?
        .to_string();
    let exe: PathBuf = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .arg("deck-peer")
        .env(ENV_KEY, util::hex(&base))
        .env(ENV_COORD, &coord)
        .env(ENV_WIDE, sz.max_bw().to_string())
        .env(ENV_PARENT, std::process::id().to_string())
        .env_remove("SVM_RANK")
        .env_remove("SVM_SIZE")
        .spawn()
        .map_err(|e| format!("cannot start the peer: {e}"))?;
    let mut guard = PeerGuard(child);
    let mut res = Results {
        small: Vec::new(),
        medium: Vec::new(),
        bw: Vec::new(),
        verified: 0,
        failures: Vec::new(),
    };
    eprintln!(
        "deck: peer started (pid {}); {} mode",
        guard.0.id(),
        level_name(level)
    );
    if let Err(e) = run_phases(&mut res, &sz, &base, listener) {
        eprintln!("deck: FAILED: {e}");
        res.failures.push(e);
    }
    // The peer ends by itself after the last phase.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match guard.0.try_wait() {
            Ok(Some(st)) if !st.success() && res.failures.is_empty() => {
                res.failures.push(format!("the peer exited with {st}"));
                break;
            }
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() > deadline => {
                res.failures
                    .push("the peer did not exit after the last phase".into());
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                res.failures.push(format!("waiting for the peer: {e}"));
                break;
            }
        }
    }
    drop(guard);
    if let Err(e) = memcpy_curves(&mut res, &sz, level) {
        res.failures.push(e);
    }
    let h = write_report(out, &res, &sz, level, t0.elapsed().as_secs_f64())?;
    println!(
        "deck: protocol 1 latency max/min over 0–62 B = {}",
        num(h.p1_ratio)
    );
    if let Some((at, p, m, pct)) = h.p3_pct {
        println!(
            "deck: protocol 3 bandwidth at {} = {} MB/s = {}% of memcpy ({} MB/s)",
            size_label(at),
            num(Some(p)),
            num(Some(pct)),
            num(Some(m))
        );
    }
    println!(
        "deck: {} messages verified, {} failures; report {}",
        res.verified,
        res.failures.len(),
        out.join("deck.md").display()
    );
    Ok(res.failures.is_empty())
}
