//! The Chrome trace-event file (`SVM_TRACE=FILE`): loads in Perfetto (ui.perfetto.dev) and
//! chrome://tracing.
//!
//! Each node keeps its events in memory (at most [`MAX_EVENTS`]; later ones are counted as
//! dropped) and writes them at finish to `FILE.node<RANK>.part`: a header line, then one
//! event per line with `ts` in µs since the node's start. Rank 0 merges the parts into FILE
//! (`{"traceEvents": [...]}`), shifting every node's events by the difference of the nodes'
//! CLOCK_REALTIME at start: one clock on one host, NTP's accuracy across hosts.
//!
//! Tracks: pid = rank (process name `node RANK`), tid = the Linux thread id of the thread
//! (named after the thread). Page faults go on the track of the thread that took them (both
//! fault backends report its thread id); a fault whose thread is unknown goes on the node's
//! `page faults` track, tid [`FAULT_TID`].

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::clock::{align_starts, ClockStart};

use super::record::NodePart;
use crate::{NodeId, PageId};

/// Most events a node keeps.
pub const MAX_EVENTS: usize = 2_000_000;
/// Thread id of the per-node page-fault track.
pub const FAULT_TID: u32 = 0x7fff_0000;

/// One recorded event (monotonic ns).
#[derive(Debug, Clone, Copy)]
pub enum Ev {
    Fault {
        page: PageId,
        write: bool,
        remote: bool,
        start: u64,
        dur: u64,
        /// The faulting thread (0 = unknown: the node's `page faults` track).
        tid: u32,
    },
    Lock {
        id: u64,
        start: u64,
        dur: u64,
    },
    Barrier {
        id: u64,
        start: u64,
        dur: u64,
    },
    Msg {
        kind: &'static str,
        peer: NodeId,
        bytes: u64,
        out: bool,
        /// The frame's sequence number on its link (per sender and receiver).
        seq: u32,
        at: u64,
    },
}

thread_local! {
    static TID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn tid() -> u32 {
    TID.with(|c| {
        if c.get() == 0 {
            c.set(nix::unistd::gettid().as_raw() as u32);
        }
        c.get()
    })
}

/// A node's events.
pub struct TraceBuf {
    mono0: u64,
    events: Vec<(u32, Ev)>,
    threads: BTreeMap<u32, String>,
    dropped: u64,
}

impl TraceBuf {
    pub fn new(mono0: u64) -> TraceBuf {
        TraceBuf {
            mono0,
            events: Vec::new(),
            threads: BTreeMap::new(),
            dropped: 0,
        }
    }

    pub fn push(&mut self, ev: Ev) {
        if self.events.len() >= MAX_EVENTS {
            self.dropped += 1;
            return;
        }
        let t = if let Ev::Fault { tid: ft, .. } = ev {
            if ft == 0 {
                FAULT_TID
            } else {
                // The engine records faults for the thread that took them: name its track
                // from the kernel's thread name (once per thread).
                self.threads.entry(ft).or_insert_with(|| {
                    std::fs::read_to_string(format!("/proc/self/task/{ft}/comm"))
                        .map(|s| s.trim_end().to_string())
                        .unwrap_or_else(|_| format!("thread {ft}"))
                });
                ft
            }
        } else {
            let t = tid();
            self.threads.entry(t).or_insert_with(|| {
                std::thread::current()
                    .name()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("thread {t}"))
            });
            t
        };
        self.events.push((t, ev));
    }

    fn us(&self, t: u64) -> f64 {
        t.saturating_sub(self.mono0) as f64 / 1e3
    }

    fn event_json(&self, pid: NodeId, tid: u32, ev: &Ev) -> Value {
        match *ev {
            Ev::Fault {
                page,
                write,
                remote,
                start,
                dur,
                ..
            } => json!({
                "name": if write { "write fault" } else { "read fault" },
                "cat": "fault", "ph": "X", "pid": pid, "tid": tid,
                "ts": self.us(start), "dur": dur as f64 / 1e3,
                "args": {"page": page, "access": if write { "write" } else { "read" },
                         "remote": remote, "service_us": dur as f64 / 1e3},
            }),
            Ev::Lock { id, start, dur } => json!({
                "name": "lock wait", "cat": "lock", "ph": "X", "pid": pid, "tid": tid,
                "ts": self.us(start), "dur": dur as f64 / 1e3, "args": {"lock": id},
            }),
            Ev::Barrier { id, start, dur } => json!({
                "name": "barrier wait", "cat": "barrier", "ph": "X", "pid": pid, "tid": tid,
                "ts": self.us(start), "dur": dur as f64 / 1e3,
                "args": {"barrier": barrier_name(id)},
            }),
            Ev::Msg {
                kind,
                peer,
                bytes,
                out,
                seq,
                at,
            } => {
                let (name, dir) = if out {
                    (format!("send {kind}"), "to")
                } else {
                    (format!("recv {kind}"), "from")
                };
                json!({
                    "name": name, "cat": "message", "ph": "i", "s": "t",
                    "pid": pid, "tid": tid, "ts": self.us(at),
                    "args": {dir: peer, "bytes": bytes, "seq": seq},
                })
            }
        }
    }
}

