//! Finished jobs kept long (`job_record_keep_secs`) stay in the broker's database,
//! not in its memory: a real broker started on a database of 20,000 finished jobs
//! (written through the broker's own store, as a broker that ran them would have)
//! takes no more memory than one started on a database of one, and `qcg status`,
//! `qcg jobs` and `/v1/jobs` still show them, to their owner only.
//!
//! Needs the workspace's binaries built first (`cargo build --workspace --bins
//! --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{tls_fields, ServiceGrid};
use qcg_proto::tls::Role;

use qcg_broker::jobs::JobRecord;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// A finished job of `owner`, decided two days ago, as the broker stores it.
fn record(id: &str, owner: &str, seq: u64) -> JobRecord {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let json = serde_json::json!({
        "id": id,
        "owner": owner,
        "app_id": format!("app-{id}"),
        "profile_bytes": 2000,
        "decided_unix_ms": now - 2 * 24 * 3600 * 1000,
        "secret_hex": "ab".repeat(32),
        "workdir": null,
        "state": {"state": "failed", "rank": 3, "reason": format!("rank 3 on alpha/a1 exited with status 1: {}", "x".repeat(400))},
        "ranks": vec![serde_json::json!({"state": "lost"}); 8],
        "mapping": null,
        "released": true,
        "lines_printed": 12,
        "dropped_bytes": 300,
        "seq": seq,
    });
    serde_json::from_value(json).unwrap()
}

fn fill(db: &Path, from: usize, n: usize) {
    let mut store = qcg_broker::store::Store::open(db).unwrap();
    let records: Vec<JobRecord> = (from..from + n)
        .map(|i| record(&format!("old-{i}"), "alice", i as u64))
        .collect();
    for chunk in records.chunks(2000) {
        store.save(chunk).unwrap();
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// `qcg ARGS` as `who` against the broker at `url`: (success, stdout + stderr).
fn qcg_as(g: &ServiceGrid, url: &str, who: &str, args: &[&str]) -> (bool, String) {
    let o = Command::new(bin("qcg"))
        .args(args)
        .args(g.qcg_args_at(url, who))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

/// Starts the broker of `g` on the database (stopping the one before); returns
/// its resident memory once started, its URL and how many jobs `/v1/jobs` lists
/// to alice.
fn broker(g: &mut ServiceGrid) -> (u64, String, usize) {
    let cfg = format!(
        "listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\n{}database = \"state/broker.redb\"\n\
         job_record_keep_secs = 2592000\n",
        tls_fields("broker")
    );
    g.start("broker", "qcg-broker", &cfg).unwrap();
    let url = format!(
        "https://{}",
        g.line("broker", "qcg-broker: HTTPS API on https://")
            .unwrap()
    );
    let rss = rss_kib(g.service("broker").unwrap().pid());
    let client = qcg_grid::client::Client::new(&url, &g.identity("alice").unwrap()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let a = rt
        .block_on(client.request("GET", "/v1/jobs", Vec::new()))
        .unwrap();
    assert_eq!(a.status, 200);
    let n = a.json().as_array().unwrap().len();
    (rss, url, n)
}

#[test]
fn finished_jobs_stay_in_the_database_and_are_still_shown() {
    let mut g = ServiceGrid::new().unwrap();
    for (role, name) in [
        (Role::Broker, "broker"),
        (Role::Client, "alice"),
        (Role::Client, "bob"),
    ] {
        g.issue(role, name).unwrap();
    }
    let d = g.dir().to_path_buf();
    let d = d.as_path();
    let db = d.join("state/broker.redb");

    fill(&db, 0, 1);
    let (rss_one, _, n) = broker(&mut g);
    assert_eq!(n, 1);
    g.kill("broker").unwrap();

    fill(&db, 1, 20_000);
    let (rss_many, url, n) = broker(&mut g);
    println!(
        "broker RSS after start: {} KiB on 1 finished job, {} KiB on 20,001 (database {} KiB)",
        rss_one,
        rss_many,
        std::fs::metadata(&db).unwrap().len() / 1024
    );
    assert_eq!(n, 20_001, "/v1/jobs lists every kept job");

    // `qcg status` of an old finished job, after the restart.
    let (ok, out) = qcg_as(&g, &url, "alice", &["status", "old-12345"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("old-12345") && out.contains("exited with status 1"),
        "{out}"
    );
    // Not to another client.
    let (ok, out) = qcg_as(&g, &url, "bob", &["status", "old-12345"]);
    assert!(!ok, "bob saw alice's job: {out}");
    let (ok, out) = qcg_as(&g, &url, "bob", &["jobs"]);
    assert!(ok && !out.contains("old-"), "{out}");
    let (ok, out) = qcg_as(&g, &url, "alice", &["jobs"]);
    assert!(ok && out.contains("old-19999"), "{out}");

    // 20,000 jobs in memory took 75 MiB more on the code before (91 MiB against 15);
    // kept in the database, the difference is the database's own cache, bounded.
    assert!(
        rss_many < rss_one + 16 * 1024,
        "RSS grew from {rss_one} KiB to {rss_many} KiB with 20,000 finished jobs"
    );
}
