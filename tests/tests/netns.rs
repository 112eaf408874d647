//! A job on three "hosts": network namespaces this test creates (and removes, even when it
//! fails), each with its own address on a bridge that lives in a fourth namespace, so the
//! machine's own network is never touched. Nodes start with the environment bootstrap
//! (`SVM_RANK`, `SVM_SIZE` — or Slurm's `SLURM_PROCID`, `SLURM_NTASKS` — `SVM_COORD`,
//! `SVM_JOB_KEY`) and no `SVM_LISTEN`: each must find the address the others reach it on by
//! itself.
//!
//! Needs root and `ip` (iproute2); skipped with a message otherwise.

use std::process::Command;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use svm_tests::{example_path, serial, show_nodes, wait_nodes, word_value, Job};

const KEY: &str = "0badc0de00112233445566778899aabbccddeeff00112233445566778899aabb";
const HOSTS: usize = 3;
const PORT: u16 = 7411;

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Effective uid 0 (from /proc/self/status: `Uid: real effective ...`).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Uid:"))?.to_string();
            line.split_whitespace().nth(2).map(|e| e == "0")
        })
        .unwrap_or(false)
}

/// The namespaces of one test; removed on drop (which also removes their links).
struct Net {
    prefix: String,
    subnet: u8,
    made: Vec<String>,
}

impl Net {
    fn host(&self, i: usize) -> String {
        format!("{}h{i}", self.prefix)
    }

    fn addr(&self, i: usize) -> String {
        format!("10.231.{}.{}", self.subnet, i + 1)
    }

    fn add_ns(&mut self, name: String) -> Result<(), String> {
        ip(&["netns", "add", &name])?;
        self.made.push(name);
        Ok(())
    }

    /// `None` (after printing why) when this machine cannot do it.
    fn new(tag: &str, subnet: u8) -> Option<Net> {
        if !is_root() {
            eprintln!("SKIPPED: network namespaces need root (CI runs as root)");
            return None;
        }
        if Command::new("ip").arg("-V").output().is_err() {
            eprintln!("SKIPPED: no `ip` command (install iproute2)");
            return None;
        }
        let prefix = format!("svm{}{tag}", std::process::id() % 100_000);
        let mut net = Net {
            prefix: prefix.clone(),
            subnet,
            made: Vec::new(),
        };
        let hub = format!("{prefix}hub");
        if let Err(e) = net.add_ns(hub.clone()) {
            eprintln!("SKIPPED: cannot create a network namespace here: {e}");
            return None;
        }
        for i in 0..HOSTS {
            let h = net.host(i);
            net.add_ns(h).expect("create a host namespace");
        }
        let setup = || -> Result<(), String> {
            ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
            ip(&["-n", &hub, "link", "set", "br0", "up"])?;
            for i in 0..HOSTS {
                let h = net.host(i);
                let port = format!("b{i}");
                ip(&[
                    "-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                    "netns", &h,
                ])?;
                ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"])?;
                ip(&[
                    "-n",
                    &h,
                    "addr",
                    "add",
                    &format!("{}/24", net.addr(i)),
                    "dev",
                    "eth0",
                ])?;
                ip(&["-n", &h, "link", "set", "eth0", "up"])?;
                ip(&["-n", &h, "link", "set", "lo", "up"])?;
            }
            Ok(())
        };
        setup().expect("set up the namespaces' network");
        Some(net)
    }

    fn coord(&self) -> String {
        format!("{}:{PORT}", self.addr(0))
    }

