//! Services that die and come back: the real binaries on loopback. A broker or a
//! frontal killed with SIGKILL and started again on the same port is found again
//! by the services below it without any traffic, and a new job runs; every service
//! stops cleanly on SIGTERM and SIGINT and removes its socket file.
//!
//! Needs the workspace's binaries and examples built first
//! (`cargo build --workspace --bins --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn broker_toml(dir: &Path, quic: &str, http: &str) -> PathBuf {
    write(
        dir,
        "broker.toml",
        &format!("listen = \"{quic}\"\nhttp_listen = \"{http}\"\nca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n"),
    )
}

fn frontal_toml(dir: &Path, cluster: &str, broker: SocketAddr, listen: &str) -> PathBuf {
    write(
        dir,
        &format!("frontal-{cluster}.toml"),
        &format!("cluster = \"{cluster}\"\npolicy = \"open\"\nbroker = \"{broker}\"\nlisten = \"{listen}\"\nca = \"ca/ca.pem\"\ncert = \"ca/{cluster}.pem\"\nkey = \"ca/{cluster}.key\"\n"),
    )
}

fn helper_toml(dir: &Path, node: &str, frontal: &str) -> PathBuf {
    write(
        dir,
        &format!("helper-{node}.toml"),
        &format!("node = \"{node}\"\nfrontal = \"{frontal}\"\nsocket = \"{node}.sock\"\nbind_address = \"127.0.0.1\"\nca = \"ca/ca.pem\"\ncert = \"ca/{node}.pem\"\nkey = \"ca/{node}.key\"\n\n# Test grid, run as root: root allowed explicitly.\n[accounts]\ndefault = \"root\"\nallow_root = true\n"),
    )
}

/// A service started on its own, so that a test can kill or signal it alone.
fn spawn(name: &str, config: &Path) -> (Child, mpsc::Receiver<String>) {
    let mut s = Services(Vec::new());
    let lines = start(&mut s, name, config);
    let child = s.0.pop().unwrap();
    (child, lines)
}

struct Grid {
    dir: tempfile::TempDir,
    broker: (Child, mpsc::Receiver<String>),
    quic: SocketAddr,
    http: SocketAddr,
    frontals: Vec<(Child, String)>,
    helpers: Vec<Child>,
}

