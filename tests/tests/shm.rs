//! Nothing is left in /dev/shm whatever is killed and when: nodes killed at random moments of
//! DECK-SCI set-up (and just after it).

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use svm_comm::bootstrap::parse_key;
use svm_comm::deck::sci::job_file_prefix;
use svm_tests::{example_path, serial, Job};

/// Nodes of this job other than svmrun: the processes of svmrun's process group.
fn nodes_of(job: &Job) -> Vec<i32> {
    let pgid = job.pid() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != pgid)
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    // pid (comm) state ppid pgrp ...: comm may contain spaces.
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(2)?.parse::<i32>().ok()
                })
                == Some(pgid)
        })
        .collect()
}

fn leftovers(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// A small deterministic generator, seeded from the clock (printed, to replay a failure).
struct Rng(u64);
impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

#[test]
fn nodes_killed_during_deck_setup_leave_nothing_in_dev_shm() {
    let _serial = serial();
    if !Path::new("/dev/shm").is_dir() {
        eprintln!("SKIPPED: no /dev/shm on this machine");
        return;
    }
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);
    let sleeper = example_path("sleeper");
    let until = Instant::now() + Duration::from_secs(240);
    for round in 0..20 {
        assert!(Instant::now() < until, "20 rounds did not finish in 240 s");
        let key: String = (0..64)
            .map(|_| char::from_digit(rng.next(16) as u32, 16).unwrap())
            .collect();
        let prefix = job_file_prefix(&parse_key(&key).unwrap());
        let nodes = 3 + rng.next(3);
        let n = nodes.to_string();
        let mut job = Job::start(
            &[
                "-n",
                &n,
                "--transport",
                "deck",
                sleeper.to_str().unwrap(),
                "1",
            ],
            &[("SVM_JOB_KEY", &key)],
        );
        // A random moment of set-up: once the first segment files exist (set-up has begun),
        // after a random few milliseconds more.
        let delay = Duration::from_micros(rng.next(8000));
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) && !job.has_exited() {
            if !leftovers(&prefix).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(delay);
        let pids = nodes_of(&job);
        let victim = pids
            .get(rng.next(pids.len().max(1) as u64) as usize)
            .copied();
        let files_then = leftovers(&prefix).len();
        if let Some(pid) = victim {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let out = job
            .wait(Duration::from_secs(60))
            .unwrap_or_else(|t| panic!("round {round}: the job did not end\n{t}"));
        let left = leftovers(&prefix);
        eprintln!(
            "round {round}: {nodes} nodes, killed pid {victim:?} after {delay:?} with {files_then} \
             file(s) in /dev/shm; exit {:?}; left: {left:?}",
            out.status.code()
        );
        for f in &left {
            let _ = std::fs::remove_file(Path::new("/dev/shm").join(f));
        }
        assert!(
            left.is_empty(),
            "round {round} (seed {seed}) left {left:?} in /dev/shm\n{out}"
        );
    }
}
