//! Jobs started without svmrun, the way Slurm and Open MPI start them (rank and size from the
//! launcher's variables, `SVM_COORD` and `SVM_JOB_KEY` from the user, no `SVM_LISTEN`); strangers
//! during start-up; a node that cannot join.

use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use svm_tests::{example_path, free_port, serial, show_nodes, wait_nodes, Job, Output};

const KEY: &str = "5e1f00112233445566778899aabbccddeeff00112233445566778899aabbccdd";
const DEADLINE: Duration = Duration::from_secs(90);

/// Starts `nodes` processes of `example ARGS` with the variables a launcher would set
/// (`launcher`: "slurm" or "ompi"), the rendezvous at `coord`, plus `extra(rank)`.
fn launch(
    launcher: &str,
    nodes: usize,
    coord: &str,
    example: &str,
    args: &[&str],
    extra: &dyn Fn(usize) -> Vec<(&'static str, String)>,
) -> Vec<Job> {
    launch_some(launcher, nodes, nodes, coord, example, args, extra)
}

/// [`launch`] of only the first `start` of the `nodes` ranks.
fn launch_some(
    launcher: &str,
    nodes: usize,
    start: usize,
    coord: &str,
    example: &str,
    args: &[&str],
    extra: &dyn Fn(usize) -> Vec<(&'static str, String)>,
) -> Vec<Job> {
    let exe = example_path(example);
    (0..start)
        .map(|rank| {
            let mut env: Vec<(&str, String)> = match launcher {
                "slurm" => vec![
                    ("SLURM_PROCID", rank.to_string()),
                    ("SLURM_NTASKS", nodes.to_string()),
                ],
                _ => vec![
                    ("OMPI_COMM_WORLD_RANK", rank.to_string()),
                    ("OMPI_COMM_WORLD_SIZE", nodes.to_string()),
                ],
            };
            env.push(("SVM_COORD", coord.to_string()));
            env.push(("SVM_JOB_KEY", KEY.to_string()));
            env.extend(extra(rank));
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            Job::start_program(&exe, args, &env)
        })
        .collect()
}

fn no_panic(outs: &[Output]) {
    for o in outs {
        assert!(!o.stderr.contains("panicked"), "{}", show_nodes(outs));
    }
}

#[test]
fn slurm_style_job_without_svm_listen() {
    let _serial = serial();
    let coord = format!("127.0.0.1:{}", free_port());
    let jobs = launch("slurm", 3, &coord, "counter", &["500"], &|_| vec![]);
    let outs = wait_nodes(jobs, DEADLINE);
    for o in &outs {
        assert!(o.success(), "{}", show_nodes(&outs));
    }
    outs[0].assert_stdout_contains("counter=1500 expected=1500 OK");
}

#[test]
fn open_mpi_style_job_with_a_host_name_and_wildcard_listeners() {
    let _serial = serial();
    // A host name in SVM_COORD (rank 0 then listens on every address) and nodes that listen on
    // the wildcard address: each advertises the address it reached rank 0 from.
    let coord = format!("localhost:{}", free_port());
    let jobs = launch("ompi", 3, &coord, "counter", &["300"], &|_| {
        vec![("SVM_LISTEN", "0.0.0.0".to_string())]
    });
    let outs = wait_nodes(jobs, DEADLINE);
    for o in &outs {
        assert!(o.success(), "{}", show_nodes(&outs));
    }
    outs[0].assert_stdout_contains("counter=900 expected=900 OK");
}

/// Opens `count` connections to `addr` as soon as it listens, and keeps them open, silent,
/// until the returned handle is dropped.
fn idle_strangers(addr: String, count: usize) -> thread::JoinHandle<Vec<TcpStream>> {
    thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(30);
        let mut held = Vec::new();
        while held.len() < count && Instant::now() < until {
            match TcpStream::connect(&addr) {
                Ok(s) => held.push(s),
                Err(_) => thread::sleep(Duration::from_millis(1)),
            }
        }
        held
    })
}

#[test]
fn idle_strangers_on_the_rendezvous_port_do_not_stop_the_start() {
    let _serial = serial();
    let port = free_port();
    let coord = format!("127.0.0.1:{port}");
    // The strangers connect as soon as rank 0 listens, before any node of the job.
    let strangers = idle_strangers(coord.clone(), 4);
    let jobs = launch("slurm", 2, &coord, "counter", &["100"], &|rank| {
        // Rank 1 comes late, so that the strangers are first in line.
        if rank == 1 {
            thread::sleep(Duration::from_millis(300));
        }
        vec![]
    });
    let outs = wait_nodes(jobs, DEADLINE);
    let held = strangers.join().expect("stranger thread");
    eprintln!(
        "{} idle strangers; node 0 took {:.2} s\n{}",
        held.len(),
        outs[0].elapsed.as_secs_f64(),
        show_nodes(&outs)
    );
    assert_eq!(held.len(), 4, "the strangers could not connect");
    for o in &outs {
        assert!(o.success(), "{}", show_nodes(&outs));
    }
    outs[0].assert_stdout_contains("counter=200 expected=200 OK");
    drop(held);
}

/// A node fails before joining: every node fails, naming it and why, long before
/// `SVM_TIMEOUT` (the deadline of this test is shorter than that timeout).
fn one_node_cannot_join(bad: (&'static str, &'static str), expect: &str) {
    let _serial = serial();
    let coord = format!("127.0.0.1:{}", free_port());
    let jobs = launch("slurm", 3, &coord, "counter", &["100"], &|rank| {
        let mut v = vec![("SVM_TIMEOUT", "200".to_string())];
        if rank == 2 {
            v.push((bad.0, bad.1.to_string()));
        }
        v
    });
    let outs = wait_nodes(jobs, Duration::from_secs(40));
    eprintln!("{}", show_nodes(&outs));
    no_panic(&outs);
    for (rank, o) in outs.iter().enumerate() {
        assert!(!o.success(), "node {rank} succeeded\n{}", show_nodes(&outs));
        // Node 2 itself says why in its own words.
        let named = rank == 2 || o.stderr.contains("node 2 could not join");
        assert!(
            named && o.stderr.contains(expect),
            "node {rank} does not say that node 2 could not join ({expect})\n{}",
            show_nodes(&outs)
        );
    }
}

#[test]
fn a_node_that_cannot_listen_fails_the_job_naming_it() {
    // 192.0.2.1 (TEST-NET-1) is not an address of this host.
    one_node_cannot_join(("SVM_LISTEN", "192.0.2.1"), "SVM_LISTEN");
}

#[test]
fn a_node_with_a_bad_setting_fails_the_job_naming_it() {
    one_node_cannot_join(("SVM_PAGE_SIZE", "1000"), "SVM_PAGE_SIZE");
}

#[test]
fn nodes_that_never_come_are_named() {
    let _serial = serial();
    let coord = format!("127.0.0.1:{}", free_port());
    // A job of 3 of which only ranks 0 and 1 run.
    let jobs = launch_some("slurm", 3, 2, &coord, "counter", &["100"], &|_| {
        vec![("SVM_TIMEOUT", "3".to_string())]
    });
    let outs = wait_nodes(jobs, Duration::from_secs(40));
    eprintln!("{}", show_nodes(&outs));
    no_panic(&outs);
    for o in &outs {
        assert!(!o.success(), "{}", show_nodes(&outs));
        assert!(
            o.stderr.contains("node(s) 2 did not join"),
            "{}",
            show_nodes(&outs)
        );
    }
}
