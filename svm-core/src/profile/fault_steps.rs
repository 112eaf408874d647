//! Where the time of each remote fault went, from a merged trace (`otherData.remote_fault_steps_us`).
//!
//! A remote fault's slice (`read fault` / `write fault` with `remote: true`) spans from the
//! engine taking the fault to the thread's release. Within it, on the faulting node, the first
//! page request sent (`svm_comm::wire::PAGE_REQUEST_NAMES`: the request to the manager, or the
//! manager's own request forwarded to the owner) and the last grant read
//! (`PAGE_GRANT_NAMES`) mark the round trip;
//! the other ends of those two messages — their `delay_us`, which the merge set by matching
//! each receive with its send (`trace::merge_files`) — split it:
//!
//! 1. `to_request_sent`: the fault taken → its request queued;
//! 2. `request_on_its_way`: queued → read by the serving node's engine (the sender's step
//!    ending, the write, the receiver's wake-up: `delay_us` of that message);
//! 3. `serving_nodes`: read there → the grant queued (forwarding to the owner with three nodes
//!    or more, a minimum hold, the owner's own step);
//! 4. `grant_on_its_way`: queued → read back at the faulting node;
//! 5. `install_and_wake`: read → the fault's end (the page installed, the thread released).
//!
//! Faults served without a request of their own (a page already on its way, read ahead) have
//! no such pair and are left out of the steps; `matched` says how many were in.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

/// A message's link and sequence number: (sender, receiver, seq).
type Key = (u64, u64, u64);

#[derive(Clone, Copy, PartialEq, Debug)]
enum Class {
    Request,
    Grant,
}

/// The class of a trace message by its name: the names of the messages
/// `ProtoMsg::is_page_request` and `ProtoMsg::is_page_grant` pick (svm-comm keeps the lists in
/// step with those).
fn class_of(kind: &str) -> Option<Class> {
    if svm_comm::wire::PAGE_REQUEST_NAMES.contains(&kind) {
        Some(Class::Request)
    } else if svm_comm::wire::PAGE_GRANT_NAMES.contains(&kind) {
        Some(Class::Grant)
    } else {
        None
    }
}

/// A page request sent (`Class::Request`) or a grant read (`Class::Grant`), at the node that
/// faulted: the only messages kept there, so the class says which end it is.
struct Msg {
    ts: f64,
    class: Class,
    key: Key,
    /// A read message's way from its send (`delay_us`).
    delay: Option<f64>,
}

/// Collects, from the merged events, what the steps need.
#[derive(Default)]
pub(super) struct FaultSteps {
    /// Remote faults: (node, start, end).
    faults: Vec<(u64, f64, f64)>,
    /// Page requests sent and grants read, per node.
    msgs: HashMap<u64, Vec<Msg>>,
    /// The way of every page request that was read: from its send to its reading.
    request_delays: HashMap<Key, f64>,
}

/// The names of the steps, in order, then the whole: the keys of
/// `otherData.remote_fault_steps_us.steps` in a trace (docs/profiling.md), which `svm-bench
/// splash --trace` reads.
pub const REMOTE_FAULT_STEPS: [&str; 6] = [
    "to_request_sent",
    "request_on_its_way",
    "serving_nodes",
    "grant_on_its_way",
    "install_and_wake",
    "total",
];

impl FaultSteps {
    /// Notes one event (`ts` on the merged clock, receives with their `delay_us`).
    pub(super) fn note(&mut self, v: &Value) {
        let (Some(pid), Some(ts)) = (v["pid"].as_u64(), v["ts"].as_f64()) else {
            return;
        };
        if v["cat"] == "fault" {
            if v["args"]["remote"] == true {
                if let Some(d) = v["dur"].as_f64() {
                    self.faults.push((pid, ts, ts + d));
                }
            }
            return;
        }
        let Some((dir, kind)) = v["name"].as_str().and_then(|n| n.split_once(' ')) else {
            return;
        };
        let send = match dir {
            "send" => true,
            "recv" => false,
            _ => return,
        };
        let (Some(class), Some(key)) = (class_of(kind), super::trace::message_key(v)) else {
            return;
        };
        let delay = v["args"]["delay_us"].as_f64();
        match (send, class, delay) {
            (false, Class::Request, Some(d)) => {
                self.request_delays.insert(key, d);
            }
            (true, Class::Request, _) | (false, Class::Grant, Some(_)) => {
                self.msgs.entry(pid).or_default().push(Msg {
                    ts,
                    class,
                    key,
                    delay,
                });
            }
            _ => {}
        }
    }

