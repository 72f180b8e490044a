//! Denial of service by strangers and local users, against the real binaries on
//! loopback, started with a low descriptor limit (`ulimit -n` in the shell that
//! execs them) as a careless site would: idle plain-HTTP connections must not take
//! the broker's HTTPS API down or fill its log, and half-sent frames of one local
//! user must not stop the helper answering another.
//!
//! Needs the workspace's binaries built first (`cargo build --workspace --bins`);
//! the helper test needs root (it runs the flooding user as `nobody`).

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use qcg_grid::client::Client;
use qcg_grid::services::{tls_fields, Cluster, Limits, ServiceGrid};
use qcg_proto::tls::Role;
use qcg_proto::{Request, Response};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
const FLOOD_ENV: &str = "QCG_TEST_DOS_FLOOD";

/// A grid folder whose services log at `warn` (the tests count log lines).
fn services(holders: &[(Role, &str)]) -> ServiceGrid {
    let mut g = ServiceGrid::new().unwrap();
    g.set_log_filter("warn");
    for (role, name) in holders {
        g.issue(*role, name).unwrap();
    }
    g
}

fn nofile(n: u32) -> Limits {
    Limits {
        nofile: Some(n),
        ..Limits::default()
    }
}

fn lines_of(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .count()
}

/// The log of `service` grew by fewer than 100 lines since it had `before` (a
/// flood is summed up, never logged line by line); panics with its first lines.
fn assert_log_quiet(service: &str, log: &Path, before: usize) {
    let added = lines_of(log) - before;
    eprintln!("{service} log: {added} lines added during the flood");
    assert!(
        added < 100,
        "the {service}'s log grew by {added} lines:\n{}",
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Opens up to `n` TCP connections to `addr` and keeps them, sending nothing.
fn idle_flood(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    // Stops at the first connection refused or not taken within 2 s.
    (0..n)
        .map_while(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok())
        .collect()
}

#[test]
fn idle_plain_http_connections_do_not_take_the_https_api_down() {
    let mut g = services(&[(Role::Broker, "broker"), (Role::Client, "alice")]);
    let cfg = format!(
        "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\n{}",
        tls_fields("broker")
    );
    g.start_with("broker", "qcg-broker", &cfg, nofile(256))
        .unwrap();
    g.line("broker", "qcg-broker: QUIC on").unwrap();
    let http = g.addr("broker", "qcg-broker: HTTP API on http://").unwrap();
    let url = format!(
        "https://{}",
        g.line("broker", "qcg-broker: HTTPS API on https://")
            .unwrap()
    );
    let log = g.service("broker").unwrap().log_path().to_path_buf();
    let before = lines_of(&log);

    // More idle connections than the broker has descriptors.
    let flood = idle_flood(http, 600);
    assert!(
        flood.len() >= 300,
        "only {} connections opened",
        flood.len()
    );
    std::thread::sleep(Duration::from_secs(2));

    // The job API still answers its client.
    let client = Client::new(&url, &g.identity("alice").unwrap()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            client.request("GET", "/v1/jobs", Vec::new()),
        )
        .await
    });
    let answer = answer
        .expect("no HTTPS answer within 20 s during the flood")
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");

    // Idle connections are closed by the broker (those it took, within seconds;
    // the others at once): every one of them ends without our doing.
    let t0 = Instant::now();
    let mut open = 0;
    for mut s in flood {
        let left = Duration::from_secs(60).saturating_sub(t0.elapsed());
        s.set_read_timeout(Some(left.max(Duration::from_millis(10))))
            .unwrap();
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            _ => open += 1,
        }
    }
    assert_eq!(open, 0, "{open} idle connections still open after 60 s");
    // And the plain API is back for everyone.
    assert!(http_get(http, "/v1/clusters").starts_with('['));

    assert_log_quiet("broker", &log, before);
}

#[test]
fn the_broker_database_is_private_whatever_the_umask() {
    let mut g = services(&[(Role::Broker, "broker")]);
    let d = g.dir().to_path_buf();
    let broker = |database: &str| {
        format!(
            "listen = \"127.0.0.1:0\"\ndatabase = \"{database}\"\n{}",
            tls_fields("broker")
        )
    };
    // A database left by an older broker, readable by all.
    let old = d.join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("broker.redb"), b"").unwrap();
    std::fs::set_permissions(
        old.join("broker.redb"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let umask = Limits {
        umask: Some(0o022),
        ..Limits::default()
    };
    for (name, database) in [("new", "state/broker.redb"), ("old", "old/broker.redb")] {
        g.start_with(name, "qcg-broker", &broker(database), umask)
            .unwrap();
        g.line(name, "qcg-broker: QUIC on").unwrap();
    }
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.join("state")), 0o700);
    assert_eq!(mode(&d.join("state/broker.redb")), 0o600);
    assert_eq!(mode(&old.join("broker.redb")), 0o600);
    // Nothing else in the folder that others could read.
    for e in std::fs::read_dir(d.join("state")).unwrap() {
        let p = e.unwrap().path();
        assert_eq!(mode(&p) & 0o077, 0, "{} is open to others", p.display());
    }
}

