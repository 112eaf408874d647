//! Where the nodes of a job run on their host's CPUs: `svmrun` gives each node it starts CPUs
//! of its own (`svmrun --bind`, default `cpus`) and passes them as `SVM_CPUS`; the runtime
//! binds the node's threads to them before it starts its engine.
//!
//! Why: a node is an application thread and an engine thread. Unbound, with as many nodes as
//! CPUs, the scheduler often puts both application threads on one CPU for a whole run (wake-ups
//! land next to the waker), and the run takes twice as long: Jacobi 1024² × 100 at 2 nodes on 2
//! CPUs ran in 0.048 or 0.10 s, at random, over either transport; bound, 0.048 s every time
//! (docs/benchmarks.md). MPI launchers bind ranks to cores for the same reason.

use std::fmt::Write as _;

/// Parses a CPU list as the kernel writes them (`0`, `0,2`, `0-3,8`).
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim) {
        let num = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("{x:?} is not a CPU number"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("the range {part:?} goes backwards"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.len() > nix::sched::CpuSet::count() {
        return Err(format!(
            "more than {} CPUs listed",
            nix::sched::CpuSet::count()
        ));
    }
    Ok(cpus)
}

/// Writes `cpus` (sorted, distinct) as a CPU list, runs as ranges (`0-3,8`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        let _ = if j > i {
            write!(out, "{}-{}", cpus[i], cpus[j])
        } else {
            write!(out, "{}", cpus[i])
        };
        i = j + 1;
    }
    out
}

/// The CPUs of `allowed` that node `rank` of `nodes` started on this host gets: with at most
/// as many nodes as CPUs, a contiguous share of its own (shares differ by at most one CPU, the
/// first nodes get the larger ones); with more nodes than CPUs, one CPU, neighbouring ranks
/// together (4 nodes on 2 CPUs: nodes 0 and 1 on the first). Ranks next to each other are
/// the ones that talk most (the neighbours of a block partition), and on one CPU a request
/// and its answer need no wake-up of another CPU: round robin (nodes 0 and 2 on the first)
/// made Jacobi 1024² × 100 at 4 nodes 10–15 % slower and the MP-MPICH SMI example `strided`
/// at 4 nodes 4.7–13 s instead of 2.7–2.8 s (docs/svmrun.md).
pub fn node_cpus(allowed: &[usize], nodes: usize, rank: usize) -> Vec<usize> {
    let n = allowed.len();
    if n == 0 || nodes == 0 {
        return allowed.to_vec();
    }
    if nodes > n {
        // A rank beyond the job counts as the last one, so the index stays below n; the groups
        // of ranks on one CPU differ by at most one node.
        return vec![allowed[rank.min(nodes - 1) * n / nodes]];
    }
    let (share, extra) = (n / nodes, n % nodes);
    let start = rank * share + rank.min(extra);
    let len = share + usize::from(rank < extra);
    allowed[start..start + len].to_vec()
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> Result<Vec<usize>, String> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
        .map_err(|e| format!("sched_getaffinity failed: {e}"))?;
    Ok((0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

/// Binds the calling thread (and the threads it starts from now on) to `cpus`.
pub fn bind_current_thread(cpus: &[usize]) -> Result<(), String> {
    let mut set = nix::sched::CpuSet::new();
    for &c in cpus {
        set.set(c)
            .map_err(|_| format!("CPU {c} is beyond this system's CPU set"))?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| {
        format!(
            "sched_setaffinity to CPUs {} failed: {e} (allowed here: {})",
            format_cpu_list(cpus),
            allowed_cpus().map_or_else(|e| e, |a| format_cpu_list(&a))
        )
    })
}

/// The host's online CPUs (not the calling thread's share of them): what the engine's spin
/// default compares the job's node count with.
pub fn online_cpus() -> usize {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN) {
        Ok(Some(n)) if n > 0 => n as usize,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_print_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("3,0-2, 8").unwrap(), vec![0, 1, 2, 3, 8]);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(format_cpu_list(&[1, 3]), "1,3");
        assert_eq!(format_cpu_list(&[]), "");
        for bad in ["", "a", "3-1", "1,,2", "-1"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
        assert!(parse_cpu_list("0-100000").is_err());
    }

    #[test]
    fn nodes_get_disjoint_shares_until_there_are_more_nodes_than_cpus() {
        let cpus = [0, 1, 2, 3, 4];
        assert_eq!(node_cpus(&cpus, 2, 0), vec![0, 1, 2]);
        assert_eq!(node_cpus(&cpus, 2, 1), vec![3, 4]);
        let all: Vec<usize> = (0..5).flat_map(|r| node_cpus(&cpus, 5, r)).collect();
        assert_eq!(all, cpus);
        assert_eq!(node_cpus(&[0, 1], 2, 1), vec![1]);
        assert_eq!(node_cpus(&[0, 1], 1, 0), vec![0, 1]);
        let many: Vec<usize> = (0..4).flat_map(|r| node_cpus(&[6, 7], 4, r)).collect();
        assert_eq!(many, vec![6, 6, 7, 7]);
        let three: Vec<usize> = (0..3).flat_map(|r| node_cpus(&[0, 1], 3, r)).collect();
        assert_eq!(three, vec![0, 0, 1]);
        let eight: Vec<usize> = (0..8).flat_map(|r| node_cpus(&[0, 1, 2], 8, r)).collect();
        assert_eq!(eight, vec![0, 0, 0, 1, 1, 1, 2, 2]);
        // A rank beyond the job (not one svmrun starts) still gets a CPU of `allowed`.
        assert_eq!(node_cpus(&[0, 1], 4, 9), vec![1]);
    }

    #[test]
    fn a_thread_can_be_bound_to_what_it_may_use_and_not_beyond() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        assert!(online_cpus() >= 1);
        // In a thread of its own: the test harness's threads keep their affinity.
        let got = std::thread::spawn(move || {
            bind_current_thread(&allowed[..1])?;
            let now = allowed_cpus()?;
            let beyond = bind_current_thread(&[nix::sched::CpuSet::count() + 1]);
            Ok::<_, String>((now, beyond))
        })
        .join()
        .unwrap()
        .unwrap();
        assert_eq!(got.0.len(), 1);
        assert!(got.1.unwrap_err().contains("beyond"));
    }
}
