//! Every service's `/metrics`, scraped from the real binaries on loopback after a
//! job ran across two clusters through a relay proxy, checked by Prometheus's own
//! parser and linter (`promtool check metrics`, from Debian's `prometheus`
//! package: `scripts/metrics-deps.sh` installs it, and the test fails if it cannot),
//! and read for what an operator would look at: links by technique, relayed bytes,
//! connections, errors; and a job of two ranks on one node, whose link moves into
//! shared memory and is counted so at every service and in `/v1/links`.
//!
//! Needs the workspace's binaries and examples built first
//! (`cargo build --workspace --bins --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{accounts_here, Cluster, Node, ServiceGrid};

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// promtool on PATH, installed by the project's script if missing (once, whichever
/// test asks first; the others wait for it); panics (never skips) when it cannot be
/// had.
fn promtool() -> &'static str {
    static FOUND: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let have = || {
        Command::new("promtool")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let found = FOUND.get_or_init(|| {
        if have() {
            return Ok(());
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/metrics-deps.sh");
        let o = Command::new("bash")
            .arg(&script)
            .output()
            .map_err(|e| e.to_string())?;
        if o.status.success() && have() {
            return Ok(());
        }
        Err(format!(
            "promtool is needed to check the metrics and {} could not install it:\n{}",
            script.display(),
            String::from_utf8_lossy(&o.stderr)
        ))
    });
    if let Err(e) = found {
        panic!("{e}");
    }
    "promtool"
}

/// `promtool check metrics` on one scrape: parse errors and lint problems (names,
/// suffixes, help) both fail.
fn check(service: &str, text: &str) {
    let mut child = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "promtool rejects the metrics of {service}:\n{}{}\n--- scrape:\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The value of the sample written exactly `series` (name and labels as exposed).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (name, v) = l.rsplit_once(' ')?;
            (name == series).then(|| v.parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
}

/// The sum of every sample of `name` whose labels include all of `labels`.
fn sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(s, _)| {
            s.split_once('{').map_or(*s, |(n, _)| n) == name
                && labels.iter().all(|want| s.contains(want))
        })
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

fn scrape(at: SocketAddr) -> String {
    http_get(at, "/metrics")
}

/// Where `service` of `g` serves its metrics, from its start-up line that begins
/// with `prefix`.
fn metrics_at(g: &ServiceGrid, service: &str, prefix: &str) -> SocketAddr {
    g.line(service, prefix)
        .unwrap()
        .trim_end_matches("/metrics")
        .parse()
        .unwrap()
}

/// Runs the `ring` example as `n` ranks over the helpers at `sockets`: it succeeds
/// and the token came back.
fn ring(n: u32, sockets: &[PathBuf]) {
    let mut cmd = Command::new(bin("qcg"));
    cmd.args([
        "run",
        "--tag-output",
        "-n",
        &n.to_string(),
        "--timeout",
        "60",
    ]);
    for s in sockets {
        cmd.arg("--helper").arg(s);
    }
    let o = cmd.arg("--").arg(example("ring")).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let whole = format!("[0] round 0: token came back as {n} after visiting {n} ranks");
    assert!(out.contains(&whole), "{out}");
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < Duration::from_secs(30), "{what}: never");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn every_service_exposes_metrics_that_promtool_accepts_and_that_count_the_job() {
    // Check promtool first: a missing checker fails here, before any service.
    promtool();
    let mut g = ServiceGrid::builder().no_https().start().unwrap();
    let http = g.http().unwrap();

    g.start_proxy("relay", "metrics_listen = \"127.0.0.1:0\"\n")
        .unwrap();
    let proxy_m = metrics_at(&g, "proxy-relay", "qcg-proxy: metrics on http://");

    // Two closed clusters behind random-port NATs: neither can be dialled, nor
    // punched (on loopback, closed clusters without NAT punch), so every link
    // between them goes through the relay proxy.
    let mut frontal_m = Vec::new();
    let mut helper_m = Vec::new();
    let mut sockets = Vec::new();
    for (cluster, node) in [("alpha", "a1"), ("beta", "b1")] {
        let c = Cluster::new(cluster)
            .policy("closed")
            .frontal_config(
                "nat = \"random-port\"\npublic_address = \"127.0.0.1\"\nmetrics_listen = \"127.0.0.1:0\"",
            )
            .node(Node::new(node).helper_config("metrics_listen = \"127.0.0.1:0\""));
        g.start_cluster(&c, Some(&accounts_here())).unwrap();
        let f = format!("frontal-{cluster}");
        frontal_m.push(metrics_at(&g, &f, "qcg-frontal: metrics on http://"));
        let h = format!("helper-{node}");
        helper_m.push(metrics_at(&g, &h, "qcg-helper: metrics on http://"));
        sockets.push(g.socket(node));
    }
    wait_until("the proxy registered", || {
        metric(http, "qcg_broker_proxies_alive") == 1
    });
    wait_until("both helpers connected", || {
        frontal_m
            .iter()
            .all(|m| value(&scrape(*m), "qcg_frontal_helpers_connected") == 1.0)
    });

    // Before any job: every scrape parses, and nothing was relayed.
    check("qcg-proxy (idle)", &scrape(proxy_m));
    assert_eq!(
        value(&scrape(proxy_m), "qcg_proxy_relayed_bytes_total"),
        0.0
    );

    // The ring: four ranks, alternately on alpha and beta, each link between the
    // two clusters.
    ring(4, &sockets);

    // Each scrape parses and passes promtool's lint.
    let b = scrape(http);
    check("qcg-broker", &b);
    let p = scrape(proxy_m);
    check("qcg-proxy", &p);
    let f: Vec<String> = frontal_m.iter().map(|m| scrape(*m)).collect();
    let h: Vec<String> = helper_m.iter().map(|m| scrape(*m)).collect();
    for (i, t) in f.iter().enumerate() {
        check(&format!("qcg-frontal #{i}"), t);
    }
    for (i, t) in h.iter().enumerate() {
        check(&format!("qcg-helper #{i}"), t);
    }

    // Links by technique: the broker counts each rank's report once; the links
    // were relayed, none direct; every report came through a helper and a frontal.
    let relayed = "qcg_broker_links_total{technique=\"relayed\",outcome=\"ok\"}";
    let made = value(&b, relayed);
    assert!(made >= 4.0, "4 ring links, {made} relayed\n{b}");
    assert_eq!(
        value(
            &b,
            "qcg_broker_links_total{technique=\"direct\",outcome=\"ok\"}"
        ),
        0.0,
        "{b}"
    );
    let via = |texts: &[String], name: &str| -> f64 {
        texts
            .iter()
            .map(|t| sum(t, name, &["technique=\"relayed\"", "outcome=\"ok\""]))
            .sum()
    };
    assert_eq!(via(&f, "qcg_frontal_links_total"), made, "{f:?}");
    assert_eq!(via(&h, "qcg_helper_links_total"), made, "{h:?}");
    // Each cluster's ranks dialled some of the links.
    for t in &f {
        assert!(
            sum(
                t,
                "qcg_frontal_links_total",
                &["technique=\"relayed\"", "outcome=\"ok\""]
            ) >= 1.0,
            "{t}"
        );
    }

    // The proxy: a relay per link at least, bytes through it, none refused, none
    // still open once the job ended.
    assert!(
        value(&p, "qcg_proxy_relays_total") >= made,
        "{made} relayed links\n{p}"
    );
    let bytes = value(&p, "qcg_proxy_relayed_bytes_total");
    assert!(bytes > 0.0, "{p}");
    assert_eq!(
        sum(&p, "qcg_proxy_connections_refused_total", &[]),
        0.0,
        "{p}"
    );
    wait_until("the relays closed", || {
        value(&scrape(proxy_m), "qcg_proxy_relays_open") == 0.0
    });

    // Connections: each frontal took its helper (and the broker the frontals and
    // the proxy) and refused none.
    for t in &f {
        assert!(
            value(
                t,
                "qcg_frontal_connections_accepted_total{listener=\"quic\"}"
            ) >= 1.0,
            "{t}"
        );
        assert_eq!(sum(t, "qcg_frontal_connections_refused_total", &[]), 0.0);
        assert_eq!(sum(t, "qcg_frontal_errors_total", &[]), 0.0, "{t}");
    }
    assert!(
        value(
            &b,
            "qcg_broker_connections_accepted_total{listener=\"quic\"}"
        ) >= 3.0,
        "{b}"
    );
    for t in &h {
        // Each rank opened lines to its helper; the job is over.
        assert!(
            value(
                t,
                "qcg_helper_connections_accepted_total{listener=\"socket\"}"
            ) >= 2.0,
            "{t}"
        );
        assert_eq!(value(t, "qcg_helper_processes_running"), 0.0, "{t}");
        assert!(
            value(t, "qcg_helper_requests_total{kind=\"register\"}") >= 2.0,
            "{t}"
        );
        assert_eq!(sum(t, "qcg_helper_errors_total", &[]), 0.0, "{t}");
    }

    // Only /metrics is served, and the listener is where the config said.
    assert_eq!(proxy_m.ip(), std::net::Ipv4Addr::LOCALHOST);
    let mut s = std::net::TcpStream::connect(frontal_m[0]).unwrap();
    s.write_all(b"GET /v1/processes HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    std::io::Read::read_to_string(&mut s, &mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
}

/// A metrics address off loopback is refused at load time unless the config says
/// `metrics_public = true`, with the field named.
#[test]
fn a_public_metrics_address_needs_metrics_public() {
    let dir = grid_ca(&[("proxy", "relay")]);
    let d = dir.path();
    let body = "listen = \"127.0.0.1:0\"\nbroker = \"127.0.0.1:7700\"\nca = \"ca/ca.pem\"\ncert = \"ca/relay.pem\"\nkey = \"ca/relay.key\"\nmetrics_listen = \"0.0.0.0:0\"\n";
    let cfg = write(d, "proxy.toml", body);
    let e = qcg_proxy::config::Config::load(&cfg)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("metrics_listen") && e.contains("metrics_public"),
        "{e}"
    );
    let cfg = write(d, "proxy.toml", &format!("{body}metrics_public = true\n"));
    assert!(qcg_proxy::config::Config::load(&cfg).is_ok());
}

/// Two ranks on one node: their link moves into shared memory, and the broker's
/// `/v1/links` and every service's `/metrics` (checked by promtool) count one
/// shared-memory link, beside the TCP link it moved off.
#[test]
fn a_link_between_two_ranks_of_one_node_counts_as_shared_memory() {
    promtool();
    let mut g = ServiceGrid::builder().no_https().start().unwrap();
    let http = g.http().unwrap();
    let alpha = Cluster::new("alpha")
        .frontal_config("metrics_listen = \"127.0.0.1:0\"")
        .node(Node::new("a1").helper_config("metrics_listen = \"127.0.0.1:0\""));
    g.start_cluster(&alpha, Some(&accounts_here())).unwrap();
    let frontal_m = metrics_at(&g, "frontal-alpha", "qcg-frontal: metrics on http://");
    let helper_m = metrics_at(&g, "helper-a1", "qcg-helper: metrics on http://");
    wait_until("the helper connected", || {
        value(&scrape(frontal_m), "qcg_frontal_helpers_connected") == 1.0
    });
    let series = |prefix: &str, outcome: &str| {
        format!("{prefix}_links_total{{technique=\"shared-memory\",outcome=\"{outcome}\"}}")
    };
    // The series is there from the start, at 0: the count below is the job's.
    assert_eq!(value(&scrape(http), &series("qcg_broker", "ok")), 0.0);

    ring(2, &[g.socket("a1")]);

    // Rank 0 (which offered the memory) reports the move; the broker has it once
    // its report went through the helper and the frontal.
    wait_until("the broker counted the shared-memory link", || {
        value(&scrape(http), &series("qcg_broker", "ok")) >= 1.0
    });
    let links: serde_json::Value = serde_json::from_str(&http_get(http, "/v1/links")).unwrap();
    let shm = &links["shared-memory"];
    assert_eq!(
        (&shm["ok"], &shm["failed"]),
        (&1.into(), &0.into()),
        "{links}"
    );
    assert_eq!(shm["upgraded"], 0, "{links}");
    assert!(
        links["direct"]["ok"].as_u64() >= Some(1),
        "the two ranks linked over TCP first: {links}"
    );
    for (service, at, prefix) in [
        ("qcg-broker", http, "qcg_broker"),
        ("qcg-frontal", frontal_m, "qcg_frontal"),
        ("qcg-helper", helper_m, "qcg_helper"),
    ] {
        let text = scrape(at);
        check(service, &text);
        assert_eq!(
            value(&text, &series(prefix, "ok")),
            1.0,
            "{service}\n{text}"
        );
        assert_eq!(
            value(&text, &series(prefix, "failed")),
            0.0,
            "{service}\n{text}"
        );
    }
}
