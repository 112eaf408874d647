//! `--trace`: each svm run writes a Chrome trace, and the report splits its remote faults into
//! the steps of their round trips, from the trace's `otherData.remote_fault_steps_us`
//! (docs/profiling.md): where a program's page moves spend their time, next to how many it
//! makes.

use super::*;

/// The steps of the trace's summary, in the report's order (the total last): the keys the
/// trace merge writes; the report's column is the key with spaces.
use svm_core::profile::REMOTE_FAULT_STEPS as STEPS;

/// One run's remote faults: how many, how many had a round trip of their own, and per step
/// (in [`STEPS`] order) the median and the mean in µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct FaultSteps {
    pub(super) remote: u64,
    pub(super) matched: u64,
    pub(super) steps: [(f64, f64); 6],
}

/// The steps from a trace's `otherData` (None: no remote fault had a round trip of its own,
/// or an svmrun whose trace does not split them).
pub(super) fn fault_steps_of(other: &serde_json::Value) -> Option<FaultSteps> {
    let s = &other["remote_fault_steps_us"];
    let mut steps = [(0.0, 0.0); 6];
    for (i, key) in STEPS.iter().enumerate() {
        let st = &s["steps"][key];
        steps[i] = (st["p50"].as_f64()?, st["mean"].as_f64()?);
    }
    Some(FaultSteps {
        remote: s["remote_faults"].as_u64()?,
        matched: s["matched"].as_u64()?,
        steps,
    })
}

/// The steps of the trace file a run wrote. The merged trace ends with its `otherData`
/// object; only the file's end is read and only that object parsed (the events before it
/// can be tens of MB): the last 64 KiB, then twice as much until the object starts in it.
pub(super) fn trace_fault_steps(path: &Path) -> Option<FaultSteps> {
    use std::io::{Read, Seek, SeekFrom};
    const KEY: &str = "\"otherData\":";
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut window = 64 << 10;
    let text = loop {
        let from = len.saturating_sub(window);
        file.seek(SeekFrom::Start(from)).ok()?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).ok()?;
        // The window may start inside a UTF-8 sequence of an event before the object.
        let text = String::from_utf8_lossy(&tail).into_owned();
        if text.contains(KEY) || from == 0 {
            break text;
        }
        window *= 2;
    };
    let at = text.rfind(KEY)?;
    let rest = text[at + KEY.len()..].trim_end();
    let other: serde_json::Value = serde_json::from_str(rest.strip_suffix('}')?).ok()?;
    fault_steps_of(&other)
}

/// The report's section: per node count above 1, a table of the programs' fault steps.
pub(super) fn fault_steps_section(rows: &[Row], nodes: &[usize]) -> String {
    let mut md = String::from(
        "## Remote faults, step by step\n\n\
         From each svm run's trace (`traces/<program>-p<N>.json`, `otherData.remote_fault_steps_us`, \
         docs/profiling.md): the remote faults with a round trip of their own, split into the \
         request's queuing, its way to the serving node, the serving nodes' part, the grant's \
         way back and the install; median / mean in µs.\n\n",
    );
    for &p in nodes.iter().filter(|&&p| p > 1) {
        let mut t = Table::new(
            ["program", "matched / remote"]
                .into_iter()
                .map(String::from)
                .chain(STEPS.iter().map(|key| key.replace('_', " "))),
        );
        for r in rows.iter().filter(|r| r.p == p) {
            let mut cells = vec![r.prog.to_string()];
            match &r.steps {
                Some(s) => {
                    cells.push(format!("{} / {}", s.matched, s.remote));
                    cells.extend(
                        s.steps.iter().map(|&(p50, mean)| {
                            format!("{} / {}", num(Some(p50)), num(Some(mean)))
                        }),
                    );
                }
                None => cells.extend(std::iter::repeat_n("–".to_string(), 1 + STEPS.len())),
            }
            t.row(cells);
        }
        let _ = writeln!(md, "### p = {p}\n\n{}", t.render());
    }
    md
}
