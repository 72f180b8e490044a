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

use qcg_grid::services::{accounts_here, tls_fields, Cluster, Node, ServiceError, ServiceGrid};
use qcg_proto::{ErrorKind, Response};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The first JSON log event of `service` (its log file, read until one comes, for
/// up to 30 s) that `pick` accepts.
fn event(g: &ServiceGrid, service: &str, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let log = g.log(service);
        let found = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| pick(v));
        if let Some(v) = found {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no log event {what}; {service} logged:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The names of an event's spans, outermost first.
fn span_names(v: &Value) -> Vec<&str> {
    v["spans"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["name"].as_str()).collect())
        .unwrap_or_default()
}

/// A service's one start-up line at info is its ready line: in its log, before the
/// line that starts with `ready`, nothing at info (a plain line naming `INFO`, or a
/// JSON event at that level; events at other levels, a warning for instance, may come).
fn said_nothing_else_at_start(g: &ServiceGrid, service: &str, ready: &str) {
    let log = g.log(service);
    assert!(
        log.lines().any(|l| l.starts_with(ready)),
        "{service} never printed `{ready}`:\n{log}"
    );
    let info: Vec<&str> = log
        .lines()
        .take_while(|l| !l.starts_with(ready))
        .filter(|l| match serde_json::from_str::<Value>(l) {
            Ok(v) => v["level"] == "INFO",
            Err(_) => l.contains(" INFO "),
        })
        .collect();
    assert!(
        info.is_empty(),
        "{service} logged more than its one start-up line at info:\n{}",
        info.join("\n")
    );
}

#[test]
fn a_service_whose_metrics_port_is_taken_stops_before_it_says_it_serves() {
    // No broker: the services stop before they would reach one.
    let mut g = ServiceGrid::new().unwrap();
    // Logs at info, the default: whatever the service says at start is seen.
    g.set_log_filter("info");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap();
    // The other listeners are free: only the metrics port can stop them.
    let helper_accounts = format!("\n[accounts]\n{}", accounts_here());
    // (service, binary, certificate holder, top-level fields, tables)
    let configs = [
        (
            "proxy-relay",
            "qcg-proxy",
            "relay",
            "listen = \"127.0.0.1:0\"\nbroker = \"127.0.0.1:9\"\n",
            "",
        ),
        (
            "frontal-alpha",
            "qcg-frontal",
            "alpha",
            "cluster = \"alpha\"\npolicy = \"open\"\nbroker = \"127.0.0.1:9\"\nlisten = \"127.0.0.1:0\"\n",
            "",
        ),
        (
            "helper-a1",
            "qcg-helper",
            "a1",
            "node = \"a1\"\nfrontal = \"127.0.0.1:9\"\nsocket = \"a1.sock\"\nbind_address = \"127.0.0.1\"\n",
            &helper_accounts,
        ),
    ];
    for (name, service, holder, fields, tables) in configs {
        let role = service.trim_start_matches("qcg-").parse().unwrap();
        g.issue(role, holder).unwrap();
        let text = format!(
            "{fields}metrics_listen = \"{at}\"\n{}{tables}",
            tls_fields(holder)
        );
        g.start(name, service, &text).unwrap();
        // A service that does not stop is killed when the grid drops (and fails
        // here), never waited for forever.
        let status = g.wait(name, Duration::from_secs(60)).unwrap();
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(1),
            "{service} did not stop with status 1:\n{}",
            g.log(name)
        );
        // Its stdout ended without a start-up line (each starts `qcg-NAME: `); read
        // to its end, the log holds all it printed.
        let said = g.line(name, "qcg-");
        assert!(
            matches!(
                &said,
                Err(ServiceError::NotReady {
                    how: "it ended",
                    ..
                })
            ),
            "{service} said it serves, then stopped: {said:?}"
        );
        let log = g.log(name);
        assert!(
            log.contains(&format!("cannot serve metrics on {at}"))
                && log.contains("config field `metrics_listen`")
                && log.contains("in use"),
            "{service}: {log}"
        );
        assert!(
            !log.contains("serving") && !log.contains("relaying on") && !log.contains("started"),
            "{service} said it serves, then stopped:\n{log}"
        );
    }
    drop(taken);
}

#[test]
fn a_requests_log_lines_name_its_peer_its_kind_and_its_job() {
    // Every service logs at info: what it says before its ready line is checked.
    let mut g = ServiceGrid::builder()
        .no_http()
        .no_https()
        .log_filter("info")
        .start()
        .unwrap();
    said_nothing_else_at_start(&g, "broker", "qcg-broker: QUIC on");
    // The frontal logs each answer (debug), the helper at info (the spans of its
    // warnings are kept at that filter); both as JSON.
    g.set_env("QCG_LOG_FORMAT", "json");
    g.set_log_filter("info,qcg_frontal=debug");
    let alpha = Cluster::new("alpha")
        .frontal_config("public_address = \"127.0.0.1\"")
        .node(Node::new("a1"));
    g.start_cluster(&alpha, Some(&accounts_here())).unwrap();
    said_nothing_else_at_start(&g, "frontal-alpha", "qcg-frontal: cluster alpha serving");
    said_nothing_else_at_start(&g, "helper-a1", "qcg-helper: node a1 serving");
    let socket = g.socket("a1");

    // A registration the grid takes, and one the helper refuses (it names
    // another node than the helper's).
    let ok = ask(&socket, &register("spans-job", 0, "alpha", "a1", 9)).unwrap();
    assert_eq!(ok, Response::Ok);
    let refused = ask(&socket, &register("spans-job", 1, "alpha", "b9", 9)).unwrap();
    assert!(
        matches!(&refused, Response::Error(e) if e.kind == ErrorKind::Forbidden),
        "{refused:?}"
    );

    // The helper's warning about the refusal: in the span of the process's
    // connection (its uid and pid: ours) and of the request.
    let warn = event(&g, "helper-a1", "`request refused`", |v| {
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
    let answered = event(&g, "frontal-alpha", "`answered` to a register", |v| {
        v["fields"]["message"] == "answered" && v["span"]["kind"] == "register"
    });
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
