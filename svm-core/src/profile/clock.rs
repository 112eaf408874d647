//! Each node's clocks at its start ([`ClockStart`]), and how the merge puts the nodes' times
//! on one clock ([`align_starts`]).

use serde::{Deserialize, Serialize};

use crate::sys::segv::now_ns;

/// A node's CLOCK_REALTIME and CLOCK_MONOTONIC at one instant of its start, and which
/// monotonic clock it reads. The node records monotonic times; the merge places them by this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockStart {
    pub real0_ns: u64,
    pub mono0_ns: u64,
    /// See [`clock_domain`]; None where it cannot be read.
    #[serde(default)]
    pub clock_domain: Option<String>,
}

impl ClockStart {
    /// The calling process's clocks now: the two read as one instant (of a few tries, the
    /// monotonic read whose two realtime reads around it lie closest, with their midpoint). A
    /// thread preempted between two plain reads would carry the preemption into every time
    /// the merge places by the pair (a 22 µs skew between the two nodes of a SPLASH-2
    /// cholesky trace: messages received 19 µs before they were sent).
    pub fn now() -> ClockStart {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..8 {
            let r1 = realtime_ns();
            let m = now_ns();
            let r2 = realtime_ns();
            let gap = r2.saturating_sub(r1);
            if gap < best.0 {
                best = (gap, m, r1 + gap / 2);
            }
        }
        ClockStart {
            real0_ns: best.2,
            mono0_ns: best.1,
            clock_domain: clock_domain(),
        }
    }

    /// CLOCK_REALTIME (ns) of the monotonic time `mono` (not before the start).
    pub fn real(&self, mono: u64) -> u64 {
        self.real0_ns + mono.saturating_sub(self.mono0_ns)
    }

    /// realtime − monotonic at the start.
    fn offset(&self) -> i128 {
        self.real0_ns as i128 - self.mono0_ns as i128
    }
}

/// Nanoseconds of CLOCK_REALTIME.
fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Which CLOCK_MONOTONIC this process reads: the kernel's boot id
/// (`/proc/sys/kernel/random/boot_id`) and its time namespace (`/proc/self/ns/time`, which
/// may offset the monotonic clock; absent before Linux 5.6, where there are none). Nodes that
/// report the same domain read one monotonic clock — network namespaces, as in the
/// multi-host tests, share it. None where the boot id cannot be read.
fn clock_domain() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    if id.is_empty() {
        return None;
    }
    let time_ns = std::fs::read_link("/proc/self/ns/time")
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default();
    Some(format!("{id} {time_ns}"))
}

/// What to add (ns) to each node's CLOCK_REALTIME-based times (its `real0_ns` and what
/// [`ClockStart::real`] gave) so that all are on one clock. Nodes of one clock domain share
/// CLOCK_MONOTONIC, which no step or slew of CLOCK_REALTIME moves between their starts: their
/// times are placed by it, exactly, on the first node's realtime. Nodes of several hosts keep
/// their own realtime (as good as their NTP): no correction.
fn realtime_corrections(starts: &[&ClockStart]) -> Vec<i64> {
    let one_clock = starts.first().is_some_and(|first| {
        first.clock_domain.is_some() && starts.iter().all(|c| c.clock_domain == first.clock_domain)
    });
    if !one_clock {
        return vec![0; starts.len()];
    }
    let base = starts[0].offset();
    starts.iter().map(|c| (base - c.offset()) as i64).collect()
}

/// Puts the nodes' starts on one clock: moves each `real0_ns` by its
/// [`realtime_corrections`] and returns them, for the times each node derived from its start
/// ([`ClockStart::real`]), which move by the same.
pub fn align_starts(starts: &mut [&mut ClockStart]) -> Vec<i64> {
    let corrections = realtime_corrections(&starts.iter().map(|c| &**c).collect::<Vec<_>>());
    for (c, &by) in starts.iter_mut().zip(&corrections) {
        c.real0_ns = shifted(c.real0_ns, by);
    }
    corrections
}

/// `t` moved by `by` ns (saturating at 0).
pub fn shifted(t: u64, by: i64) -> u64 {
    (t as i128 + by as i128).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(mono0_ns: u64, real0_ns: u64, domain: Option<&str>) -> ClockStart {
        ClockStart {
            real0_ns,
            mono0_ns,
            clock_domain: domain.map(str::to_string),
        }
    }

    #[test]
    fn nodes_of_one_clock_domain_are_placed_by_their_monotonic_clock() {
        // Node 1's realtime read came 22 µs after its monotonic one (its thread preempted in
        // between), so its pair's offset is 22 µs off node 0's.
        let domain = Some("one-boot");
        let starts = [
            start(1_000_000, 5_000_000_000, domain),
            start(1_500_000, 5_000_522_000, domain),
        ];
        let by = realtime_corrections(&[&starts[0], &starts[1]]);
        assert_eq!(by, vec![0, -22_000]);
        // A frame sent by node 0 at monotonic 2,000,000 ns and read by node 1 3 µs later.
        let placed = |i: usize, mono: u64| shifted(starts[i].real(mono), by[i]);
        assert_eq!(placed(1, 2_003_000) - placed(0, 2_000_000), 3_000);
    }

    #[test]
    fn nodes_of_several_clock_domains_keep_their_realtime() {
        let (a, b) = (start(1, 10, Some("a")), start(2, 30, Some("b")));
        assert_eq!(realtime_corrections(&[&a, &b]), vec![0, 0]);
        let unknown = start(2, 30, None);
        assert_eq!(realtime_corrections(&[&a, &unknown]), vec![0, 0]);
        let none = start(1, 10, None);
        assert_eq!(realtime_corrections(&[&none, &unknown]), vec![0, 0]);
        assert!(realtime_corrections(&[]).is_empty());
    }

    #[test]
    fn a_clock_start_is_one_instant_of_both_clocks() {
        let first = ClockStart::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = ClockStart::now();
        // Both clocks advanced by the same time between the two starts (NTP slews both
        // alike); a pair of reads taken apart, or the two clocks swapped, would show here.
        let dm = second.mono0_ns as i128 - first.mono0_ns as i128;
        let dr = second.real0_ns as i128 - first.real0_ns as i128;
        assert!(dm >= 20_000_000, "monotonic advanced {dm} ns");
        assert!(
            (dr - dm).abs() < 2_000_000,
            "realtime {dr} ns, monotonic {dm} ns"
        );
        assert!(
            first.clock_domain.is_some(),
            "/proc/sys/kernel/random/boot_id is readable"
        );
        assert_eq!(
            first.clock_domain, second.clock_domain,
            "one process, one domain"
        );
    }
}
