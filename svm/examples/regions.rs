//! `regions [ITERS] [NOTICE_ITERS]`: several coherence protocols in one run. Four collective
//! regions, each with its own protocol and home policy (`alloc_collective_in`):
//!
//! | region | protocol | homes |
//! |---|---|---|
//! | 0 | `sc-sw` | `Node(last node)` |
//! | 1 | `sc-mw` | `Block` |
//! | 2 | `scope` | `Cyclic` |
//! | 3 | `scope` | `Runs` (2 pages on the last node, then node 0) |
//!
//! Every region is [`REGION_PAGES`] pages long. Word 0 is a counter protected by the region's
//! own lock; the other words are data, node k owning the words `i` with `i % nodes == k` (so
//! every page is written by every node, and page 0 holds both the counter, written inside
//! critical sections, and data written between barriers). Each of [`PHASES`] phases: every node
//! increments every region's counter ITERS times (default 50) under that region's lock and
//! writes its data words of every region (`phase << 32 | i`); a barrier; every node checks every
//! data word of every region; a barrier. At the end every counter must be
//! `PHASES × nodes × ITERS`.
//!
//! Then a write-notice heavy loop in a `scope` region of [`NOTICE_PAGES`] pages
//! ([`NOTICE_LOCKS`] locks, page p guarded by lock `p % NOTICE_LOCKS`): NOTICE_ITERS (default
//! 2000) iterations per node of lock, increment the page's counter, unlock, with a global
//! barrier every [`BARRIER_EVERY`] iterations. Statistics are sampled at its start, halfway and
//! at its end; rank 0 prints
//!
//! ```text
//! notices iters=<n> total=<sum of the page counters> expected=<nodes × n> notices_sent=<all nodes>
//!     grants=<grants received, all nodes> grant_bytes_first=<mean bytes per grant, first half>
//!     grant_bytes_second=<same, second half> rss_growth_kib=<largest VmRSS growth of a node
//!     from halfway to the end>
//! ```
//!
//! (one line) and, if every check passed, `regions OK nodes=<n>`. A failed check is described
//! on stderr and the exit status is 1.
//!
//! ```text
//! svmrun -n 4 target/release/examples/regions
//! SVM_STATS=json svmrun -n 4 --protocol scope target/release/examples/regions 10 20000
//! ```

mod common;

use std::process::ExitCode;

use svm::{Home, Mutex, SharedSlice};

const USAGE: &str = "usage: regions [ITERS] [NOTICE_ITERS]    (one region per protocol; default ITERS=50 lock increments per phase, NOTICE_ITERS=2000 lock operations in the write-notice loop)";
const DEFAULT_ITERS: u64 = 50;
const DEFAULT_NOTICE_ITERS: u64 = 2000;
/// Pages of each of the four protocol regions.
const REGION_PAGES: usize = 4;
/// Barrier phases over the four regions.
const PHASES: u64 = 3;
/// Pages of the write-notice loop's region.
const NOTICE_PAGES: usize = 256;
/// Locks of the write-notice loop.
const NOTICE_LOCKS: usize = 4;
/// Iterations of the write-notice loop between two global barriers.
const BARRIER_EVERY: u64 = 8;
/// Lock ids: region r uses `REGION_LOCK + r`, the notice loop `NOTICE_LOCK + l`.
const REGION_LOCK: u64 = 10;
const NOTICE_LOCK: u64 = 100;
/// Words per node in the report array (rank 0 sums them up).
const REPORT_WORDS: usize = 8;

type BoxError = Box<dyn std::error::Error>;

struct Args {
    iters: u64,
    notice_iters: u64,
}

fn parse_args() -> Result<Option<Args>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    if args.len() > 2 {
        return Err(format!(
            "expected at most 2 arguments (ITERS NOTICE_ITERS), got {}",
            args.len()
        ));
    }
    let num = |i: usize, name: &str, default: u64| -> Result<u64, String> {
        match args.get(i) {
            Some(s) => s
                .parse::<u64>()
                .ok()
                .filter(|v| *v < 1 << 31)
                .ok_or_else(|| format!("{name} must be an integer in 0..2^31, got {s:?}")),
            None => Ok(default),
        }
    };
    Ok(Some(Args {
        iters: num(0, "ITERS", DEFAULT_ITERS)?,
        notice_iters: num(1, "NOTICE_ITERS", DEFAULT_NOTICE_ITERS)?,
    }))
}