/// A barrier id as shown to users (`global` for the barrier of all nodes).
pub fn barrier_name(id: u64) -> String {
    if id == crate::node::GLOBAL_BARRIER {
        "global".into()
    } else {
        id.to_string()
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    rank: NodeId,
    /// The node's clocks at its start (`clock::align_starts` places its events).
    #[serde(flatten)]
    clock: ClockStart,
    dropped: u64,
}

/// Writes this node's trace part (`FILE.node<RANK>.part`).
pub fn write_part(
    file: &Path,
    me: NodeId,
    part: &NodePart,
    buf: &Option<TraceBuf>,
) -> Result<(), String> {
    let Some(buf) = buf else { return Ok(()) };
    let mut out: Vec<u8> = Vec::with_capacity(buf.events.len() * 160 + 4096);
    let head = Header {
        rank: me,
        clock: part.clock.clone(),
        dropped: buf.dropped,
    };
    let enc = |e: serde_json::Error| format!("encoding the trace: {e}");
    serde_json::to_writer(&mut out, &head).map_err(enc)?;
    out.push(b'\n');
    let mut meta = vec![
        json!({"name": "process_name", "ph": "M", "pid": me, "tid": 0, "ts": 0,
               "args": {"name": format!("node {me}")}}),
        json!({"name": "process_sort_index", "ph": "M", "pid": me, "tid": 0, "ts": 0,
               "args": {"sort_index": me}}),
        json!({"name": "thread_name", "ph": "M", "pid": me, "tid": FAULT_TID, "ts": 0,
               "args": {"name": "page faults"}}),
    ];
    for (t, name) in &buf.threads {
        meta.push(
            json!({"name": "thread_name", "ph": "M", "pid": me, "tid": t, "ts": 0,
                         "args": {"name": name}}),
        );
    }
    for v in meta {
        serde_json::to_writer(&mut out, &v).map_err(enc)?;
        out.push(b'\n');
    }
    for (t, ev) in &buf.events {
        serde_json::to_writer(&mut out, &buf.event_json(me, *t, ev)).map_err(enc)?;
        out.push(b'\n');
    }
    let path = super::part_path(file, me);
    super::write_atomic(&path, &out).map_err(|e| {
        format!(
            "cannot write {}: {e} (is the directory of the trace file writable?)",
            path.display()
        )
    })
}

/// The lines of a trace part after its header line.
fn part_lines(
    path: &Path,
) -> Result<(Header, std::io::Lines<std::io::BufReader<std::fs::File>>), String> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut lines = std::io::BufReader::new(f).lines();
    let head: Header = lines
        .next()
        .and_then(|l| l.ok())
        .and_then(|l| serde_json::from_str(&l).ok())
        .ok_or_else(|| format!("{} has no header line", path.display()))?;
    Ok((head, lines))
}

/// A message event's link and sequence number: (sender, receiver, seq).
pub(super) fn message_key(v: &Value) -> Option<(u64, u64, u64)> {
    let pid = v["pid"].as_u64()?;
    let seq = v["args"]["seq"].as_u64()?;
    match v["name"].as_str()? {
        n if n.starts_with("send ") => Some((pid, v["args"]["to"].as_u64()?, seq)),
        n if n.starts_with("recv ") => Some((v["args"]["from"].as_u64()?, pid, seq)),
        _ => None,
    }
}

/// A receive event `v` (its time on the merged clock) gets `delay_us`, the time since its
/// send's event in `sent` (by [`message_key`], merged clock); returns the message's kind and
/// that delay. Other events, and receives whose send is not there, are left as they are.
pub(super) fn add_delay(
    v: &mut Value,
    sent: &std::collections::HashMap<(u64, u64, u64), f64>,
) -> Option<(String, f64)> {
    let kind = v["name"].as_str()?.strip_prefix("recv ")?.to_string();
    let t0 = *sent.get(&message_key(v)?)?;
    // Across hosts the clocks differ by NTP's error: kept as it is.
    let d = v["ts"].as_f64()? - t0;
    v["args"]["delay_us"] = json!((d * 1000.0).round() / 1000.0);
    Some((kind, d))
}

