//! Failure handling across real processes: a node killed mid-run, strangers on the rendezvous
//! port, and a shared window whose base address is already taken. Nothing may hang.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use svm_comm::wire::{encode, Msg, KEY_LEN};
use svm_tests::{example_path, free_port, run_svmrun, run_svmrun_env, serial, word_value, Job};

/// How fast the survivors and svmrun must notice a dead node (DESIGN §9 says 2 s for the nodes;
/// svmrun gets one more).
const LOSS_NOTICED_WITHIN: Duration = Duration::from_secs(3);

fn node_killed(fault: &str, transport: &str, envs: &[(&str, &str)]) {
    let _serial = serial();
    let sleeper = example_path("sleeper");
    let mut job = Job::start(
        &[
            "-n",
            "2",
            "--fault",
            fault,
            "--transport",
            transport,
            sleeper.to_str().unwrap(),
            "60",
        ],
        envs,
    );
    let Some(line) = job.wait_for_line(Duration::from_secs(30), |l| l.contains("rank=1 pid="))
    else {
        panic!("rank 1 never printed its pid\n{}", job.output_so_far());
    };
    let pid: i32 = word_value(&line, "pid")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("bad pid in {line:?}"));
    // Let both nodes get into their barrier loop.
    thread::sleep(Duration::from_millis(300));
    assert!(
        !job.has_exited(),
        "the job ended before a node was killed\n{}",
        job.output_so_far()
    );
    let killed_at = job.elapsed();
    kill(Pid::from_raw(pid), Signal::SIGKILL).expect("kill rank 1");
    let out = job
        .wait(killed_at + Duration::from_secs(20))
        .unwrap_or_else(|t| {
            panic!("svmrun did not exit within 20 s of SIGKILL to rank 1 (pid {pid})\n{t}")
        });
    let noticed = out.elapsed.saturating_sub(killed_at);
    eprintln!(
        "rank 1 (pid {pid}) killed; svmrun exited {:.3} s later\n{out}",
        noticed.as_secs_f64()
    );
    assert!(!out.success(), "svmrun must fail when a node dies\n{out}");
    assert!(
        noticed <= LOSS_NOTICED_WITHIN,
        "svmrun took {:.2} s to exit after rank 1 was killed (limit {} s)\n{out}",
        noticed.as_secs_f64(),
        LOSS_NOTICED_WITHIN.as_secs()
    );
    out.assert_stderr_contains("node 1");
    assert!(!out.lingering, "a node outlived svmrun\n{out}");
}

#[test]
fn killed_node_fails_the_job_quickly_uffd() {
    node_killed("uffd", "tcp", &[]);
}

/// The same over Unix-domain links between the two nodes (`SVM_UNIX_SOCKETS=1`).
#[test]
fn killed_node_fails_the_job_quickly_over_unix_sockets() {
    node_killed("uffd", "tcp", &[("SVM_UNIX_SOCKETS", "1")]);
}

#[test]
fn killed_node_fails_the_job_quickly_segv() {
    node_killed("segv", "tcp", &[]);
}

/// Over DECK-SCI the survivor waits in the shared-memory barrier, where no message can tell
/// it anything: its engine must still notice the dead peer and end the job as quickly.
#[test]
fn killed_node_fails_the_job_quickly_in_a_shared_memory_barrier() {
    node_killed("uffd", "deck", &[]);
}

/// A node that dies while it holds a lock's token, with another node waiting for the token:
/// the job fails, and the lock's manager names the lost node and the lock.
#[test]
fn lost_token_holder_fails_the_job_naming_it() {
    let _serial = serial();
    let prog = example_path("syncbench");
    let out = run_svmrun(
        &[
            "-n",
            "2",
            "--timeout",
            "20",
            prog.to_str().unwrap(),
            "hold",
            "1",
        ],
        Duration::from_secs(60),
    );
    assert!(!out.success(), "the job must fail when a node dies\n{out}");
    out.assert_stdout_contains("holding lock 20");
    out.assert_stderr_contains("lost node 1");
    out.assert_stderr_contains("it may hold the token of locks [20]");
    assert!(!out.lingering, "a node outlived svmrun\n{out}");
}

/// Connects to `addr` as soon as something listens there (retrying until `within`), sends
/// `payload` and waits for the peer to close the connection. `Ok` describes how it closed.
fn intrude(addr: SocketAddr, payload: Vec<u8>, within: Duration) -> Result<String, String> {
    let until = Instant::now() + within;
    let mut stream = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= until => {
                return Err(format!(
                    "could not connect to {addr} within {within:?}: {e}"
                ))
            }
            Err(_) => thread::sleep(Duration::from_millis(2)),
        }
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    if let Err(e) = stream.write_all(&payload) {
        // Refused before we finished talking: that is a close too.
        return Ok(format!("write failed: {e}"));
    }
    let mut buf = [0u8; 4096];
    let mut received = 0usize;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(format!("closed by the peer after {received} bytes")),
            Ok(k) => received += k,
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                return Ok(format!("reset by the peer after {received} bytes"))
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(format!(
                    "the peer kept the connection open for 10 s after {} bytes from a stranger",
                    payload.len()
                ))
            }
            Err(e) => return Err(format!("read failed: {e}")),
        }
    }
}

