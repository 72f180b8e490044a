//! What the services say when they start and what their logs carry, read from the
//! real binaries: a service whose metrics port is taken stops before it says it
//! serves, a service's one start-up line at info is its ready line, and a request's
//! log lines name its connection (the peer), its kind and its job, whatever the
//! filter lets through (the services' JSON logs, `QCG_LOG_FORMAT=json`, parsed).
//!
//! Needs the workspace's binaries built first (`cargo build --workspace --bins
//! --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use qcg_proto::{AccessPoint, ErrorKind, ProcName, Request, Response};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Starts a service with `env` set; its stdout lines (ready lines, and its logs)
/// arrive on the returned channel.
fn start_logging(
    services: &mut Services,
    name: &str,
    config: &Path,
    env: &[(&str, &str)],
) -> mpsc::Receiver<String> {
    let mut child = Command::new(bin(name))
        .arg("--config")
        .arg(config)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    services.0.push(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Waits for the line starting with `prefix`; returns the rest of it, and keeps
/// the lines before it in `seen`.
fn ready(lines: &mpsc::Receiver<String>, prefix: &str, seen: &mut Vec<String>) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| {
                panic!(
                    "no line starting with `{prefix}`; got:\n{}",
                    seen.join("\n")
                )
            });
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.trim().to_string();
        }
        seen.push(line);
    }
}

/// The first JSON log event among `seen` and the lines still coming (for up to
/// 30 s) that `pick` accepts.
fn event(
    lines: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    what: &str,
    pick: impl Fn(&Value) -> bool,
) -> Value {
    let matches = |l: &str| serde_json::from_str::<Value>(l).ok().filter(|v| pick(v));
    if let Some(v) = seen.iter().find_map(|l| matches(l)) {
        return v;
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) {
            if let Some(v) = matches(&line) {
                return v;
            }
            seen.push(line);
        }
    }
    panic!(
        "no log event {what}; the service logged:\n{}",
        seen.join("\n")
    )
}

/// The names of an event's spans, outermost first.
fn span_names(v: &Value) -> Vec<&str> {
    v["spans"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["name"].as_str()).collect())
        .unwrap_or_default()
}

/// One request on a helper's socket, as a process sends it; its answer.
fn ask(socket: &Path, req: &Request) -> Response {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    qcg_proto::frame::write_frame_sync(&mut s, req).unwrap();
    qcg_proto::frame::read_frame_sync(&mut s).unwrap().unwrap()
}

