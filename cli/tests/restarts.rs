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

fn broker_toml(dir: &Path, quic: &str, http: &str, https: &str) -> PathBuf {
    write(
        dir,
        "broker.toml",
        &format!("listen = \"{quic}\"\nhttp_listen = \"{http}\"\nhttps_listen = \"{https}\"\nca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n"),
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
    https: SocketAddr,
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
    let dir = grid_ca(&[
        ("broker", "broker"),
        ("frontal", "alpha"),
        ("frontal", "beta"),
        ("helper", "a1"),
        ("helper", "b1"),
        ("client", "alice"),
    ]);
    let d = dir.path();
    let (child, lines) = spawn(
        "qcg-broker",
        &broker_toml(d, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"),
    );
    let quic: SocketAddr = wait_for(&lines, "qcg-broker: QUIC on").parse().unwrap();
    let http: SocketAddr = wait_for(&lines, "qcg-broker: HTTP API on http://")
        .parse()
        .unwrap();
    let https: SocketAddr = wait_for(&lines, "qcg-broker: HTTPS API on https://")
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
        https,
        frontals,
        helpers,
    }
}

impl Grid {
    /// One request to the HTTPS job API as the client `alice`.
    fn call(&self, method: &str, path: &str, body: &str) -> qcg_cli::client::Answer {
        let ca = self.dir.path().join("ca");
        let id = qcg_proto::tls::Identity::load(
            &ca.join("alice.pem"),
            &ca.join("alice.key"),
            &ca.join("ca.pem"),
        )
        .unwrap();
        let client = qcg_cli::client::Client::new(&format!("https://{}", self.https), &id).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(client.request(method, path, body.as_bytes().to_vec()))
            .unwrap()
    }

    /// Submits one process of `sh -c SCRIPT`; returns the job id.
    fn submit(&self, script: &str) -> String {
        let xml = format!(
            r#"<grmsJob appId="r"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>1</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>/bin/sh</executable>
<arguments><value>-c</value><value>{script}</value></arguments></execution></task></grmsJob>"#
        );
        let a = self.call("POST", "/v1/jobs?workdir=/tmp", &xml);
        assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
        a.json()["id"].as_str().unwrap().to_string()
    }

    /// A job's status object, as the API gives it.
    fn status(&self, id: &str) -> serde_json::Value {
        let a = self.call("GET", &format!("/v1/jobs/{id}"), "");
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        a.json()["status"].clone()
    }

    /// Waits (at most 60 s) until `f` holds.
    fn until(&self, what: &str, mut f: impl FnMut() -> bool) {
        let t0 = Instant::now();
        while !f() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "waited 60 s for {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

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
    let cfg = broker_toml(
        g.dir.path(),
        &g.quic.to_string(),
        &g.http.to_string(),
        &g.https.to_string(),
    );
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

/// Issue 12, item 2: a broker killed with SIGKILL while submitted jobs run comes
/// back knowing them, and learns what happened while it was away. A process that
/// ended meanwhile: its frontal kept the end and tells it, so its job fails with the
/// real cause. A process that ended while its frontal was restarted too (so nobody
/// kept its end): the helper tells the new frontal what still runs, the frontal
/// tells the broker, and the job fails at once naming its rank and node (not after
/// the 60 s given to silent jobs). The job whose process lives goes on. Nothing is
/// left running.
#[test]
fn a_broker_restart_keeps_live_jobs_and_fails_those_whose_processes_died_meanwhile() {
    let mut g = grid();
    let live = g.submit("exec sleep 3071");
    let held = g.submit("exec sleep 3072");
    let gone = g.submit("exec sleep 3073");
    for id in [&live, &held, &gone] {
        g.until("the jobs to run", || g.status(id)["state"] == "running");
    }
    let pid = |pat: &str| {
        Command::new("pgrep")
            .args(["-x", "-f", pat])
            .output()
            .unwrap()
            .stdout
    };
    g.until("the processes to start", || {
        ["sleep 3071", "sleep 3072", "sleep 3073"]
            .iter()
            .all(|p| !pid(p).is_empty())
    });
    let kill = |pat: &str| {
        assert!(Command::new("pkill")
            .args(["-KILL", "-x", "-f", pat])
            .status()
            .unwrap()
            .success());
    };
    let restart_broker = |g: &mut Grid| {
        let cfg = broker_toml(
            g.dir.path(),
            &g.quic.to_string(),
            &g.http.to_string(),
            &g.https.to_string(),
        );
        g.broker = spawn("qcg-broker", &cfg);
        wait_for(&g.broker.1, "qcg-broker: QUIC on");
    };

    // 1. The broker goes; `held`'s process dies; the broker comes back.
    g.broker.0.kill().unwrap();
    g.broker.0.wait().unwrap();
    kill("sleep 3072");
    g.until("the process to go", || pid("sleep 3072").is_empty());
    std::thread::sleep(Duration::from_millis(300));
    restart_broker(&mut g);
    g.until("the job to fail", || g.status(&held)["state"] == "failed");
    let s = g.status(&held);
    assert_eq!(s["reason"], "was killed by signal 9", "{s}");

    // 2. The broker goes; `gone`'s process dies, and its frontal is restarted (what
    // it kept is lost); the broker comes back.
    let cluster = g.call("GET", &format!("/v1/jobs/{gone}"), "").json()["ranks"][0]["cluster"]
        .as_str()
        .unwrap()
        .to_string();
    g.broker.0.kill().unwrap();
    g.broker.0.wait().unwrap();
    kill("sleep 3073");
    g.until("the process to go", || pid("sleep 3073").is_empty());
    let i = if cluster == "alpha" { 0 } else { 1 };
    let (f, at) = &mut g.frontals[i];
    f.kill().unwrap();
    f.wait().unwrap();
    let at = at.clone();
    let (f, lines) = spawn(
        "qcg-frontal",
        &frontal_toml(g.dir.path(), &cluster, g.quic, &at),
    );
    g.frontals[i].0 = f;
    wait_for(
        &lines,
        &format!("qcg-frontal: cluster {cluster} serving helpers on"),
    );
    restart_broker(&mut g);
    g.until("the job to fail", || g.status(&gone)["state"] == "failed");
    let s = g.status(&gone);
    let reason = s["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("no longer ran when the broker came back")
            && reason.contains(&format!("rank 0 on {cluster}/")),
        "{s}"
    );

    assert_eq!(g.status(&live)["state"], "running");
    assert_eq!(
        g.call("DELETE", &format!("/v1/jobs/{live}"), "").status,
        200
    );
    g.until("the live job's process to stop", || {
        pid("sleep 3071").is_empty()
    });
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

/// Issue 12: a relay proxy that freezes (SIGSTOP) under a running job does not hang
/// it: both ranks notice the silence within the liveness time, and `qcg run` fails
/// naming a rank, long before its own time-out.
#[test]
fn a_frozen_relay_proxy_fails_the_job_naming_the_silent_rank() {
    let dir = grid_ca(&[
        ("broker", "broker"),
        ("frontal", "alpha"),
        ("frontal", "beta"),
        ("helper", "a1"),
        ("helper", "b1"),
        ("proxy", "relay"),
    ]);
    let d = dir.path();
    let mut s = Services(Vec::new());
    let lines = start(
        &mut s,
        "qcg-broker",
        &broker_toml(d, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"),
    );
    let quic: SocketAddr = wait_for(&lines, "qcg-broker: QUIC on").parse().unwrap();
    let tls =
        |n: &str| format!("ca = \"ca/ca.pem\"\ncert = \"ca/{n}.pem\"\nkey = \"ca/{n}.key\"\n");
    let cfg = write(
        d,
        "proxy.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\nbroker = \"{quic}\"\n{}",
            tls("relay")
        ),
    );
    let lines = start(&mut s, "qcg-proxy", &cfg);
    wait_for(&lines, "qcg-proxy: relaying on");
    let proxy = rustix::process::Pid::from_raw(s.0.last().unwrap().id() as i32).unwrap();
    // A closed site and one behind a random-port NAT: only relaying links them.
    for (cluster, node, net) in [
        ("alpha", "a1", "policy = \"closed\"\n"),
        (
            "beta",
            "b1",
            "policy = \"closed\"\nnat = \"random-port\"\npublic_address = \"127.0.0.1\"\n",
        ),
    ] {
        let cfg = write(
            d,
            &format!("frontal-{cluster}.toml"),
            &format!(
                "cluster = \"{cluster}\"\n{net}broker = \"{quic}\"\nlisten = \"127.0.0.1:0\"\n{}",
                tls(cluster)
            ),
        );
        let lines = start(&mut s, "qcg-frontal", &cfg);
        let at = wait_for(
            &lines,
            &format!("qcg-frontal: cluster {cluster} serving helpers on"),
        );
        let lines = start(&mut s, "qcg-helper", &helper_toml(d, node, &at));
        wait_for(&lines, &format!("qcg-helper: node {node} serving"));
    }
    let mut run = Command::new(bin("qcg"))
        .args(["run", "-n", "2", "--timeout", "100", "--helper"])
        .arg(d.join("a1.sock"))
        .arg("--helper")
        .arg(d.join("b1.sock"))
        .arg("--")
        .arg(example("engine_check"))
        .arg("steady")
        .env("QCG_LIVENESS", "3")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = run.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    loop {
        let l = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the ranks never linked");
        if l.contains("steady: linked") {
            break;
        }
    }
    rustix::process::kill_process(proxy, rustix::process::Signal::STOP).unwrap();
    let o = run.wait_with_output().unwrap();
    rustix::process::kill_process(proxy, rustix::process::Signal::CONT).unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(124), "qcg run timed out: {err}");
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("sent nothing for") && err.contains("frozen or unreachable"),
        "{err}"
    );
}

#[test]
fn a_job_started_right_after_a_broker_restart_waits_for_it_and_succeeds() {
    let mut g = grid();
    g.broker.0.kill().unwrap();
    g.broker.0.wait().unwrap();
    let cfg = broker_toml(
        g.dir.path(),
        &g.quic.to_string(),
        &g.http.to_string(),
        &g.https.to_string(),
    );
    g.broker = spawn("qcg-broker", &cfg);
    wait_for(&g.broker.1, "qcg-broker: QUIC on");
    // Before the frontals have found the new broker: the ranks' registration (and
    // `qcg run`'s question to the helpers) are answered `unavailable` for a while.
    std::thread::sleep(Duration::from_millis(300));
    let (ok, err) = g.ring();
    assert!(
        ok,
        "a job started 0.3 s after a broker restart failed: {err}"
    );
}