#[test]
fn strangers_on_the_rendezvous_port_are_refused_and_the_job_completes() {
    let _serial = serial();
    let port = free_port();
    let coord = format!("127.0.0.1:{port}");
    let addr: SocketAddr = coord.parse().unwrap();
    let counter = example_path("counter");
    let job = Job::start(
        &[
            "-n",
            "2",
            "--coord",
            &coord,
            counter.to_str().unwrap(),
            "2000",
        ],
        &[],
    );

    let garbage =
        b"GET / HTTP/1.0\r\nHost: svm\r\n\r\n\x00\x01\x02\x03\xff\xfe\xfd\xfc garbage garbage\n"
            .to_vec();
    let wrong_key = encode(
        &Msg::Hello {
            rank: 1,
            size: 2,
            key: [0x5a; KEY_LEN],
            listen: "127.0.0.1:9".to_string(),
        },
        1,
        0,
        &[],
    )
    .expect("encode a Hello");
    let within = Duration::from_secs(20);
    let garbage_thread = thread::spawn(move || intrude(addr, garbage, within));
    let wrong_key_thread = thread::spawn(move || intrude(addr, wrong_key, within));
    let garbage_result = garbage_thread.join().expect("intruder thread panicked");
    let wrong_key_result = wrong_key_thread.join().expect("intruder thread panicked");

    let out = job
        .wait(Duration::from_secs(90))
        .unwrap_or_else(|t| panic!("{t}"));
    if let Err(e) = &garbage_result {
        panic!("garbage on the rendezvous port: {e}\n{out}");
    }
    if let Err(e) = &wrong_key_result {
        panic!("a Hello with a wrong job key: {e}\n{out}");
    }
    eprintln!("garbage: {garbage_result:?}\nwrong key: {wrong_key_result:?}\n{out}");
    out.assert_success();
    out.assert_stdout_contains("counter=4000 expected=4000 OK");
    // DESIGN §9: strangers are refused *and logged*.
    let refusals = out.stderr.matches("refused").count();
    assert!(
        refusals >= 2,
        "expected both strangers to be logged as refused on stderr\n{out}"
    );
}

/// `exe_base=` printed by `sleeper --print-exe-base` under svmrun.
fn probe_exe_base() -> u64 {
    let sleeper = example_path("sleeper");
    let out = run_svmrun(
        &[
            "-n",
            "1",
            sleeper.to_str().unwrap(),
            "0",
            "--print-exe-base",
        ],
        Duration::from_secs(60),
    );
    out.assert_success();
    let line = out
        .stdout_lines_with(&["exe_base="])
        .first()
        .copied()
        .unwrap_or_else(|| panic!("sleeper printed no exe_base\n{out}"));
    let hex = word_value(line, "exe_base").unwrap_or_else(|| panic!("no exe_base word\n{out}"));
    u64::from_str_radix(hex.trim_start_matches("0x"), 16)
        .unwrap_or_else(|e| panic!("exe_base {hex:?} is not hex: {e}\n{out}"))
}

#[test]
fn taken_window_base_fails_with_a_message_naming_svm_space_base() {
    let _serial = serial();
    // svmrun disables address randomisation, so the executable loads at the same address in
    // every run: a window placed over it cannot be reserved.
    let first = probe_exe_base();
    let second = probe_exe_base();
    assert_eq!(
        first, second,
        "the executable loaded at {first:#x} and then {second:#x}: svmrun must disable address randomisation (same window address on every node)"
    );
    let base = first & !((2u64 << 20) - 1);
    assert_ne!(base, 0, "executable loaded below 2 MiB ({first:#x})");
    let base = format!("{base:#x}");
    let sleeper = example_path("sleeper");
    let out = run_svmrun_env(
        &["-n", "2", sleeper.to_str().unwrap(), "5"],
        &[("SVM_SPACE_BASE", &base)],
        Duration::from_secs(60),
    );
    eprintln!("{out}");
    assert!(
        !out.success(),
        "SVM_SPACE_BASE={base} overlaps the executable: the job must fail\n{out}"
    );
    out.assert_stderr_contains("SVM_SPACE_BASE");
    assert!(!out.stdout.contains("sleeper done OK"), "{out}");
    assert!(
        out.elapsed < Duration::from_secs(30),
        "took {:?} to fail\n{out}",
        out.elapsed
    );
    assert!(!out.lingering, "a node outlived svmrun\n{out}");
}