/// The value node `i % nodes` writes into data word `i` in `phase`.
fn value(phase: u64, i: usize) -> u64 {
    (phase << 32) | i as u64
}

/// This process's resident set size in KiB (`VmRSS` of /proc/self/status).
fn rss_kib() -> Result<u64, BoxError> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS line in /proc/self/status".into())
}

/// Lock grants this node received so far: (count, bytes).
fn grants_received() -> (u64, u64) {
    let s = svm::stats();
    s.messages
        .get("lock_grant")
        .map(|m| (m.received, m.received_bytes))
        .unwrap_or((0, 0))
}

struct Region {
    name: &'static str,
    protocol: &'static str,
    data: SharedSlice<u64>,
    lock: Mutex,
}

/// Allocates the four protocol regions (collective: same order on every node).
fn alloc_regions(nodes: usize) -> Result<Vec<Region>, BoxError> {
    let last = u16::try_from(nodes - 1)?;
    let words = REGION_PAGES * svm::page_size() / std::mem::size_of::<u64>();
    let specs: [(&'static str, &'static str, Home); 4] = [
        ("node", "sc-sw", Home::Node(last)),
        ("block", "sc-mw", Home::Block),
        ("cyclic", "scope", Home::Cyclic),
        ("runs", "scope", Home::Runs(vec![(last, 2), (0, 1)])),
    ];
    let mut regions = Vec::new();
    for (r, (name, protocol, home)) in specs.into_iter().enumerate() {
        regions.push(Region {
            name,
            protocol,
            data: svm::alloc_collective_in::<u64>(words, home, protocol)?,
            lock: Mutex::new(REGION_LOCK + r as u64),
        });
    }
    Ok(regions)
}

/// The phases over the protocol regions; `Ok(true)` if this node saw every write.
fn protocol_phases(regions: &[Region], iters: u64) -> Result<bool, BoxError> {
    let (me, nodes) = (svm::node_id(), svm::nodes());
    let mut ok = true;
    for phase in 1..=PHASES {
        for _ in 0..iters {
            for reg in regions {
                let g = reg.lock.lock()?;
                reg.data.set(0, reg.data.get(0) + 1);
                g.unlock()?;
            }
        }
        for reg in regions {
            for i in (1..reg.data.len()).filter(|i| i % nodes == me) {
                reg.data.set(i, value(phase, i));
            }
        }
        svm::barrier()?;
        for reg in regions {
            let bad = (1..reg.data.len()).find(|&i| reg.data.get(i) != value(phase, i));
            if let Some(i) = bad {
                eprintln!(
                    "regions: rank {me}: phase {phase}: region {} ({}): word {i} (written by node {}) holds {:#x}, expected {:#x}",
                    reg.name,
                    reg.protocol,
                    i % nodes,
                    reg.data.get(i),
                    value(phase, i)
                );
                ok = false;
            }
        }
        svm::barrier()?;
    }
    let expected = PHASES * nodes as u64 * iters;
    for reg in regions {
        let g = reg.lock.lock()?;
        let c = reg.data.get(0);
        g.unlock()?;
        if c != expected {
            eprintln!(
                "regions: rank {me}: region {} ({}): counter is {c}, expected {PHASES} phases × {nodes} nodes × {iters} = {expected}",
                reg.name, reg.protocol
            );
            ok = false;
        }
    }
    Ok(ok)
}

/// What one node of the write-notice loop measured (its slot of the report array).
#[derive(Default)]
struct NoticeReport {
    notices_sent: u64,
    grants_first: u64,
    grant_bytes_first: u64,
    grants_second: u64,
    grant_bytes_second: u64,
    rss_growth_kib: i64,
}

