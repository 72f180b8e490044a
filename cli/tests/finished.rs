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
fn qcg_as(dir: &Path, url: &str, who: &str, args: &[&str]) -> (bool, String) {
    let ca = dir.join("ca");
    let o = Command::new(bin("qcg"))
        .args(args)
        .arg("--broker")
        .arg(url)
        .arg("--cert")
        .arg(ca.join(format!("{who}.pem")))
        .arg("--key")
        .arg(ca.join(format!("{who}.key")))
        .arg("--ca")
        .arg(ca.join("ca.pem"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

/// Starts the broker on the database; returns it (stopped when dropped), its
/// resident memory once started, its URL and how many jobs `/v1/jobs` lists to
/// alice.
fn broker(dir: &Path) -> (Services, u64, String, usize) {
    let cfg = write(
        dir,
        "broker.toml",
        "listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\n\
         cert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\ndatabase = \"state/broker.redb\"\n\
         job_record_keep_secs = 2592000\n",
    );
    let mut s = Services(Vec::new());
    let lines = start(&mut s, "qcg-broker", &cfg);
    let url = format!(
        "https://{}",
        wait_for(&lines, "qcg-broker: HTTPS API on https://")
    );
    let rss = rss_kib(s.0[0].id());
    let ca = dir.join("ca");
    let id = qcg_proto::tls::Identity::load(
        &ca.join("alice.pem"),
        &ca.join("alice.key"),
        &ca.join("ca.pem"),
    )
    .unwrap();
    let client = qcg_cli::client::Client::new(&url, &id).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let a = rt
        .block_on(client.request("GET", "/v1/jobs", Vec::new()))
        .unwrap();
    assert_eq!(a.status, 200);
    let n = a.json().as_array().unwrap().len();
    (s, rss, url, n)
}

#[test]
fn finished_jobs_stay_in_the_database_and_are_still_shown() {
    let dir = grid_ca(&[("broker", "broker"), ("client", "alice"), ("client", "bob")]);
    let d = dir.path();
    let db = d.join("state/broker.redb");

    fill(&db, 0, 1);
    let (one, rss_one, _, n) = broker(d);
    assert_eq!(n, 1);
    drop(one);

    fill(&db, 1, 20_000);
    let (_many, rss_many, url, n) = broker(d);
    println!(
        "broker RSS after start: {} KiB on 1 finished job, {} KiB on 20,001 (database {} KiB)",
        rss_one,
        rss_many,
        std::fs::metadata(&db).unwrap().len() / 1024
    );
    assert_eq!(n, 20_001, "/v1/jobs lists every kept job");

    // `qcg status` of an old finished job, after the restart.
    let (ok, out) = qcg_as(d, &url, "alice", &["status", "old-12345"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("old-12345") && out.contains("exited with status 1"),
        "{out}"
    );
    // Not to another client.
    let (ok, out) = qcg_as(d, &url, "bob", &["status", "old-12345"]);
    assert!(!ok, "bob saw alice's job: {out}");
    let (ok, out) = qcg_as(d, &url, "bob", &["jobs"]);
    assert!(ok && !out.contains("old-"), "{out}");
    let (ok, out) = qcg_as(d, &url, "alice", &["jobs"]);
    assert!(ok && out.contains("old-19999"), "{out}");

    // 20,000 jobs in memory took 75 MiB more on the code before (91 MiB against 15);
    // kept in the database, the difference is the database's own cache, bounded.
    assert!(
        rss_many < rss_one + 16 * 1024,
        "RSS grew from {rss_one} KiB to {rss_many} KiB with 20,000 finished jobs"
    );
}
