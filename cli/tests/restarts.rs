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
use qcg_grid::services::{accounts_here, tls_fields, Cluster, Node, ServiceGrid};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn broker_toml(quic: &str, http: &str, https: &str) -> String {
    format!(
        "listen = \"{quic}\"\nhttp_listen = \"{http}\"\nhttps_listen = \"{https}\"\n{}",
        tls_fields("broker")
    )
}

fn frontal_toml(cluster: &str, broker: SocketAddr, listen: &str) -> String {
    format!(
        "cluster = \"{cluster}\"\npolicy = \"open\"\nbroker = \"{broker}\"\nlisten = \"{listen}\"\n{}",
        tls_fields(cluster)
    )
}

struct Grid {
    s: ServiceGrid,
    quic: SocketAddr,
    http: SocketAddr,
    https: SocketAddr,
}

fn grid() -> Grid {
    let s = ServiceGrid::builder()
        .cluster(Cluster::new("alpha").node(Node::new("a1")))
        .cluster(Cluster::new("beta").node(Node::new("b1")))
        .cert("client", "alice")
        .start()
        .unwrap();
    Grid {
        quic: s.quic().unwrap(),
        http: s.http().unwrap(),
        https: s.https().unwrap(),
        s,
    }
}

impl Grid {
    fn kill_broker(&mut self) {
        self.s.kill("broker").unwrap();
    }

    /// Starts the broker again on the same addresses.
    fn restart_broker(&mut self) {
        let cfg = broker_toml(
            &self.quic.to_string(),
            &self.http.to_string(),
            &self.https.to_string(),
        );
        self.s.start("broker", "qcg-broker", &cfg).unwrap();
        self.s.line("broker", "qcg-broker: QUIC on").unwrap();
    }

    /// Kills the frontal of `cluster` and starts it again on the same address.
    fn restart_frontal(&mut self, cluster: &str) {
        let name = format!("frontal-{cluster}");
        let at = self.s.frontal(cluster).unwrap();
        self.s.kill(&name).unwrap();
        self.s
            .start(&name, "qcg-frontal", &frontal_toml(cluster, self.quic, &at))
            .unwrap();
        self.s
            .line(
                &name,
                &format!("qcg-frontal: cluster {cluster} serving helpers on"),
            )
            .unwrap();
    }
}

impl Grid {
    /// One request to the HTTPS job API as the client `alice`.
    fn call(&self, method: &str, path: &str, body: &str) -> qcg_grid::client::Answer {
        let id = self.s.identity("alice").unwrap();
        let client =
            qcg_grid::client::Client::new(&format!("https://{}", self.https), &id).unwrap();
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
        self.s.socket(node)
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
        let http = self.http;
        loop {
            if let Ok(body) = std::panic::catch_unwind(|| http_get(http, "/v1/clusters")) {
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
    g.kill_broker();
    g.restart_broker();
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
    g.restart_frontal("alpha");
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
    // 1. The broker goes; `held`'s process dies; the broker comes back.
    g.kill_broker();
    kill("sleep 3072");
    g.until("the process to go", || pid("sleep 3072").is_empty());
    std::thread::sleep(Duration::from_millis(300));
    g.restart_broker();
    g.until("the job to fail", || g.status(&held)["state"] == "failed");
    let s = g.status(&held);
    assert_eq!(s["reason"], "was killed by signal 9", "{s}");

    // 2. The broker goes; `gone`'s process dies, and its frontal is restarted (what
    // it kept is lost); the broker comes back.
    let cluster = g.call("GET", &format!("/v1/jobs/{gone}"), "").json()["ranks"][0]["cluster"]
        .as_str()
        .unwrap()
        .to_string();
    g.kill_broker();
    kill("sleep 3073");
    g.until("the process to go", || pid("sleep 3073").is_empty());
    g.restart_frontal(&cluster);
    g.restart_broker();
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
    let all = [
        ("helper", "helper-a1"),
        ("helper", "helper-b1"),
        ("frontal", "frontal-alpha"),
        ("frontal", "frontal-beta"),
        ("broker", "broker"),
    ];
    for (what, name) in all {
        g.s.signal(name, sig).unwrap();
        let status = g.s.wait(name, Duration::from_secs(60)).unwrap();
        let status = status.unwrap_or_else(|| panic!("the {what} did not stop"));
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
    let mut g = ServiceGrid::builder().start().unwrap();
    g.start_proxy("relay", "").unwrap();
    let proxy =
        rustix::process::Pid::from_raw(g.service("proxy-relay").unwrap().pid() as i32).unwrap();
    // A closed site and one behind a random-port NAT: only relaying links them.
    let nat = "nat = \"random-port\"\npublic_address = \"127.0.0.1\"";
    for c in [
        Cluster::new("alpha").policy("closed").node(Node::new("a1")),
        Cluster::new("beta")
            .policy("closed")
            .frontal_config(nat)
            .node(Node::new("b1")),
    ] {
        g.start_cluster(&c, Some(&accounts_here())).unwrap();
    }
    let d = g.dir();
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
    g.kill_broker();
    g.restart_broker();
    // Before the frontals have found the new broker: the ranks' registration (and
    // `qcg run`'s question to the helpers) are answered `unavailable` for a while.
    std::thread::sleep(Duration::from_millis(300));
    let (ok, err) = g.ring();
    assert!(
        ok,
        "a job started 0.3 s after a broker restart failed: {err}"
    );
}