/// The flooding child, run as `nobody`: opens $FLOOD_ENV's count of connections to
/// its socket, sends each the 4-byte header of a 100-byte frame and nothing more,
/// says `FLOODING n`, then holds them until its stdin closes.
#[test]
fn half_frame_flood_child() {
    let Ok(spec) = std::env::var(FLOOD_ENV) else {
        return;
    };
    let (socket, n): (PathBuf, usize) = serde_json::from_str(&spec).unwrap();
    let mut held = Vec::new();
    for _ in 0..n {
        if let Ok(mut s) = UnixStream::connect(&socket) {
            let _ = s.write_all(&100u32.to_be_bytes());
            held.push(s);
        }
    }
    println!("FLOODING {}", held.len());
    std::io::stdout().flush().unwrap();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

#[test]
fn half_frames_of_one_user_do_not_stop_the_helper_answering_another() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs the flooding user as nobody: run it as root"
    );
    let mut g = ServiceGrid::builder()
        .dir_mode(0o755)
        .no_http()
        .no_https()
        .log_filter("warn")
        .cluster(Cluster::new("alpha"))
        .start()
        .unwrap();
    g.issue(Role::Helper, "a1").unwrap();
    let cfg = format!(
        "node = \"a1\"\nfrontal = \"{}\"\nsocket = \"a1.sock\"\nsocket_group = \"{NOBODY}\"\n\
         bind_address = \"127.0.0.1\"\n{}",
        g.frontal("alpha").unwrap(),
        tls_fields("a1")
    );
    let socket = g.socket("a1");
    g.start_with("helper", "qcg-helper", &cfg, nofile(128))
        .unwrap();
    g.line("helper", "qcg-helper: node a1 serving").unwrap();
    let log = g.service("helper").unwrap().log_path().to_path_buf();
    assert!(matches!(
        ask(&socket, &Request::NodeInfo),
        Ok(Response::Node { .. })
    ));
    let before = lines_of(&log);

    // `nobody`, a member of the socket's group, holds 300 half-sent frames: more
    // than the helper has descriptors.
    let mut flood = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "half_frame_flood_child", "--nocapture"])
        .env(FLOOD_ENV, serde_json::to_string(&(&socket, 300)).unwrap())
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(flood.stdout.take().unwrap());
    let flooding = {
        use std::io::BufRead;
        let mut l = String::new();
        loop {
            l.clear();
            if out.read_line(&mut l).unwrap() == 0 {
                break None;
            }
            if let Some(n) = l.trim().strip_prefix("FLOODING ") {
                break Some(n.parse::<usize>().unwrap());
            }
        }
    };
    assert!(flooding.is_some(), "the flooding child did not start");

    // Root, another user, is answered during the flood.
    let answer = ask(&socket, &Request::NodeInfo);
    assert!(
        matches!(answer, Ok(Response::Node { .. })),
        "no answer during the flood: {answer:?}"
    );
    drop(flood.stdin.take());
    let _ = flood.wait();

    assert_log_quiet("helper", &log, before);
}

#[test]
fn a_helper_says_at_start_which_accounts_cannot_run_or_reach_it() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test maps jobs to `nobody`: run it as root"
    );
    let mut g = services(&[(Role::Helper, "a1"), (Role::Helper, "a2")]);
    // Root not allowed, nothing else mapped: no job can run here.
    // `nobody` runs the jobs, but the socket's group is root's (0): its processes,
    // with their primary group only, cannot connect.
    for (node, extra) in [
        ("a1", "[accounts]\ndefault = \"root\"\n"),
        (
            "a2",
            "socket_group = \"0\"\n[accounts]\ndefault = \"nobody\"\n",
        ),
    ] {
        let cfg = format!(
            "node = \"{node}\"\nfrontal = \"127.0.0.1:9\"\nsocket = \"{node}.sock\"\n\
             bind_address = \"127.0.0.1\"\n{}{extra}",
            tls_fields(node)
        );
        g.start(node, "qcg-helper", &cfg).unwrap();
        g.line(node, &format!("qcg-helper: node {node} serving"))
            .unwrap();
    }
    let log = |n: &str| g.log(n);
    assert!(
        log("a1").contains("no account can run a job on this node"),
        "{}",
        log("a1")
    );
    assert!(
        log("a2").contains("jobs of account nobody cannot reach the helper socket"),
        "{}",
        log("a2")
    );
    assert!(!log("a2").contains("no account can run"), "{}", log("a2"));
}