    /// The faulting node and the durations (µs) of the steps of every remote fault that had
    /// its own round trip, in [`REMOTE_FAULT_STEPS`] order.
    fn matched(mut self) -> (usize, Vec<(u64, [f64; 6])>) {
        for m in self.msgs.values_mut() {
            m.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        }
        let mut out = Vec::new();
        for &(pid, t0, t5) in &self.faults {
            let Some(ms) = self.msgs.get(&pid) else {
                continue;
            };
            let from = ms.partition_point(|m| m.ts < t0);
            let to = ms.partition_point(|m| m.ts <= t5);
            let inside = &ms[from..to];
            let req = inside.iter().find(|m| m.class == Class::Request);
            let grant = inside.iter().rev().find(|m| m.class == Class::Grant);
            let (Some(req), Some(grant)) = (req, grant) else {
                continue;
            };
            let (t1, t4) = (req.ts, grant.ts);
            let (Some(&to_server), Some(back)) = (self.request_delays.get(&req.key), grant.delay)
            else {
                continue;
            };
            let (t2, t3) = (t1 + to_server, t4 - back);
            if t4 < t1 {
                continue;
            }
            out.push((pid, [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0]));
        }
        (self.faults.len(), out)
    }

    /// `otherData.remote_fault_steps_us`: the number of remote faults, how many had their own
    /// round trip, and per step the count, mean, median, 90th percentile and maximum — of the
    /// whole job (`steps`) and of each faulting node (`by_node`: the nodes of a job are not
    /// alike, e.g. sc-sw's minimum hold keeps pages from higher ranks only).
    pub(super) fn summary(self) -> Value {
        let (remote, steps) = self.matched();
        let per_step = |of: &dyn Fn(u64) -> bool| {
            let mine: Vec<&[f64; 6]> = steps.iter().filter(|s| of(s.0)).map(|s| &s.1).collect();
            let mut m = Map::new();
            if !mine.is_empty() {
                for (i, name) in REMOTE_FAULT_STEPS.iter().enumerate() {
                    let v: Vec<f64> = mine.iter().map(|s| s[i]).collect();
                    m.insert(name.to_string(), super::trace::delay_summary(v));
                }
            }
            Value::Object(m)
        };
        let nodes: std::collections::BTreeSet<u64> = steps.iter().map(|s| s.0).collect();
        let by_node: Map<String, Value> = nodes
            .into_iter()
            .map(|n| (n.to_string(), per_step(&|p| p == n)))
            .collect();
        json!({"remote_faults": remote, "matched": steps.len(), "steps": per_step(&|_| true),
               "by_node": by_node})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(pid: u64, ts: f64, dur: f64) -> Value {
        json!({"name": "read fault", "cat": "fault", "ph": "X", "pid": pid, "tid": 1,
               "ts": ts, "dur": dur, "args": {"remote": true}})
    }

    fn msg(pid: u64, dir: &str, kind: &str, peer: u64, seq: u64, ts: f64) -> Value {
        let side = if dir == "send" { "to" } else { "from" };
        json!({"name": format!("{dir} {kind}"), "cat": "message", "ph": "i", "pid": pid,
               "tid": 2, "ts": ts, "args": {side: peer, "seq": seq, "bytes": 30}})
    }

    /// The summary of `events`, each receive given its `delay_us` by the merge's own
    /// function (from its send's time, matched by link and sequence number).
    fn summary_of(mut events: Vec<Value>) -> Value {
        use super::super::trace::{add_delay, message_key};
        let sent: HashMap<Key, f64> = events
            .iter()
            .filter(|v| v["name"].as_str().is_some_and(|n| n.starts_with("send ")))
            .filter_map(|v| Some((message_key(v)?, v["ts"].as_f64()?)))
            .collect();
        let mut f = FaultSteps::default();
        for v in &mut events {
            add_delay(v, &sent);
            f.note(v);
        }
        f.summary()
    }

    /// The events of one remote fault of node `faulter` with a round trip of its own to node
    /// `server`: the fault starts at `t[0]`, its request is queued at `t[1]` and read at
    /// `t[2]`, the grant is queued at `t[3]` and read at `t[4]`, and the fault ends at `t[5]`.
    fn round_trip(
        faulter: u64,
        server: u64,
        request: &str,
        grant: &str,
        t: [f64; 6],
    ) -> Vec<Value> {
        vec![
            fault(faulter, t[0], t[5] - t[0]),
            msg(faulter, "send", request, server, 7, t[1]),
            msg(server, "recv", request, faulter, 7, t[2]),
            msg(server, "send", grant, faulter, 9, t[3]),
            msg(faulter, "recv", grant, server, 9, t[4]),
        ]
    }

    #[test]
    fn a_round_trip_splits_a_fault_into_its_steps() {
        // Node 1 faults at 100 and is released at 160: request queued at 103, read by node 0
        // at 115; node 0 queues the grant at 125 (after another node's grant at 120, which
        // does not count), node 1 reads it at 150.
        let mut events = round_trip(
            1,
            0,
            "read_req",
            "grant_exclusive",
            [100.0, 103.0, 115.0, 125.0, 150.0, 160.0],
        );
        events.extend([
            msg(0, "send", "grant", 2, 3, 120.0),
            // Not a page request or grant: ignored.
            msg(1, "send", "lock_acquire", 0, 8, 104.0),
            // A fault answered without a round trip of its own (read ahead): not matched.
            fault(1, 300.0, 5.0),
            // A local fault: not counted.
            json!({"name": "write fault", "cat": "fault", "ph": "X", "pid": 0, "tid": 1,
                   "ts": 10.0, "dur": 1.0, "args": {"remote": false}}),
        ]);
        let s = summary_of(events);
        assert_eq!(s["remote_faults"], 2, "{s}");
        assert_eq!(s["matched"], 1, "{s}");
        let want = [3.0, 12.0, 10.0, 25.0, 10.0, 60.0];
        for steps in [&s["steps"], &s["by_node"]["1"]] {
            for (name, w) in REMOTE_FAULT_STEPS.iter().zip(want) {
                let step = &steps[name];
                assert_eq!(step["count"], 1, "{name}: {s}");
                for k in ["mean", "p50", "p90", "max"] {
                    assert_eq!(step[k].as_f64(), Some(w), "{name}.{k}: {s}");
                }
            }
        }
        assert_eq!(s["by_node"].as_object().map(|m| m.len()), Some(1), "{s}");
    }

    #[test]
    fn the_manager_forwarding_its_own_fault_counts_as_a_request() {
        // Node 0 manages the page and forwards its own request to the owner, node 1.
        let s = summary_of(round_trip(
            0,
            1,
            "fwd_exclusive",
            "grant_exclusive",
            [0.0, 2.0, 10.0, 14.0, 30.0, 40.0],
        ));
        assert_eq!(s["matched"], 1, "{s}");
        assert_eq!(
            s["steps"]["serving_nodes"]["p50"].as_f64(),
            Some(4.0),
            "{s}"
        );
        assert_eq!(
            s["steps"]["install_and_wake"]["p50"].as_f64(),
            Some(10.0),
            "{s}"
        );
    }

    #[test]
    fn no_remote_faults_gives_no_steps() {
        let s = summary_of(Vec::new());
        assert_eq!(s["remote_faults"], 0);
        assert_eq!(s["matched"], 0);
        assert_eq!(s["steps"], json!({}));
        assert_eq!(s["by_node"], json!({}));
    }
}
