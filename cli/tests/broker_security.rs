//! Attacks on the broker, as a user of the grid would try them, against the real
//! binaries on loopback: a broker, one frontal and one helper as separate processes,
//! certificates issued with `qcg ca`, the HTTPS job API through `qcg` and the
//! client library.
//!
//! Needs the workspace's binaries built first (`cargo build --workspace --bins`).

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{Cluster, Node, ServiceGrid};

use qcg_grid::client::{Answer, Client};
use qcg_proto::tls::Identity;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

struct Grid {
    s: ServiceGrid,
    http: SocketAddr,
    url: String,
}

/// One cluster `alpha` with one node `a1` of 4 slots; `extra` is appended to the
/// broker's config.
fn grid(extra: &str) -> Grid {
    grid_with(extra, "default = \"root\"\nallow_root = true\n")
}

/// As [`grid`], with `accounts` as the helper's `[accounts]` section.
fn grid_with(extra: &str, accounts: &str) -> Grid {
    let s = ServiceGrid::builder()
        .broker_config(extra)
        .accounts(Some(accounts))
        .cluster(Cluster::new("alpha").node(Node::new("a1").slots(4)))
        .cert("client", "alice")
        .cert("client", "bob")
        .cert("admin", "root")
        .start()
        .unwrap();
    let g = Grid {
        http: s.http().unwrap(),
        url: s.url(),
        s,
    };
    g.wait_for_nodes();
    g
}

impl Grid {
    fn ca(&self) -> PathBuf {
        self.s.ca_dir()
    }

    fn wait_for_nodes(&self) {
        wait_until("the node in the topology", || {
            let t: serde_json::Value =
                serde_json::from_str(&http_get(self.http, "/v1/topology")).unwrap();
            t["clusters"][0]["nodes"]
                .as_array()
                .is_some_and(|n| n.len() == 1)
        });
    }

    fn identity(&self, who: &str) -> Identity {
        let ca = self.ca();
        Identity::load(
            &ca.join(format!("{who}.pem")),
            &ca.join(format!("{who}.key")),
            &ca.join("ca.pem"),
        )
        .unwrap()
    }

    /// One request to the HTTPS API as `who`.
    fn call(&self, who: &str, method: &str, path: &str, body: &str) -> Answer {
        let client = Client::new(&self.url, &self.identity(who)).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(client.request(method, path, body.as_bytes().to_vec()))
            .unwrap()
    }

    fn qcg_as(&self, who: &str, args: &[&str]) -> Output {
        Command::new(bin("qcg"))
            .args(args)
            .args(self.s.qcg_args_at(&self.url, who))
            .output()
            .unwrap()
    }

    /// Submits `n` processes of `/bin/sh -c SCRIPT` as `who`; returns the job id.
    fn submit(&self, who: &str, n: u32, script: &str) -> String {
        let a = self.call(who, "POST", "/v1/jobs?workdir=/tmp", &profile(n, script));
        assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
        a.json()["id"].as_str().unwrap().to_string()
    }

    fn state(&self, who: &str, id: &str) -> String {
        let a = self.call(who, "GET", &format!("/v1/jobs/{id}"), "");
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        a.json()["status"]["state"].as_str().unwrap().to_string()
    }
}

