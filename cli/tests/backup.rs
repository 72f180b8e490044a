//! Online backup of the broker's database (issue 22, part 5): a running broker with
//! jobs in it (one finished, one running) is backed up through the HTTPS API by an
//! admin while it keeps taking jobs; a new broker started on the copy shows the jobs
//! of the copy and not the one submitted after it. A client certificate is refused.
//!
//! Real binaries on loopback; needs the workspace's binaries built first.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn broker_toml(dir: &Path, name: &str, database: &str) -> std::path::PathBuf {
    write(
        dir,
        name,
        &format!(
            "listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\ndatabase = \"{database}\"\n\
             ca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n"
        ),
    )
}

/// One request to the HTTPS job API at `https` as the holder of `who`'s certificate.
fn call(
    dir: &Path,
    https: &str,
    who: &str,
    method: &str,
    path: &str,
    body: &str,
) -> qcg_cli::client::Answer {
    let ca = dir.join("ca");
    let id = qcg_proto::tls::Identity::load(
        &ca.join(format!("{who}.pem")),
        &ca.join(format!("{who}.key")),
        &ca.join("ca.pem"),
    )
    .unwrap();
    let client = qcg_cli::client::Client::new(&format!("https://{https}"), &id).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(client.request(method, path, body.as_bytes().to_vec()))
        .unwrap()
}

fn submit(dir: &Path, https: &str, script: &str) -> String {
    let xml = format!(
        r#"<grmsJob appId="b"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>1</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>/bin/sh</executable>
<arguments><value>-c</value><value>{script}</value></arguments></execution></task></grmsJob>"#
    );
    let a = call(dir, https, "alice", "POST", "/v1/jobs?workdir=/tmp", &xml);
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    a.json()["id"].as_str().unwrap().to_string()
}

fn state(dir: &Path, https: &str, id: &str) -> String {
    let a = call(dir, https, "alice", "GET", &format!("/v1/jobs/{id}"), "");
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    a.json()["status"]["state"].as_str().unwrap().to_string()
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "waited 60 s for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn https_of(lines: &mpsc::Receiver<String>) -> String {
    wait_for(lines, "qcg-broker: HTTPS API on https://")
}

#[test]
fn a_running_broker_is_backed_up_and_a_new_one_restored_from_the_copy_sees_its_jobs() {
    let dir = grid_ca(&[
        ("broker", "broker"),
        ("frontal", "alpha"),
        ("helper", "a1"),
        ("client", "alice"),
        ("admin", "ops"),
    ]);
    let d = dir.path();
    let mut s = Services(Vec::new());
    let lines = start(
        &mut s,
        "qcg-broker",
        &broker_toml(d, "broker.toml", "state/broker.redb"),
    );
    let quic = wait_for(&lines, "qcg-broker: QUIC on");
    let https = https_of(&lines);
    let fr = write(
        d,
        "frontal.toml",
        &format!("cluster = \"alpha\"\npolicy = \"open\"\nbroker = \"{quic}\"\nlisten = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/alpha.pem\"\nkey = \"ca/alpha.key\"\n"),
    );
    let fl = start(&mut s, "qcg-frontal", &fr);
    let at = wait_for(&fl, "qcg-frontal: cluster alpha serving helpers on");
    let he = write(
        d,
        "helper.toml",
        &format!("node = \"a1\"\nfrontal = \"{at}\"\nsocket = \"a1.sock\"\nbind_address = \"127.0.0.1\"\nca = \"ca/ca.pem\"\ncert = \"ca/a1.pem\"\nkey = \"ca/a1.key\"\n\n[accounts]\ndefault = \"root\"\nallow_root = true\n"),
    );
    let hl = start(&mut s, "qcg-helper", &he);
    wait_for(&hl, "qcg-helper: node a1 serving");
    // Jobs are placed on the nodes the frontal reported.
    until("node a1 in the broker's topology", || {
        String::from_utf8_lossy(&call(d, &https, "alice", "GET", "/v1/topology", "").body)
            .contains("\"a1\"")
    });

    let done = submit(d, &https, "true");
    until("the first job to succeed", || {
        state(d, &https, &done) == "succeeded"
    });
    let running = submit(d, &https, "sleep 600");
    until("the second job to run", || {
        state(d, &https, &running) == "running"
    });

    // A client may not take the database (it holds every job's secret).
    let refused = call(d, &https, "alice", "GET", "/v1/admin/backup", "");
    assert_eq!(refused.status, 403);
    assert!(
        refused.error_message().contains("admin"),
        "{}",
        refused.error_message()
    );

    let copy = call(d, &https, "ops", "GET", "/v1/admin/backup", "");
    assert_eq!(copy.status, 200, "{}", copy.error_message());
    std::fs::write(d.join("restored.redb"), &copy.body).unwrap();
    // The broker goes on while and after it is copied; the next job is not in the copy.
    let after = submit(d, &https, "true");
    until("the job after the backup to succeed", || {
        state(d, &https, &after) == "succeeded"
    });
    assert!(
        !std::fs::read_dir(d.join("state")).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("backup")),
        "the temporary copy is removed"
    );
    drop(s);

    // A new broker (the old one and its grid stopped) on the copy.
    let mut s = Services(Vec::new());
    let lines = start(
        &mut s,
        "qcg-broker",
        &broker_toml(d, "restored.toml", "restored.redb"),
    );
    let https = https_of(&lines);
    let list = call(d, &https, "ops", "GET", "/v1/jobs", "");
    assert_eq!(list.status, 200);
    let jobs = list.json();
    let ids: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&done.as_str()), "{ids:?}");
    assert!(ids.contains(&running.as_str()), "{ids:?}");
    assert!(
        !ids.contains(&after.as_str()),
        "{ids:?}: taken after the copy"
    );
    assert_eq!(state(d, &https, &done), "succeeded");
}
