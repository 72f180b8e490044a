//! The grid of service processes itself: a service that does not come up is named
//! with what it logged, and dropping the grid stops every process it started and
//! removes its folder.
//!
//! Needs the workspace's binaries built first (`cargo build --workspace --bins`).

#![allow(clippy::unwrap_used)]

use qcg_grid::services::{tls_fields, Cluster, Node, ServiceGrid};
use std::time::{Duration, Instant};

/// Whether `pid` is a live process running `name` (a pid reused by another
/// program does not count).
fn runs(pid: u32, name: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(name))
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn a_service_that_does_not_start_is_named_with_its_log() {
    let mut g = ServiceGrid::new().unwrap();
    // No certificate was issued for `ghost`.
    let config = format!("listen = \"127.0.0.1:0\"\n{}", tls_fields("ghost"));
    g.start("broker", "qcg-broker", &config).unwrap();
    let e = g.line("broker", "qcg-broker: QUIC on").unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("broker did not print `qcg-broker: QUIC on`"),
        "{text}"
    );
    assert!(text.contains("it ended"), "{text}");
    assert!(
        text.contains("ghost.pem"),
        "the broker's own error is shown: {text}"
    );
}

#[test]
fn dropping_the_grid_stops_its_services_and_removes_its_folder() {
    let g = ServiceGrid::builder()
        .cluster(Cluster::new("alpha").node(Node::new("a1")))
        .wait_for_topology()
        .start()
        .unwrap();
    let names = [
        ("broker", "qcg-broker"),
        ("frontal-alpha", "qcg-frontal"),
        ("helper-a1", "qcg-helper"),
    ];
    let pids: Vec<(u32, &str)> = names
        .iter()
        .map(|(service, binary)| (g.service(service).unwrap().pid(), *binary))
        .collect();
    for (pid, binary) in &pids {
        assert!(runs(*pid, binary), "{binary} ({pid}) is not running");
    }
    let dir = g.dir().to_path_buf();
    assert!(g.socket("a1").exists());
    drop(g);
    let t0 = Instant::now();
    while pids.iter().any(|(pid, binary)| runs(*pid, binary)) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "still running after the drop: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!dir.exists(), "{} is left behind", dir.display());
}