impl Drop for Grid {
    fn drop(&mut self) {
        let all = std::iter::once(&mut self.broker.0)
            .chain(self.frontals.iter_mut().map(|f| &mut f.0))
            .chain(self.helpers.iter_mut());
        for c in all {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn grid() -> Grid {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = d.join("ca");
    assert!(qcg(&["ca", "init", "--dir", ca.to_str().unwrap()])
        .status
        .success());
    for (role, name) in [
        ("broker", "broker"),
        ("frontal", "alpha"),
        ("frontal", "beta"),
        ("helper", "a1"),
        ("helper", "b1"),
    ] {
        issue(&ca, role, name);
    }
    let (child, lines) = spawn("qcg-broker", &broker_toml(d, "127.0.0.1:0", "127.0.0.1:0"));
    let quic: SocketAddr = wait_for(&lines, "qcg-broker: QUIC on").parse().unwrap();
    let http: SocketAddr = wait_for(&lines, "qcg-broker: HTTP API on http://")
        .parse()
        .unwrap();
    let mut frontals = Vec::new();
    let mut helpers = Vec::new();
    for (cluster, node) in [("alpha", "a1"), ("beta", "b1")] {
        let (f, lines) = spawn(
            "qcg-frontal",
            &frontal_toml(d, cluster, quic, "127.0.0.1:0"),
        );
        let at = wait_for(
            &lines,
            &format!("qcg-frontal: cluster {cluster} serving helpers on"),
        );
        let (h, lines) = spawn("qcg-helper", &helper_toml(d, node, &at));
        wait_for(&lines, &format!("qcg-helper: node {node} serving"));
        frontals.push((f, at));
        helpers.push(h);
    }
    Grid {
        dir,
        broker: (child, lines),
        quic,
        http,
        frontals,
        helpers,
    }
}

impl Grid {
    fn socket(&self, node: &str) -> PathBuf {
        self.dir.path().join(format!("{node}.sock"))
    }

    /// One ring job across both clusters; whether it succeeded, and its stderr.
    fn ring(&self) -> (bool, String) {
        let o = Command::new(bin("qcg"))
            .args(["run", "-n", "4", "--timeout", "30", "--helper"])
            .arg(self.socket("a1"))
            .arg("--helper")
            .arg(self.socket("b1"))
            .arg("--")
            .arg(example("ring"))
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into(),
        )
    }

    /// Runs rings until one succeeds (at most 60 s); how long that took.
    fn first_ring_after(&self, since: Instant) -> Duration {
        loop {
            let (ok, err) = self.ring();
            if ok {
                return since.elapsed();
            }
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "no job succeeded within 60 s: {err}"
            );
        }
    }

    /// Waits (at most 60 s) until the broker lists both clusters; how long it took.
    fn clusters_back(&self, since: Instant) -> Duration {
        loop {
            if let Ok(body) = std::panic::catch_unwind(|| http_get(self.http, "/v1/clusters")) {
                if body.contains("\"alpha\"") && body.contains("\"beta\"") {
                    return since.elapsed();
                }
            }
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "the clusters did not register again within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn a_broker_killed_and_restarted_gets_its_clusters_back_and_runs_jobs() {
    let mut g = grid();
    let (ok, err) = g.ring();
    assert!(ok, "{err}");
    g.broker.0.kill().unwrap();
    g.broker.0.wait().unwrap();
    let cfg = broker_toml(g.dir.path(), &g.quic.to_string(), &g.http.to_string());
    g.broker = spawn("qcg-broker", &cfg);
    wait_for(&g.broker.1, "qcg-broker: QUIC on");
    let t0 = Instant::now();
    // No job asks: the frontals find the new broker and register by themselves.
    let back = g.clusters_back(t0);
    let job = g.first_ring_after(t0);
    eprintln!(
        "broker restart: clusters registered again after {} ms, first job done after {} ms",
        back.as_millis(),
        job.as_millis()
    );
}

#[test]
fn a_frontal_killed_and_restarted_gets_its_helper_back_and_runs_jobs() {
    let mut g = grid();
    let (ok, err) = g.ring();
    assert!(ok, "{err}");
    let (f, at) = &mut g.frontals[0];
    f.kill().unwrap();
    f.wait().unwrap();
    let at = at.clone();
    let cfg = frontal_toml(g.dir.path(), "alpha", g.quic, &at);
    let (f, lines) = spawn("qcg-frontal", &cfg);
    g.frontals[0].0 = f;
    wait_for(&lines, "qcg-frontal: cluster alpha serving helpers on");
    let t0 = Instant::now();
    let job = g.first_ring_after(t0);
    eprintln!(
        "frontal restart: first job done after {} ms",
        job.as_millis()
    );
}

fn stops_cleanly(sig: rustix::process::Signal) {
    let mut g = grid();
    let sockets = [g.socket("a1"), g.socket("b1")];
    assert!(sockets.iter().all(|s| s.exists()));
    let mut all: Vec<(&str, &mut Child)> = vec![];
    for h in g.helpers.iter_mut() {
        all.push(("helper", h));
    }
    for f in g.frontals.iter_mut() {
        all.push(("frontal", &mut f.0));
    }
    all.push(("broker", &mut g.broker.0));
    for (what, c) in all {
        let pid = rustix::process::Pid::from_raw(c.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the {what} did not stop"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "the {what} ended with {status}");
    }
    for s in &sockets {
        assert!(!s.exists(), "{} was left behind", s.display());
    }
}

#[test]
fn services_stop_cleanly_on_sigterm() {
    stops_cleanly(rustix::process::Signal::TERM);
}

#[test]
fn services_stop_cleanly_on_sigint() {
    stops_cleanly(rustix::process::Signal::INT);
}
