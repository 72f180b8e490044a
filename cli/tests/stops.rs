//! `qcg run` stops every process it started: ranks are shell scripts that leave a
//! sleeping child behind, and each test checks, from `/proc`, that nothing of them
//! runs on once `qcg run` has returned.
//!
//! Needs the workspace's binaries built first (`cargo build --workspace --bins`).

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A rank that starts a long sleep in the background, writes both pids, then runs
/// `tail` (shell) as its own work.
fn script(dir: &Path, tail: &str) -> std::path::PathBuf {
    write(
        dir,
        "rank.sh",
        &format!(
            "#!/bin/sh\nsleep 1000 &\necho $! > \"$QT_DIR/child-$QCG_RANK\"\necho $$ > \"$QT_DIR/rank-$QCG_RANK\"\n{tail}\n"
        ),
    )
}

fn qcg_run(dir: &Path, n: u32, extra: &[&str], rank: &Path) -> Command {
    let mut c = Command::new(bin("qcg"));
    c.arg("run")
        .arg("-n")
        .arg(n.to_string())
        .args(extra)
        .arg("--")
        .arg("/bin/sh")
        .arg(rank)
        .env("QT_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group: a signal in these tests goes to `qcg run` alone.
        .process_group(0);
    c
}

/// Waits (bounded) for `qcg run` to end; a hang fails the test.
fn finish(mut child: Child) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "qcg run did not end within 90 s\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pids every rank wrote (its own and its background child's), once all `n`
/// ranks have written them.
fn pids(dir: &Path, n: u32) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let got: Vec<u32> = (0..n)
            .flat_map(|r| [format!("rank-{r}"), format!("child-{r}")])
            .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        if got.len() == 2 * n as usize {
            return got;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the ranks did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn running(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|&p| qcg_helper::pgroup::pid_alive(p))
        .collect()
}

#[test]
fn a_failing_rank_is_reported_without_waiting_for_its_orphans() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 1 fails after a second; its background sleep holds its output open.
    let rank = script(
        dir.path(),
        "if [ \"$QCG_RANK\" = 1 ]; then sleep 1; exit 7; fi\nsleep 1000",
    );
    let o = finish(qcg_run(dir.path(), 3, &[], &rank).spawn().unwrap());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "{err}");
    assert!(err.contains("rank 1 exited with status 7"), "{err}");
    assert_eq!(running(&pids(dir.path(), 3)), Vec::<u32>::new(), "{err}");
}

#[test]
fn the_timeout_stops_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let rank = script(dir.path(), "sleep 1000");
    let o = finish(
        qcg_run(dir.path(), 2, &["--timeout", "2"], &rank)
            .spawn()
            .unwrap(),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(124), "{err}");
    assert!(
        err.contains("timed out after 2 s; its processes were stopped"),
        "{err}"
    );
    assert_eq!(running(&pids(dir.path(), 2)), Vec::<u32>::new(), "{err}");
}

fn signal_stops_every_rank(sig: rustix::process::Signal, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    // The rank traps TERM and records it: it is given the chance to clean up.
    let rank = script(
        dir.path(),
        "trap 'echo done > \"$QT_DIR/trapped-$QCG_RANK\"; exit 0' TERM\nsleep 1000 & wait",
    );
    let child = qcg_run(dir.path(), 2, &[], &rank).spawn().unwrap();
    let pids = pids(dir.path(), 2);
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
    let o = finish(child);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(err.contains("its processes were stopped"), "{err}");
    assert_eq!(running(&pids), Vec::<u32>::new(), "{err}");
    for r in 0..2 {
        assert!(
            dir.path().join(format!("trapped-{r}")).exists(),
            "rank {r}'s TERM trap did not run: {err}"
        );
    }
}

#[test]
fn sigint_to_qcg_run_alone_stops_every_rank() {
    signal_stops_every_rank(rustix::process::Signal::INT, 130);
}

#[test]
fn sigterm_to_qcg_run_stops_every_rank() {
    signal_stops_every_rank(rustix::process::Signal::TERM, 143);
}