/// The write-notice heavy loop: `iters` lock operations on this node.
fn notice_loop(counters: &SharedSlice<u64>, iters: u64) -> Result<NoticeReport, BoxError> {
    let me = svm::node_id();
    let words_per_page = svm::page_size() / std::mem::size_of::<u64>();
    let pages_per_lock = NOTICE_PAGES / NOTICE_LOCKS;
    // Touch every page once, so that the resident set holds the region before the first sample.
    for p in 0..NOTICE_PAGES {
        std::hint::black_box(counters.get(p * words_per_page));
    }
    svm::barrier()?;
    let notices0 = svm::stats().notices_sent;
    let g0 = grants_received();
    let mut g1 = g0;
    let mut rss1 = rss_kib()?;
    let half = iters / 2;
    for j in 0..iters {
        if j == half {
            g1 = grants_received();
            rss1 = rss_kib()?;
        }
        let l = (j as usize + me) % NOTICE_LOCKS;
        let p = l + NOTICE_LOCKS * ((j as usize / NOTICE_LOCKS + me) % pages_per_lock);
        let lock = Mutex::new(NOTICE_LOCK + l as u64);
        let g = lock.lock()?;
        let w = p * words_per_page;
        counters.set(w, counters.get(w) + 1);
        g.unlock()?;
        if (j + 1) % BARRIER_EVERY == 0 {
            svm::barrier()?;
        }
    }
    // Every node makes the same number of barrier calls: ITERS is the same everywhere.
    svm::barrier()?;
    let g2 = grants_received();
    let rss2 = rss_kib()?;
    Ok(NoticeReport {
        notices_sent: svm::stats().notices_sent - notices0,
        grants_first: g1.0 - g0.0,
        grant_bytes_first: g1.1 - g0.1,
        grants_second: g2.0 - g1.0,
        grant_bytes_second: g2.1 - g1.1,
        rss_growth_kib: rss2 as i64 - rss1 as i64,
    })
}

fn mean(bytes: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        bytes as f64 / count as f64
    }
}

/// Runs the job; `Ok(true)` if every check passed on this node (on rank 0: on every node).
fn run(args: &Args) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let nodes = svm::nodes();

    let regions = alloc_regions(nodes)?;
    let words_per_page = svm::page_size() / std::mem::size_of::<u64>();
    let counters =
        svm::alloc_collective_in::<u64>(NOTICE_PAGES * words_per_page, Home::Cyclic, "scope")?;
    // Per node: [ok, notices_sent, grants_first, grant_bytes_first, grants_second,
    // grant_bytes_second, rss_growth_kib (two's complement), unused]. Written between
    // barriers, so any protocol will do.
    let report = svm::alloc_collective_in::<u64>(nodes * REPORT_WORDS, Home::Node(0), "sc-sw")?;

    svm::barrier()?;
    let mut ok = protocol_phases(&regions, args.iters)?;

    let r = notice_loop(&counters, args.notice_iters)?;
    let total: u64 = (0..NOTICE_PAGES)
        .map(|p| counters.get(p * words_per_page))
        .sum();
    let expected = nodes as u64 * args.notice_iters;
    if total != expected {
        eprintln!(
            "regions: rank {me}: the notice loop's counters add up to {total}, expected {nodes} nodes × {} = {expected}",
            args.notice_iters
        );
        ok = false;
    }
    let slot = me * REPORT_WORDS;
    let fields = [
        u64::from(ok),
        r.notices_sent,
        r.grants_first,
        r.grant_bytes_first,
        r.grants_second,
        r.grant_bytes_second,
        r.rss_growth_kib as u64,
    ];
    for (k, v) in fields.into_iter().enumerate() {
        report.set(slot + k, v);
    }
    svm::barrier()?;

    if me == 0 {
        let sum = |k: usize| {
            (0..nodes)
                .map(|n| report.get(n * REPORT_WORDS + k))
                .sum::<u64>()
        };
        let failed: Vec<String> = (0..nodes)
            .filter(|n| report.get(n * REPORT_WORDS) == 0)
            .map(|n| n.to_string())
            .collect();
        let rss_growth = (0..nodes)
            .map(|n| report.get(n * REPORT_WORDS + 6) as i64)
            .max()
            .unwrap_or(0);
        println!(
            "notices iters={} total={total} expected={expected} notices_sent={} grants={} grant_bytes_first={:.1} grant_bytes_second={:.1} rss_growth_kib={rss_growth}",
            args.notice_iters,
            sum(1),
            sum(2) + sum(4),
            mean(sum(3), sum(2)),
            mean(sum(5), sum(4)),
        );
        if failed.is_empty() {
            println!("regions OK nodes={nodes}");
        } else {
            eprintln!("regions: checks failed on node(s) {}", failed.join(","));
            ok = false;
        }
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("regions", USAGE, parse_args(), |args| run(&args))
}