/// A service's one start-up line at info is its ready line: before it, nothing at
/// info (JSON events at another level, a warning for instance, may come).
fn said_nothing_else_at_start(service: &str, seen: &[String]) {
    let info: Vec<&String> = seen
        .iter()
        .filter(|l| serde_json::from_str::<Value>(l).map_or(true, |v| v["level"] == "INFO"))
        .collect();
    assert!(
        info.is_empty(),
        "{service} logged more than its one start-up line at info:\n{}",
        info.iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn register(rank: u32, node: &str) -> Request {
    Request::Register(AccessPoint {
        process: ProcName::new("spans-job", rank),
        cluster: "alpha".into(),
        node: node.into(),
        private_addr: [127, 0, 0, 1].into(),
        public_addr: None,
        port: 9,
    })
}

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

#[test]
fn a_requests_log_lines_name_its_peer_its_kind_and_its_job() {
    let dir = grid_ca(&[("broker", "broker"), ("frontal", "alpha"), ("helper", "a1")]);
    let d = dir.path();
    let mut services = Services(Vec::new());
    let cfg = write(
        d,
        "broker.toml",
        "listen = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n",
    );
    // Every service logs at info as JSON: what it says before its ready line is seen.
    let env = [("QCG_LOG_FORMAT", "json"), ("RUST_LOG", "info")];
    let lines = start_logging(&mut services, "qcg-broker", &cfg, &env);
    let mut broker_seen = Vec::new();
    let broker = ready(&lines, "qcg-broker: QUIC on", &mut broker_seen);
    said_nothing_else_at_start("qcg-broker", &broker_seen);

    // The frontal logs each answer (debug), as JSON.
    let cfg = write(
        d,
        "frontal.toml",
        &format!(
            "cluster = \"alpha\"\npolicy = \"open\"\npublic_address = \"127.0.0.1\"\nbroker = \"{broker}\"\nlisten = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/alpha.pem\"\nkey = \"ca/alpha.key\"\n"
        ),
    );
    let env = [
        ("QCG_LOG_FORMAT", "json"),
        ("RUST_LOG", "info,qcg_frontal=debug"),
    ];
    let frontal = start_logging(&mut services, "qcg-frontal", &cfg, &env);
    let mut frontal_seen = Vec::new();
    let at = ready(
        &frontal,
        "qcg-frontal: cluster alpha serving helpers on",
        &mut frontal_seen,
    );
    said_nothing_else_at_start("qcg-frontal", &frontal_seen);

    // The helper logs at info: the spans of its warnings are kept at that filter.
    let socket = d.join("a1.sock");
    let cfg = write(
        d,
        "helper.toml",
        &format!(
            "node = \"a1\"\nfrontal = \"{at}\"\nsocket = \"a1.sock\"\nbind_address = \"127.0.0.1\"\nca = \"ca/ca.pem\"\ncert = \"ca/a1.pem\"\nkey = \"ca/a1.key\"\n\n[accounts]\ndefault = \"root\"\nallow_root = true\n"
        ),
    );
    let env = [("QCG_LOG_FORMAT", "json"), ("RUST_LOG", "info")];
    let helper = start_logging(&mut services, "qcg-helper", &cfg, &env);
    let mut helper_seen = Vec::new();
    ready(&helper, "qcg-helper: node a1 serving", &mut helper_seen);
    said_nothing_else_at_start("qcg-helper", &helper_seen);

    // A registration the grid takes, and one the helper refuses (it names
    // another node than the helper's).
    let ok = ask(&socket, &register(0, "a1"));
    assert_eq!(ok, Response::Ok);
    let refused = ask(&socket, &register(1, "b9"));
    assert!(
        matches!(&refused, Response::Error(e) if e.kind == ErrorKind::Forbidden),
        "{refused:?}"
    );

    // The helper's warning about the refusal: in the span of the process's
    // connection (its uid and pid: ours) and of the request.
    let warn = event(&helper, &mut helper_seen, "`request refused`", |v| {
        v["fields"]["message"] == "request refused"
    });
    assert_eq!(warn["level"], "WARN", "{warn}");
    assert_eq!(span_names(&warn), ["process", "request"], "{warn}");
    let (conn, req) = (&warn["spans"][0], &warn["spans"][1]);
    assert_eq!(
        conn["uid"],
        json!(rustix::process::getuid().as_raw()),
        "{warn}"
    );
    assert_eq!(conn["pid"], json!(std::process::id()), "{warn}");
    assert_eq!(req["kind"], "register", "{warn}");
    assert_eq!(req["job"], "spans-job", "{warn}");
    assert_eq!(req["rank"], json!(1), "{warn}");

    // The frontal's answer to the registration it passed on: in the span of the
    // helper's connection (its address, its node) and of the request.
    let answered = event(
        &frontal,
        &mut frontal_seen,
        "`answered` to a register",
        |v| v["fields"]["message"] == "answered" && v["span"]["kind"] == "register",
    );
    assert_eq!(span_names(&answered), ["conn", "request"], "{answered}");
    let (conn, req) = (&answered["spans"][0], &answered["spans"][1]);
    let peer: SocketAddr = conn["peer"].as_str().unwrap().parse().unwrap();
    assert_eq!(peer.ip(), std::net::Ipv4Addr::LOCALHOST, "{answered}");
    assert_eq!(conn["node"], "a1", "{answered}");
    assert_eq!(req["job"], "spans-job", "{answered}");
    assert_eq!(req["rank"], json!(0), "{answered}");
    assert_eq!(answered["fields"]["answer"], "ok", "{answered}");
    eprintln!("the helper's warning: {warn}\nthe frontal's answer: {answered}");
}