    /// Starts rank `rank` of `size` on host `rank % HOSTS` with the environment bootstrap.
    fn node(
        &self,
        rank: usize,
        size: usize,
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Job {
        self.node_as(("SVM_RANK", "SVM_SIZE"), rank, size, program, args, env)
    }

    /// [`Net::node`] with the rank and size in the variables `names` (Slurm's, for example).
    fn node_as(
        &self,
        names: (&str, &str),
        rank: usize,
        size: usize,
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Job {
        let h = self.host(rank % HOSTS);
        let exe = example_path(program);
        let mut full = vec!["netns", "exec", h.as_str(), exe.to_str().unwrap()];
        full.extend_from_slice(args);
        let (r, s, c) = (rank.to_string(), size.to_string(), self.coord());
        let mut vars = vec![
            (names.0, r.as_str()),
            (names.1, s.as_str()),
            ("SVM_COORD", c.as_str()),
            ("SVM_JOB_KEY", KEY),
        ];
        vars.extend_from_slice(env);
        Job::start_program(std::path::Path::new("ip"), &full, &vars)
    }

    fn job(&self, size: usize, program: &str, args: &[&str], env: &[(&str, &str)]) -> Vec<Job> {
        (0..size)
            .map(|r| self.node(r, size, program, args, env))
            .collect()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.made.drain(..).rev() {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                eprintln!("svm-tests: {e}");
            }
        }
    }
}

#[test]
fn three_hosts_counter_and_jacobi_without_svm_listen() {
    let _serial = serial();
    let Some(net) = Net::new("a", 71) else { return };
    let outs = wait_nodes(
        net.job(3, "counter", &["300"], &[]),
        Duration::from_secs(120),
    );
    eprintln!("{}", show_nodes(&outs));
    for o in &outs {
        assert!(o.success(), "{}", show_nodes(&outs));
    }
    outs[0].assert_stdout_contains("counter=900 expected=900 OK");

    let outs = wait_nodes(
        // As Slurm's srun starts them (the documented recipe): rank and size from Slurm.
        (0..3)
            .map(|r| {
                let names = ("SLURM_PROCID", "SLURM_NTASKS");
                net.node_as(names, r, 3, "jacobi", &["96", "10", "--verify"], &[])
            })
            .collect(),
        Duration::from_secs(180),
    );
    eprintln!("{}", show_nodes(&outs));
    for o in &outs {
        assert!(o.success(), "{}", show_nodes(&outs));
    }
    assert!(
        outs[0].stdout.contains(" OK"),
        "jacobi did not verify\n{}",
        show_nodes(&outs)
    );
}

#[test]
fn three_hosts_a_node_killed_mid_run_fails_the_others() {
    let _serial = serial();
    let Some(net) = Net::new("b", 72) else { return };
    let mut jobs = net.job(3, "sleeper", &["60"], &[]);
    let Some(line) = jobs[1].wait_for_line(Duration::from_secs(60), |l| l.contains("rank=1 pid="))
    else {
        panic!("rank 1 never printed its pid\n{}", jobs[1].output_so_far());
    };
    let pid: i32 = word_value(&line, "pid")
        .and_then(|p| p.parse().ok())
        .expect("pid");
    std::thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(pid), Signal::SIGKILL).expect("kill rank 1");
    let outs = wait_nodes(jobs, Duration::from_secs(60));
    eprintln!("{}", show_nodes(&outs));
    for r in [0, 2] {
        assert!(
            !outs[r].success(),
            "node {r} survived\n{}",
            show_nodes(&outs)
        );
        assert!(
            outs[r].stderr.contains("node 1"),
            "node {r} does not name node 1\n{}",
            show_nodes(&outs)
        );
    }
}

#[test]
fn three_hosts_strangers_during_start_up() {
    let _serial = serial();
    let Some(net) = Net::new("c", 73) else { return };
    // Four idle connections and one of garbage from host 2, opened as soon as rank 0 listens.
    let coord = net.coord().replace(':', "/");
    let connect = format!(
        "for i in $(seq 400); do exec 3<>/dev/tcp/{coord} && break; sleep 0.02; done 2>/dev/null"
    );
    let idle = format!("{connect}; echo connected; sleep 15");
    let garbage =
        format!("{connect}; printf 'GET / HTTP/1.0\\r\\nHost: svm.example\\r\\n\\r\\n' >&3; echo connected; sleep 15");
    // Rank 0 first; the others once every stranger is connected (first in line).
    let rank0 = net.node(0, 3, "counter", &["200"], &[]);
    let h2 = net.host(2);
    let mut strangers: Vec<Job> = (0..4)
        .map(|_| idle.as_str())
        .chain([garbage.as_str()])
        .map(|script| {
            Job::start_program(
                std::path::Path::new("ip"),
                &["netns", "exec", &h2, "bash", "-c", script],
                &[],
            )
        })
        .collect();
    for s in &mut strangers {
        if s.wait_for_line(Duration::from_secs(20), |l| l == "connected")
            .is_none()
        {
            panic!("a stranger could not connect\n{}", s.output_so_far());
        }
    }
    let mut jobs = vec![rank0];
    jobs.extend((1..3).map(|r| net.node(r, 3, "counter", &["200"], &[])));
    let outs = wait_nodes(jobs, Duration::from_secs(120));
    eprintln!("{}", show_nodes(&outs));
    for o in &outs {
        assert!(o.success(), "{}", show_nodes(&outs));
    }
    outs[0].assert_stdout_contains("counter=600 expected=600 OK");
    assert!(
        outs[0].stderr.contains("refused"),
        "the strangers were not logged\n{}",
        show_nodes(&outs)
    );
    for s in &mut strangers {
        s.kill_group();
    }
}
