//! The merged profile: every node's part combined into one report, the pages classified
//! (rules in `docs/profiling.md`, implemented by [`classify`]), written as Markdown (FILE) and
//! JSON (`FILE.json`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::clock::{align_starts, shifted};
use super::record::{NodePart, PagePart, Totals};
use super::sites::Site;
use super::trace::barrier_name;
use crate::stats::Histogram;
use crate::{NodeId, PageId};

/// Rows per "top" table.
const TOP: usize = 10;

/// How a page is shared (see `docs/profiling.md` for the rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    FalseSharing,
    TrueSharing,
    Migratory,
    ProducerConsumer,
    ReadMostly,
    Private,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::FalseSharing => "false sharing",
            Class::TrueSharing => "true sharing",
            Class::Migratory => "migratory",
            Class::ProducerConsumer => "producer-consumer",
            Class::ReadMostly => "read-mostly",
            Class::Private => "private",
        }
    }
}

/// What each node did to one page.
#[derive(Debug, Clone, Default)]
pub struct PageView {
    pub per_node: BTreeMap<NodeId, PagePart>,
}

fn overlaps(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 < b[j].1 && b[j].0 < a[i].1 {
            return true;
        }
        if a[i].1 <= b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// The classification rules, in order (first match wins); "writers" are the nodes that
/// changed bytes of the page, or if none did, the nodes that took write faults on it (they
/// stored only values the page already held):
/// 1. touched (faulted, fetched or written) by at most one node: private;
/// 2. no writer: read-mostly;
/// 3. two or more writers, each took at most one write fault: read-mostly (written once, e.g.
///    initialised, then at most read);
/// 4. two or more writers that changed bytes, no byte changed by two of them: false sharing;
/// 5. two or more writers otherwise: migratory if every writer took at least one
///    "migratory write" — a write fault on the page it held readable after a read fault of its
///    own (read, then write), or a write fault while one of its threads held a lock — and such
///    faults are at least half of the writers' write faults; otherwise true sharing;
/// 6. one writer: read-mostly if it took at most one write fault, or if all write faults are at
///    most a tenth of the other nodes' read faults; otherwise producer-consumer.
pub fn classify(v: &PageView) -> Class {
    let touched = v
        .per_node
        .values()
        .filter(|p| {
            p.read_faults + p.write_faults + p.fetches > 0
                || !p.written.is_empty()
                || p.diff_sent > 0
        })
        .count();
    if touched <= 1 {
        return Class::Private;
    }
    let changed: Vec<&PagePart> = v
        .per_node
        .values()
        .filter(|p| !p.written.is_empty())
        .collect();
    let writers: Vec<&PagePart> = if changed.is_empty() {
        v.per_node.values().filter(|p| p.write_faults > 0).collect()
    } else {
        changed.clone()
    };
    if writers.is_empty() {
        return Class::ReadMostly;
    }
    let wf: u64 = v.per_node.values().map(|p| p.write_faults).sum();
    if writers.len() >= 2 {
        if writers.iter().all(|p| p.write_faults <= 1) {
            return Class::ReadMostly;
        }
        if changed.len() >= 2 {
            let mut shared = false;
            for (i, a) in changed.iter().enumerate() {
                for b in &changed[i + 1..] {
                    shared |= overlaps(&a.written, &b.written);
                }
            }
            if !shared {
                return Class::FalseSharing;
            }
        }
        let wwf: u64 = writers.iter().map(|p| p.write_faults).sum();
        let mig = |p: &PagePart| p.upgrades + p.locked_writes;
        let m: u64 = writers.iter().map(|p| mig(p)).sum();
        if writers.iter().all(|p| mig(p) > 0) && m * 2 >= wwf {
            return Class::Migratory;
        }
        return Class::TrueSharing;
    }
    let w = writers[0];
    let rf_others: u64 = v
        .per_node
        .values()
        .filter(|p| !std::ptr::eq(*p, w))
        .map(|p| p.read_faults)
        .sum();
    if w.write_faults <= 1 || wf * 10 <= rf_others {
        Class::ReadMostly
    } else {
        Class::ProducerConsumer
    }
}

/// One page of the report.
#[derive(Debug, Clone, Serialize)]
pub struct PageRow {
    pub page: PageId,
    pub addr: String,
    pub home: NodeId,
    pub region: String,
    pub allocated_at: String,
    pub class: Class,
    pub read_faults: u64,
    pub write_faults: u64,
    pub remote_faults: u64,
    pub invalidations: u64,
    pub fetches: u64,
    pub diff_bytes: u64,
    pub fault_wait_us: f64,
    /// Nodes that changed bytes of the page, with the number of bytes each changed.
    pub writers: BTreeMap<NodeId, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LockRow {
    pub lock: u64,
    pub acquisitions: u64,
    pub transfers: u64,
    pub total_wait_us: f64,
    pub mean_wait_us: f64,
    pub p99_wait_us: f64,
    pub by_node: BTreeMap<NodeId, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BarrierRow {
    pub barrier: String,
    pub count: u64,
    pub mean_wait_us: f64,
    /// Mean over episodes of (last arrival − first arrival).
    pub mean_imbalance_us: f64,
    pub max_imbalance_us: f64,
    /// The node that arrived last most often, and how often.
    pub slowest_node: Option<NodeId>,
    pub slowest_node_last: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeRow {
    pub node: NodeId,
    #[serde(flatten)]
    pub totals: Totals,
}

/// The merged profile (also the schema of `FILE.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub nodes: NodeId,
    pub missing_nodes: Vec<NodeId>,
    pub protocol: String,
    pub fault_backend: String,
    pub page_size: usize,
    pub classes: BTreeMap<&'static str, (u64, u64)>,
    pub top_remote_faults: Vec<PageRow>,
    pub top_invalidations: Vec<PageRow>,
    pub top_fetches: Vec<PageRow>,
    pub top_diff_bytes: Vec<PageRow>,
    pub pages: Vec<PageRow>,
    pub locks: Vec<LockRow>,
    pub barriers: Vec<BarrierRow>,
    pub per_node: Vec<NodeRow>,
}

/// The allocations that meet the page at `addr`.
fn regions_of(sites: &[Site], addr: usize, ps: usize) -> Vec<&Site> {
    sites
        .iter()
        .filter(|s| s.addr < addr + ps && addr < s.addr + s.len)
        .collect()
}

fn kib(b: usize) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 1024 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// A lock over all nodes: acquisitions, wait ns, wait histogram, (grant time, node), and
/// acquisitions by node.
type LockAcc = (
    u64,
    u64,
    Histogram,
    Vec<(u64, NodeId)>,
    BTreeMap<NodeId, u64>,
);
/// A barrier's (arrival, departure) times on one node.
type Episodes = Vec<(u64, u64)>;

/// Merges the parts into a report.
pub fn merge(parts: &[NodePart], nodes: NodeId, missing: Vec<NodeId>) -> Report {
    let page_size = parts.first().map(|p| p.page_size).unwrap_or(4096);
    let mut sites: Vec<Site> = Vec::new();
    for p in parts {
        for s in &p.sites {
            if !sites.iter().any(|x| x.addr == s.addr && x.len == s.len) {
                sites.push(s.clone());
            }
        }
    }
    sites.sort_by_key(|s| s.addr);
    let mut views: BTreeMap<PageId, PageView> = BTreeMap::new();
    for p in parts {
        for pg in &p.pages {
            views
                .entry(pg.page)
                .or_default()
                .per_node
                .insert(p.rank, pg.clone());
        }
    }
    let mut rows: Vec<PageRow> = Vec::new();
    let mut classes: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    for (page, v) in &views {
        let any = v.per_node.values().next().expect("a view has a node");
        let class = classify(v);
        let sum = |f: fn(&PagePart) -> u64| v.per_node.values().map(f).sum::<u64>();
        let (region, allocated_at) = if *page >= crate::space::STATIC_PAGE_BASE {
            let syms: Vec<String> = v
                .per_node
                .values()
                .find(|p| !p.symbols.is_empty())
                .map(|p| p.symbols.clone())
                .unwrap_or_default();
            let at = if syms.is_empty() {
                "static data".to_string()
            } else {
                format!("static: {}", syms.join(", "))
            };
            ("static data of the program".to_string(), at)
        } else {
            let found = regions_of(&sites, any.addr, page_size);
            match found.first() {
                Some(s) => {
                    let mut at = s.site.clone();
                    if found.len() > 1 {
                        at.push_str(&format!(" (+{} more allocations)", found.len() - 1));
                    }
                    (
                        format!(
                            "{} {:#x}+{}",
                            if s.collective { "collective" } else { "local" },
                            s.addr,
                            kib(s.len)
                        ),
                        at,
                    )
                }
                None => ("window".to_string(), "unknown".to_string()),
            }
        };
        let row = PageRow {
            page: *page,
            addr: format!("{:#x}", any.addr),
            home: any.home,
            region,
            allocated_at,
            class,
            read_faults: sum(|p| p.read_faults),
            write_faults: sum(|p| p.write_faults),
            remote_faults: sum(|p| p.remote_faults),
            invalidations: sum(|p| p.invalidations),
            fetches: sum(|p| p.fetches),
            diff_bytes: sum(|p| p.diff_sent),
            fault_wait_us: sum(|p| p.fault_ns) as f64 / 1e3,
            writers: v
                .per_node
                .iter()
                .filter(|(_, p)| !p.written.is_empty())
                .map(|(n, p)| {
                    let b: u64 = p.written.iter().map(|r| (r.1 - r.0) as u64).sum();
                    (*n, b)
                })
                .collect(),
        };
        let c = classes.entry(class.name()).or_default();
        c.0 += 1;
        c.1 += row.remote_faults;
        rows.push(row);
    }
    let top = |key: fn(&PageRow) -> u64| {
        let mut v: Vec<PageRow> = rows.iter().filter(|r| key(r) > 0).cloned().collect();
        v.sort_by(|a, b| key(b).cmp(&key(a)).then(a.page.cmp(&b.page)));
        v.truncate(TOP);
        v
    };
    let top_remote_faults = top(|r| r.remote_faults);
    let top_invalidations = top(|r| r.invalidations);
    let top_fetches = top(|r| r.fetches);
    let top_diff_bytes = top(|r| r.diff_bytes);

    // Locks: grants of all nodes in time order; a transfer is a grant on another node than
    // the previous grant's.
    let mut locks: BTreeMap<u64, LockAcc> = BTreeMap::new();
    for p in parts {
        for l in &p.locks {
            let e = locks.entry(l.id).or_default();
            e.0 += l.acquisitions;
            e.1 += l.wait_ns;
            e.2.merge(&l.hist);
            e.3.extend(l.grants.iter().map(|t| (*t, p.rank)));
            e.4.insert(p.rank, l.acquisitions);
        }
    }
    let mut lock_rows: Vec<LockRow> = locks
        .into_iter()
        .map(|(id, (n, wait, h, mut grants, by_node))| {
            grants.sort_unstable();
            let transfers = grants.windows(2).filter(|w| w[0].1 != w[1].1).count() as u64;
            LockRow {
                lock: id,
                acquisitions: n,
                transfers,
                total_wait_us: wait as f64 / 1e3,
                mean_wait_us: if n == 0 {
                    0.0
                } else {
                    wait as f64 / 1e3 / n as f64
                },
                p99_wait_us: h.quantile_ns(0.99) as f64 / 1e3,
                by_node,
            }
        })
        .collect();
    lock_rows.sort_by(|a, b| b.total_wait_us.total_cmp(&a.total_wait_us));

    // Barriers: the k-th episode of a barrier on every node is one episode.
    let mut bars: BTreeMap<u64, BTreeMap<NodeId, &Episodes>> = BTreeMap::new();
    for p in parts {
        for b in &p.barriers {
            bars.entry(b.id).or_default().insert(p.rank, &b.episodes);
        }
    }
    let barrier_rows: Vec<BarrierRow> = bars
        .into_iter()
        .map(|(id, by)| {
            let count = by.values().map(|e| e.len()).max().unwrap_or(0) as u64;
            let waits: Vec<u64> = by
                .values()
                .flat_map(|e| e.iter().map(|(a, d)| d.saturating_sub(*a)))
                .collect();
            let mean_wait_us = if waits.is_empty() {
                0.0
            } else {
                waits.iter().sum::<u64>() as f64 / waits.len() as f64 / 1e3
            };
            let common = by.values().map(|e| e.len()).min().unwrap_or(0);
            let mut imb = Vec::new();
            let mut last: BTreeMap<NodeId, u64> = BTreeMap::new();
            if by.len() >= 2 {
                for k in 0..common {
                    let arr: Vec<(u64, NodeId)> = by.iter().map(|(n, e)| (e[k].0, *n)).collect();
                    let lo = arr.iter().map(|a| a.0).min().unwrap_or(0);
                    let (hi, who) = arr.iter().copied().max().unwrap_or((0, 0));
                    imb.push(hi - lo);
                    *last.entry(who).or_default() += 1;
                }
            }
            let slow = last
                .iter()
                .max_by_key(|(n, c)| (**c, std::cmp::Reverse(**n)));
            BarrierRow {
                barrier: barrier_name(id),
                count,
                mean_wait_us,
                mean_imbalance_us: if imb.is_empty() {
                    0.0
                } else {
                    imb.iter().sum::<u64>() as f64 / imb.len() as f64 / 1e3
                },
                max_imbalance_us: imb.iter().max().copied().unwrap_or(0) as f64 / 1e3,
                slowest_node: slow.map(|s| *s.0),
                slowest_node_last: slow.map(|s| *s.1).unwrap_or(0),
            }
        })
        .collect();
    let per_node = parts
        .iter()
        .map(|p| NodeRow {
            node: p.rank,
            totals: p.totals.clone(),
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.remote_faults + b.invalidations + b.fetches)
            .cmp(&(a.remote_faults + a.invalidations + a.fetches))
            .then(a.page.cmp(&b.page))
    });
    Report {
        nodes,
        missing_nodes: missing,
        protocol: parts
            .first()
            .map(|p| p.protocol.clone())
            .unwrap_or_default(),
        fault_backend: parts
            .first()
            .map(|p| p.fault_backend.clone())
            .unwrap_or_default(),
        page_size,
        classes,
        top_remote_faults,
        top_invalidations,
        top_fetches,
        top_diff_bytes,
        pages: rows,
        locks: lock_rows,
        barriers: barrier_rows,
        per_node,
    }
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

fn page_table(out: &mut String, title: &str, rows: &[PageRow]) {
    let _ = writeln!(out, "\n### {title}\n");
    if rows.is_empty() {
        out.push_str("(none)\n");
        return;
    }
    out.push_str("| page | address | home | region | allocated at | class | remote faults | invalidations | fetches | diff bytes | fault wait ms | writers (node: bytes) |\n");
    out.push_str("|---:|---|---:|---|---|---|---:|---:|---:|---:|---:|---|\n");
    for r in rows {
        let writers: Vec<String> = r.writers.iter().map(|(n, b)| format!("{n}: {b}")).collect();
        let page = if r.page >= crate::space::STATIC_PAGE_BASE {
            format!("s{}", r.page - crate::space::STATIC_PAGE_BASE)
        } else {
            r.page.to_string()
        };
        let _ = writeln!(
            out,
            "| {page} | {} | {} | {} | `{}` | {} | {} | {} | {} | {} | {:.1} | {} |",
            r.addr,
            r.home,
            r.region,
            r.allocated_at.replace('|', "\\|"),
            r.class.name(),
            r.remote_faults,
            r.invalidations,
            r.fetches,
            r.diff_bytes,
            r.fault_wait_us / 1e3,
            writers.join(", ")
        );
    }
}

/// The report as Markdown.
pub fn markdown(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# svm profile\n\n{} nodes, protocol {}, fault backend {}, page size {} B.",
        r.nodes, r.protocol, r.fault_backend, r.page_size
    );
    if !r.missing_nodes.is_empty() {
        let _ = writeln!(
            o,
            "\n**Incomplete**: no data from nodes {:?} (they did not finish).",
            r.missing_nodes
        );
    }
    o.push_str("\n## Per node\n\n| node | wall ms | page wait ms | lock wait ms | barrier wait ms | read faults | write faults | remote faults | pages fetched | pages served | invalidations | diff bytes sent | messages sent | lock acquisitions | barrier waits |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for n in &r.per_node {
        let t = &n.totals;
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            n.node,
            ms(t.wall_ns),
            ms(t.page_wait_ns),
            ms(t.lock_wait_ns),
            ms(t.barrier_wait_ns),
            t.read_faults,
            t.write_faults,
            t.remote_faults,
            t.pages_fetched,
            t.pages_served,
            t.invalidations,
            t.diff_bytes_sent,
            t.messages_sent,
            t.lock_acquisitions,
            t.barrier_waits
        );
    }
    o.push_str("\n## Pages\n\nSharing classes (rules in docs/profiling.md):\n\n| class | pages | remote faults |\n|---|---:|---:|\n");
    for (c, (n, rf)) in &r.classes {
        let _ = writeln!(o, "| {c} | {n} | {rf} |");
    }
    page_table(&mut o, "Top pages by remote faults", &r.top_remote_faults);
    page_table(&mut o, "Top pages by invalidations", &r.top_invalidations);
    page_table(&mut o, "Top pages by fetches", &r.top_fetches);
    page_table(&mut o, "Top pages by diff bytes", &r.top_diff_bytes);
    let _ = writeln!(
        o,
        "\n## Locks\n\n{} locks, {} acquisitions, {} transfers between nodes, {:.1} ms total wait.\n",
        r.locks.len(),
        r.locks.iter().map(|l| l.acquisitions).sum::<u64>(),
        r.locks.iter().map(|l| l.transfers).sum::<u64>(),
        r.locks.iter().fold(0.0, |a, l| a + l.total_wait_us) / 1e3
    );
    if !r.locks.is_empty() {
        o.push_str("Top locks by wait:\n\n| lock | acquisitions | transfers | total wait ms | mean wait us | p99 wait us | acquisitions by node |\n|---:|---:|---:|---:|---:|---:|---|\n");
        for l in r.locks.iter().take(TOP) {
            let by: Vec<String> = l.by_node.iter().map(|(n, c)| format!("{n}: {c}")).collect();
            let _ = writeln!(
                o,
                "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {} |",
                l.lock,
                l.acquisitions,
                l.transfers,
                l.total_wait_us / 1e3,
                l.mean_wait_us,
                l.p99_wait_us,
                by.join(", ")
            );
        }
    }
    o.push_str("\n## Barriers\n\n");
    if r.barriers.is_empty() {
        o.push_str("(none)\n");
    } else {
        o.push_str("| barrier | count | mean wait us | mean arrival imbalance us | max imbalance us | slowest node (last arrivals) |\n|---|---:|---:|---:|---:|---|\n");
        for b in &r.barriers {
            let slow = match b.slowest_node {
                Some(n) => format!("{n} ({} of {})", b.slowest_node_last, b.count),
                None => "-".into(),
            };
            let _ = writeln!(
                o,
                "| {} | {} | {:.1} | {:.1} | {:.1} | {} |",
                b.barrier, b.count, b.mean_wait_us, b.mean_imbalance_us, b.max_imbalance_us, slow
            );
        }
    }
    o
}

/// The JSON report's path: `FILE.json`.
pub fn json_path(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(".json");
    PathBuf::from(s)
}

/// Puts the parts' CLOCK_REALTIME-based times (lock grants, barrier episodes) on one clock
/// (`profile::clock::align_starts`): the order of two nodes' grants of a lock, which counts
/// its transfers, and a barrier's arrival imbalance compare times of different nodes.
pub fn align_clocks(parts: &mut [NodePart]) {
    let corrections = align_starts(&mut parts.iter_mut().map(|p| &mut p.clock).collect::<Vec<_>>());
    for (p, by) in parts.iter_mut().zip(corrections) {
        if by == 0 {
            continue;
        }
        for t in p.locks.iter_mut().flat_map(|l| l.grants.iter_mut()) {
            *t = shifted(*t, by);
        }
        for e in p.barriers.iter_mut().flat_map(|b| b.episodes.iter_mut()) {
            *e = (shifted(e.0, by), shifted(e.1, by));
        }
    }
}

/// Rank 0: waits for every node's part, merges them, writes FILE and FILE.json, removes the
/// parts. Returns the nodes whose part never came.
pub fn merge_files(file: &Path, nodes: NodeId, wait: Duration) -> Result<Vec<NodeId>, String> {
    let missing = super::wait_parts(file, nodes, wait);
    let mut parts = Vec::new();
    for r in (0..nodes).filter(|r| !missing.contains(r)) {
        let path = super::part_path(file, r);
        let bytes =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let p: NodePart = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not a profile part: {e}", path.display()))?;
        parts.push(p);
        let _ = std::fs::remove_file(&path);
    }
    align_clocks(&mut parts);
    let report = merge(&parts, nodes, missing.clone());
    let md = markdown(&report);
    super::write_atomic(file, md.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let js = serde_json::to_vec_pretty(&report).map_err(|e| e.to_string())?;
    let jp = json_path(file);
    super::write_atomic(&jp, &js).map_err(|e| format!("cannot write {}: {e}", jp.display()))?;
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::super::clock::ClockStart;
    use super::*;

    fn part(rf: u64, wf: u64, up: u64, written: Vec<(u32, u32)>) -> PagePart {
        PagePart {
            page: 1,
            addr: 0x1000,
            home: 0,
            read_faults: rf,
            write_faults: wf,
            upgrades: up,
            locked_writes: 0,
            remote_faults: rf + wf,
            fault_ns: 0,
            fetches: rf,
            invalidations: 0,
            diff_sent: 0,
            diff_applied: 0,
            written,
            symbols: vec![],
        }
    }

    fn view(ps: Vec<PagePart>) -> PageView {
        PageView {
            per_node: ps
                .into_iter()
                .enumerate()
                .map(|(i, p)| (i as NodeId, p))
                .collect(),
        }
    }

    #[test]
    fn classification_rules() {
        let v = view(vec![part(0, 5, 0, vec![(0, 8)])]);
        assert_eq!(classify(&v), Class::Private);
        let v = view(vec![part(3, 0, 0, vec![]), part(3, 0, 0, vec![])]);
        assert_eq!(classify(&v), Class::ReadMostly);
        let v = view(vec![
            part(0, 50, 0, vec![(0, 8), (16, 24)]),
            part(0, 50, 0, vec![(8, 16)]),
        ]);
        assert_eq!(classify(&v), Class::FalseSharing);
        let v = view(vec![
            part(0, 50, 0, vec![(0, 8)]),
            part(0, 50, 0, vec![(4, 16)]),
        ]);
        assert_eq!(classify(&v), Class::TrueSharing);
        let v = view(vec![
            part(50, 50, 50, vec![(0, 8)]),
            part(50, 50, 40, vec![(0, 8)]),
        ]);
        assert_eq!(classify(&v), Class::Migratory);
        let v = view(vec![part(0, 50, 0, vec![(0, 64)]), part(50, 0, 0, vec![])]);
        assert_eq!(classify(&v), Class::ProducerConsumer);
        let v = view(vec![part(0, 1, 0, vec![(0, 64)]), part(50, 0, 0, vec![])]);
        assert_eq!(classify(&v), Class::ReadMostly);
        // A writer that stores the values the page already holds still produces.
        let v = view(vec![part(0, 50, 0, vec![]), part(50, 0, 0, vec![])]);
        assert_eq!(classify(&v), Class::ProducerConsumer);
        // Written once by two nodes, then read.
        let v = view(vec![
            part(20, 1, 0, vec![(0, 8)]),
            part(20, 1, 0, vec![(8, 16)]),
        ]);
        assert_eq!(classify(&v), Class::ReadMostly);
    }

    /// A node's part with one lock granted at `grant_monos` (CLOCK_MONOTONIC ns) and clocks
    /// read `realtime_late` ns apart at its start.
    fn lock_part(rank: NodeId, grant_monos: &[u64], realtime_late: u64) -> NodePart {
        let clock = ClockStart {
            real0_ns: 9_000_000_000 + realtime_late,
            mono0_ns: 1_000_000,
            clock_domain: Some("one-boot".into()),
        };
        NodePart {
            rank,
            nodes: 2,
            page_size: 4096,
            protocol: "sc-sw".into(),
            fault_backend: "uffd".into(),
            totals: Totals::default(),
            pages: Vec::new(),
            locks: vec![super::super::record::LockPart {
                id: 7,
                acquisitions: grant_monos.len() as u64,
                wait_ns: 0,
                hist: Histogram::default(),
                grants: grant_monos.iter().map(|&m| clock.real(m)).collect(),
            }],
            barriers: Vec::new(),
            sites: Vec::new(),
            clock,
        }
    }

    #[test]
    fn a_lock_taken_in_turns_counts_its_transfers_whatever_the_start_clocks_read() {
        // The two nodes take the lock in turns, 1 µs apart; node 1 read its start clocks 22 µs
        // apart, which put all its grants after node 0's on the realtime clock.
        let mut parts = vec![
            lock_part(0, &[2_000_000, 2_002_000, 2_004_000], 0),
            lock_part(1, &[2_001_000, 2_003_000, 2_005_000], 22_000),
        ];
        assert_eq!(merge(&parts, 2, Vec::new()).locks[0].transfers, 1);
        align_clocks(&mut parts);
        assert_eq!(merge(&parts, 2, Vec::new()).locks[0].transfers, 5);
        // Parts of two clock domains (hosts) keep their clocks.
        let mut apart = vec![
            lock_part(0, &[2_000_000], 0),
            lock_part(1, &[2_001_000], 22_000),
        ];
        apart[1].clock.clock_domain = Some("another-boot".into());
        let before = apart[1].locks[0].grants.clone();
        align_clocks(&mut apart);
        assert_eq!(apart[1].locks[0].grants, before);
    }
}
