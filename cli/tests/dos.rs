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

use qcg_cli::client::Client;
use qcg_proto::tls::Identity;
use qcg_proto::{Request, Response};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
const FLOOD_ENV: &str = "QCG_TEST_DOS_FLOOD";

/// Starts `name --config cfg` under `ulimit -n nofile`, its log (stderr, at `warn`)
/// going to `log`; its stdout lines on the channel.
fn start_limited(
    services: &mut Services,
    name: &str,
    cfg: &Path,
    nofile: u32,
    log: &Path,
) -> std::sync::mpsc::Receiver<String> {
    start_in_shell(services, name, cfg, &format!("ulimit -n {nofile}"), log)
}

/// Starts `name --config cfg` after the shell command `setup`, its log (the
/// services log on stdout, at `warn` here) copied line by line to `log`; its stdout
/// lines on the channel too.
fn start_in_shell(
    services: &mut Services,
    name: &str,
    cfg: &Path,
    setup: &str,
    log: &Path,
) -> std::sync::mpsc::Receiver<String> {
    let mut child: Child = Command::new("sh")
        .arg("-c")
        .arg(format!("{setup} && exec \"$0\" --config \"$1\""))
        .arg(bin(name))
        .arg(cfg)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    services.0.push(child);
    let mut file = std::fs::File::create(log).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = writeln!(file, "{l}");
            let _ = tx.send(l);
        }
    });
    rx
}

fn lines_of(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .count()
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
    let dir = grid_ca(&[("broker", "broker"), ("client", "alice")]);
    let d = dir.path();
    let cfg = write(
        d,
        "broker.toml",
        "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\n\
         ca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n",
    );
    let log = d.join("broker.log");
    let mut services = Services(Vec::new());
    let lines = start_limited(&mut services, "qcg-broker", &cfg, 256, &log);
    wait_for(&lines, "qcg-broker: QUIC on");
    let http: SocketAddr = wait_for(&lines, "qcg-broker: HTTP API on http://")
        .parse()
        .unwrap();
    let url = format!(
        "https://{}",
        wait_for(&lines, "qcg-broker: HTTPS API on https://")
    );
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
    let ca = d.join("ca");
    let id = Identity::load(
        &ca.join("alice.pem"),
        &ca.join("alice.key"),
        &ca.join("ca.pem"),
    )
    .unwrap();
    let client = Client::new(&url, &id).unwrap();
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

    let added = lines_of(&log) - before;
    eprintln!("broker log: {added} lines added during the flood");
    assert!(
        added < 100,
        "the broker's log grew by {added} lines:\n{}",
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_broker_database_is_private_whatever_the_umask() {
    let dir = grid_ca(&[("broker", "broker")]);
    let d = dir.path();
    let cfg = write(
        d,
        "broker.toml",
        "listen = \"127.0.0.1:0\"\ndatabase = \"state/broker.redb\"\nca = \"ca/ca.pem\"\n\
         cert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n",
    );
    // A database left by an older broker, readable by all.
    let old = d.join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("broker.redb"), b"").unwrap();
    std::fs::set_permissions(
        old.join("broker.redb"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let old_cfg = write(
        d,
        "old.toml",
        "listen = \"127.0.0.1:0\"\ndatabase = \"old/broker.redb\"\nca = \"ca/ca.pem\"\n\
         cert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n",
    );
    let mut services = Services(Vec::new());
    for (cfg, log) in [(&cfg, "new.log"), (&old_cfg, "old.log")] {
        let lines = start_in_shell(&mut services, "qcg-broker", cfg, "umask 022", &d.join(log));
        wait_for(&lines, "qcg-broker: QUIC on");
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

/// One request on a new connection; the answer.
fn ask(socket: &Path, req: &Request) -> std::io::Result<Response> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.write_all(&qcg_proto::frame::encode(req).unwrap())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((r, _)) = qcg_proto::frame::decode::<Response>(&buf).unwrap() {
            return Ok(r);
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn half_frames_of_one_user_do_not_stop_the_helper_answering_another() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs the flooding user as nobody: run it as root"
    );
    let dir = grid_ca(&[("broker", "broker"), ("frontal", "alpha"), ("helper", "a1")]);
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut services = Services(Vec::new());
    let cfg = write(
        d,
        "broker.toml",
        "listen = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n",
    );
    let lines = start(&mut services, "qcg-broker", &cfg);
    let broker = wait_for(&lines, "qcg-broker: QUIC on");
    let cfg = write(
        d,
        "frontal.toml",
        &format!(
            "cluster = \"alpha\"\npolicy = \"open\"\nbroker = \"{broker}\"\nlisten = \"127.0.0.1:0\"\n\
             ca = \"ca/ca.pem\"\ncert = \"ca/alpha.pem\"\nkey = \"ca/alpha.key\"\n"
        ),
    );
    let lines = start(&mut services, "qcg-frontal", &cfg);
    let at = wait_for(&lines, "qcg-frontal: cluster alpha serving helpers on");
    let socket = d.join("a1.sock");
    let cfg = write(
        d,
        "helper.toml",
        &format!(
            "node = \"a1\"\nfrontal = \"{at}\"\nsocket = \"a1.sock\"\nsocket_group = \"{NOBODY}\"\n\
             bind_address = \"127.0.0.1\"\nca = \"ca/ca.pem\"\ncert = \"ca/a1.pem\"\nkey = \"ca/a1.key\"\n"
        ),
    );
    let log = d.join("helper.log");
    let lines = start_limited(&mut services, "qcg-helper", &cfg, 128, &log);
    wait_for(&lines, "qcg-helper: node a1 serving");
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

    let added = lines_of(&log) - before;
    eprintln!("helper log: {added} lines added during the flood");
    assert!(
        added < 100,
        "the helper's log grew by {added} lines:\n{}",
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_helper_says_at_start_which_accounts_cannot_run_or_reach_it() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test maps jobs to `nobody`: run it as root"
    );
    let dir = grid_ca(&[("helper", "a1"), ("helper", "a2")]);
    let d = dir.path();
    let mut services = Services(Vec::new());
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
        let cfg = write(
            d,
            &format!("{node}.toml"),
            &format!(
                "node = \"{node}\"\nfrontal = \"127.0.0.1:9\"\nsocket = \"{node}.sock\"\n\
                 bind_address = \"127.0.0.1\"\nca = \"ca/ca.pem\"\ncert = \"ca/{node}.pem\"\n\
                 key = \"ca/{node}.key\"\n{extra}"
            ),
        );
        let lines = start_in_shell(&mut services, "qcg-helper", &cfg, "true", &d.join(node));
        wait_for(&lines, &format!("qcg-helper: node {node} serving"));
    }
    let log = |n: &str| std::fs::read_to_string(d.join(n)).unwrap();
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
