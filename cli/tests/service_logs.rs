//! What the services say when they start, read from the real binaries: a service
//! whose metrics port is taken stops before it says it serves.
//!
//! Needs the workspace's binaries built first (`cargo build --workspace --bins
//! --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_service_whose_metrics_port_is_taken_stops_before_it_says_it_serves() {
    let dir = grid_ca(&[("frontal", "alpha"), ("helper", "a1"), ("proxy", "relay")]);
    let d = dir.path();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap();
    // The other listeners are free: only the metrics port can stop them.
    let configs = [
        (
            "qcg-proxy",
            format!(
                "listen = \"127.0.0.1:0\"\nbroker = \"127.0.0.1:9\"\nca = \"ca/ca.pem\"\ncert = \"ca/relay.pem\"\nkey = \"ca/relay.key\"\nmetrics_listen = \"{at}\"\n"
            ),
        ),
        (
            "qcg-frontal",
            format!(
                "cluster = \"alpha\"\npolicy = \"open\"\nbroker = \"127.0.0.1:9\"\nlisten = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/alpha.pem\"\nkey = \"ca/alpha.key\"\nmetrics_listen = \"{at}\"\n"
            ),
        ),
        (
            "qcg-helper",
            format!(
                "node = \"a1\"\nfrontal = \"127.0.0.1:9\"\nsocket = \"a1.sock\"\nbind_address = \"127.0.0.1\"\nca = \"ca/ca.pem\"\ncert = \"ca/a1.pem\"\nkey = \"ca/a1.key\"\nmetrics_listen = \"{at}\"\n\n[accounts]\ndefault = \"root\"\nallow_root = true\n"
            ),
        ),
    ];
    for (service, text) in configs {
        let cfg = write(d, &format!("{service}.toml"), &text);
        // Logs at info, the default: whatever the service says at start is seen.
        let mut child = Command::new(bin(service))
            .arg("--config")
            .arg(&cfg)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A service that does not stop is killed (and fails below), never waited
        // for forever.
        let t = Instant::now();
        while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let o = child.wait_with_output().unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert_eq!(
            o.status.code(),
            Some(1),
            "{service} did not stop with status 1:\n{out}{err}"
        );
        assert!(
            err.contains(&format!("cannot serve metrics on {at}"))
                && err.contains("config field `metrics_listen`"),
            "{service}: {err}"
        );
        assert!(
            !out.contains("serving") && !out.contains("relaying on") && !out.contains("started"),
            "{service} said it serves, then stopped:\n{out}"
        );
    }
    drop(taken);
}