fn profile(n: u32, script: &str) -> String {
    let script = script
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        r#"<grmsJob appId="attack"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>{n}</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>/bin/sh</executable>
<arguments><value>-c</value><value>{script}</value></arguments></execution></task></grmsJob>"#
    )
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ids(a: &Answer) -> Vec<String> {
    a.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

/// Issue 11, item 2: a submitter no helper has an account for is refused when it
/// submits, with the reason, instead of at launch; a mapped one runs.
#[test]
fn a_submitter_without_a_local_account_is_refused_at_submission() {
    let g = grid_with(
        "",
        "default = \"\"\nmap = { alice = \"root\" }\nallow_root = true\n",
    );
    g.wait_for_nodes();
    let a = g.call("bob", "POST", "/v1/jobs?workdir=/tmp", &profile(1, "true"));
    let body = String::from_utf8_lossy(&a.body);
    assert_eq!(a.status, 422, "{body}");
    assert!(
        body.contains("do not run jobs of `bob`") && body.contains("alpha/a1"),
        "{body}"
    );
    assert!(ids(&g.call("root", "GET", "/v1/jobs", "")).is_empty());
    let id = g.submit("alice", 1, "true");
    wait_until("alice's job done", || g.state("alice", &id) == "succeeded");
    // The plain HTTP view does not list who may submit.
    assert!(!http_get(g.http, "/v1/topology").contains("alice"));
}

/// Issue 11, item 1: another client neither sees, reads nor cancels a job; an admin
/// does; the owner does.
#[test]
fn a_job_belongs_to_its_submitter_and_admins() {
    let g = grid("");
    let id = g.submit("alice", 1, "echo secret-of-alice; exec sleep 3023");
    wait_until("alice's job running", || g.state("alice", &id) == "running");
    let out = format!("/v1/jobs/{id}/output?from=0&wait=10");
    wait_until("alice's output", || {
        let a = g.call("alice", "GET", &out, "");
        String::from_utf8_lossy(&a.body).contains("secret-of-alice")
    });

    // bob: not in his list, and 404 for status, output and cancel, as for a job that
    // does not exist.
    assert!(ids(&g.call("bob", "GET", "/v1/jobs", "")).is_empty());
    let none = g.call("bob", "GET", "/v1/jobs/job-00000000", "");
    for (method, path) in [
        ("GET", format!("/v1/jobs/{id}")),
        ("GET", out.clone()),
        ("DELETE", format!("/v1/jobs/{id}")),
    ] {
        let a = g.call("bob", method, &path, "");
        assert_eq!(a.status, 404, "{method} {path}");
        let msg = a.error_message();
        assert_eq!(
            msg.replace(&id, "ID"),
            none.error_message().replace("job-00000000", "ID"),
            "{method} {path}: the answer must not tell the job exists"
        );
        assert!(!String::from_utf8_lossy(&a.body).contains("secret-of-alice"));
    }
    let o = g.qcg_as("bob", &["cancel", &id]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("no job `{id}`")));
    // The job runs on.
    assert_eq!(g.state("alice", &id), "running");

    // The admin sees every job, reads its output and its owner.
    let all = g.call("root", "GET", "/v1/jobs", "");
    assert_eq!(ids(&all), vec![id.clone()]);
    assert_eq!(all.json()[0]["owner"], "alice");
    let a = g.call("root", "GET", &out, "");
    assert!(String::from_utf8_lossy(&a.body).contains("secret-of-alice"));
    // bob's own job is his; alice does not see it.
    let bobs = g.submit("bob", 1, "exit 0");
    assert!(!ids(&g.call("alice", "GET", "/v1/jobs", "")).contains(&bobs));
    assert_eq!(
        ids(&g.call("bob", "GET", "/v1/jobs", "")),
        vec![bobs.clone()]
    );
    assert_eq!(ids(&g.call("root", "GET", "/v1/jobs", "")).len(), 2);

    // The owner cancels through `qcg`; an admin could too.
    let o = g.qcg_as("alice", &["cancel", &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(g.state("root", &id), "cancelled");
}

/// Issue 11, item 8: addresses are not on plain HTTP; over HTTPS a client sees only
/// its own jobs' processes.
#[test]
fn plain_http_serves_only_aggregates() {
    let g = grid("");
    let mut s = std::net::TcpStream::connect(g.http).unwrap();
    use std::io::{Read, Write};
    write!(
        s,
        "GET /v1/processes HTTP/1.1\r\nHost: qcg\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
    let clusters: serde_json::Value =
        serde_json::from_str(&http_get(g.http, "/v1/clusters")).unwrap();
    assert_eq!(clusters[0]["name"], "alpha");
    assert_eq!(clusters[0]["processes"], 0);
    assert!(clusters[0].get("public_address").is_none(), "{clusters}");
    assert_eq!(metric(g.http, "qcg_broker_clusters"), 1);
    for who in ["alice", "root"] {
        let a = g.call(who, "GET", "/v1/processes", "");
        assert_eq!(a.status, 200);
        assert_eq!(a.json(), serde_json::json!([]));
    }
    // A frontal's certificate is no caller.
    let a = g.call("alpha", "GET", "/v1/processes", "");
    assert_eq!(a.status, 403);
    assert!(
        a.error_message().contains("client certificate"),
        "{}",
        a.error_message()
    );
    drop(g);
}

/// Issue 11, item 5: one job printing a flood keeps the broker's output under its
/// per-job cap, and the reader is told how much was dropped.
#[test]
fn a_job_output_flood_is_capped_and_the_reader_told() {
    let cap = 1 << 20;
    let g = grid(&format!("output_cap_bytes = {cap}\n"));
    // 2,000 lines of 16 KB: 32 MB, then a last short line.
    let id = g.submit(
        "alice",
        1,
        "yes $(head -c 16383 /dev/zero | tr '\\0' x) | head -n 2000; echo the-end",
    );
    wait_until("the flood to end", || {
        let a = g.call("alice", "GET", &format!("/v1/jobs/{id}"), "");
        a.json()["finished"] == true
    });
    let held = metric(g.http, "qcg_broker_output_bytes");
    assert!(held > 0 && held <= cap, "{held}");
    let job = g.call("alice", "GET", &format!("/v1/jobs/{id}"), "").json();
    assert_eq!(job["status"]["state"], "succeeded", "{job}");
    assert_eq!(job["lines"], 2001, "{}", job["lines"]);
    let dropped = job["dropped_lines"].as_u64().unwrap();
    assert!(dropped > 1900, "{dropped}");
    assert!(job["dropped_bytes"].as_u64().unwrap() >= dropped * 16383);
    // A reader from the start is told what it missed, then gets the newest lines.
    let page = g
        .call("alice", "GET", &format!("/v1/jobs/{id}/output?from=0"), "")
        .json();
    assert_eq!(page["skipped"], dropped, "{}", page["skipped"]);
    assert_eq!(page["dropped_lines"], dropped);
    let lines = page["lines"].as_array().unwrap();
    assert_eq!(lines.last().unwrap()["text"], "the-end");
    assert_eq!(page["next"], 2001);
}

/// Issue 12, item 1: a broker killed with SIGKILL and started again still knows its
/// jobs, their owners and states (the slots they hold are checked in the job
/// table's own tests).
#[test]
fn jobs_survive_a_broker_killed_with_sigkill() {
    let mut g = grid("");
    let id = g.submit("alice", 2, "echo started; exec sleep 3031");
    // The job is running as soon as its first rank is; wait for every rank too, so
    // that nothing changes between the snapshot and the kill.
    let mut before = serde_json::Value::Null;
    wait_until("alice's job and both ranks running", || {
        before = g.call("alice", "GET", &format!("/v1/jobs/{id}"), "").json();
        before["status"]["state"] == "running"
            && before["ranks"]
                .as_array()
                .is_some_and(|r| r.iter().all(|r| r["state"] == "running"))
    });

    // SIGKILL: no chance to save anything on the way out.
    g.s.restart("broker").unwrap();
    g.url = format!(
        "https://{}",
        g.s.line("broker", "qcg-broker: HTTPS API on https://")
            .unwrap()
    );

    let after = g.call("alice", "GET", &format!("/v1/jobs/{id}"), "").json();
    assert_eq!(after["status"], before["status"], "{after}");
    assert_eq!(after["owner"], "alice");
    assert_eq!(after["ranks"], before["ranks"], "{after}");
    let o = g.qcg_as("alice", &["status", &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(": running"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // Ownership survives too.
    assert_eq!(
        g.call("bob", "GET", &format!("/v1/jobs/{id}"), "").status,
        404
    );
    assert_eq!(
        ids(&g.call("root", "GET", "/v1/jobs", "")),
        vec![id.clone()]
    );
    // The processes are still there; stop them (the frontal is not reconnected).
    let _ = Command::new("pkill")
        .args(["-x", "-f", "sleep 3031"])
        .status();
}