/// Count, mean, median, 90th percentile and maximum of `v` (µs, not empty), for `otherData`.
pub(super) fn delay_summary(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    let r = |x: f64| (x * 10.0).round() / 10.0;
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    json!({"count": v.len(), "mean": r(mean), "p50": r(at(0.5)), "p90": r(at(0.9)),
           "max": r(at(1.0))})
}

/// Rank 0: waits for every node's part and merges them into `file`; removes the parts.
///
/// Every receive event gets `delay_us`: the time from its send's event (the frame queued at
/// the sender, matched by link and sequence number) to its own (the frame read and decoded at
/// the receiver), on the merged clock; `otherData.message_delay_us` sums them up per kind of
/// message. That is how long a message waited on its way: for the sender's step to end and
/// write it out, for the receiver's engine to be woken and to read it.
/// `otherData.remote_fault_steps_us` splits the remote faults into the steps of their round
/// trips (`fault_steps.rs`).
pub fn merge_files(file: &Path, nodes: NodeId, wait: Duration) -> Result<(), String> {
    let missing = super::wait_parts(file, nodes, wait);
    // Pass 1, with each part's header: when each frame was sent, on the part's clock.
    let mut parts = Vec::new();
    for r in (0..nodes).filter(|r| !missing.contains(r)) {
        let path = super::part_path(file, r);
        let (head, lines) = part_lines(&path)?;
        let mut sends = Vec::new();
        for l in lines {
            let l = l.map_err(|e| format!("reading {}: {e}", path.display()))?;
            if !l.contains("\"send ") {
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(&l) else {
                continue;
            };
            if let (Some(key), Some(ts)) = (message_key(&v), v["ts"].as_f64()) {
                sends.push((key, ts));
            }
        }
        parts.push((path, head, sends));
    }
    align_starts(&mut parts.iter_mut().map(|p| &mut p.1.clock).collect::<Vec<_>>());
    let origin = parts.iter().map(|p| p.1.clock.real0_ns).min().unwrap_or(0);
    let shift_of = |head: &Header| (head.clock.real0_ns - origin) as f64 / 1e3;
    // ... on the merged clock.
    let mut sent: std::collections::HashMap<(u64, u64, u64), f64> =
        std::collections::HashMap::new();
    for (_, head, sends) in &mut parts {
        let shift = shift_of(head);
        sent.extend(
            std::mem::take(sends)
                .into_iter()
                .map(|(k, ts)| (k, ts + shift)),
        );
    }
    let out = std::fs::File::create(file)
        .map_err(|e| format!("cannot create {}: {e}", file.display()))?;
    let mut w = std::io::BufWriter::new(out);
    let io = |e: std::io::Error| format!("writing {}: {e}", file.display());
    w.write_all(b"{\"traceEvents\":[\n").map_err(io)?;
    let mut first = true;
    let mut dropped = BTreeMap::new();
    let mut delays: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut fault_steps = super::fault_steps::FaultSteps::default();
    for (path, head, _) in parts {
        let shift = shift_of(&head);
        if head.dropped > 0 {
            dropped.insert(head.rank, head.dropped);
        }
        let (_, lines) = part_lines(&path)?;
        for l in lines {
            let l = l.map_err(|e| format!("reading {}: {e}", path.display()))?;
            let mut v: Value = serde_json::from_str(&l)
                .map_err(|e| format!("{}: bad event line: {e}", path.display()))?;
            if v["ph"] != "M" {
                if let Some(ts) = v["ts"].as_f64() {
                    v["ts"] = json!(ts + shift);
                }
            }
            if let Some((kind, d)) = add_delay(&mut v, &sent) {
                delays.entry(kind).or_default().push(d);
            }
            fault_steps.note(&v);
            if !first {
                w.write_all(b",\n").map_err(io)?;
            }
            first = false;
            serde_json::to_writer(&mut w, &v).map_err(|e| e.to_string())?;
        }
        let _ = std::fs::remove_file(&path);
    }
    let delays: BTreeMap<String, Value> = delays
        .into_iter()
        .map(|(k, v)| (k, delay_summary(v)))
        .collect();
    let other = json!({
        "clock": "CLOCK_REALTIME at each node's start; ts in µs from the first node's start",
        "nodes": nodes, "missing_nodes": missing, "dropped_events": dropped,
        "message_delay_us": delays,
        "remote_fault_steps_us": fault_steps.summary(),
    });
    write!(
        w,
        "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{}}}\n",
        other
    )
    .map_err(io)?;
    w.flush().map_err(io)?;
    if !missing.is_empty() {
        return Err(format!(
            "no trace part from nodes {missing:?} (they did not finish); written without them"
        ));
    }
    Ok(())
}
