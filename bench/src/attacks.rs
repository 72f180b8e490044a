//! `qcg-bench attacks`: issue 11's attacks on real services (the release or debug
//! binaries next to this one, started from config files as an admin would), with the
//! figures an admin checks: how long a refusal takes, the broker's resident memory
//! (`VmRSS`, and its peak `VmHWM`), the proxy's threads and descriptors.
//!
//! The tests prove each attack is refused; this prints what it cost.

use anyhow::{bail, Result};
use qcg_grid::services::{Cluster, Node, ServiceGrid};
use qcg_proto::quic;
use qcg_proto::tls::Role;
use qcg_proto::{AccessPoint, ClusterConfig, ProcName, Request};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A `/proc/PID/status` field, in KiB.
pub(crate) fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

pub(crate) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn count(dir: String) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// Runs every attack and prints a table; `lines` is the number of 16 KiB output
/// lines of the flooding job (the issue's 100,000 by default).
pub fn run(lines: u32, strangers: usize) -> Result<()> {
    let mut g = ServiceGrid::builder()
        .no_http()
        .log_filter("error")
        .cluster(Cluster::new("alpha").node(Node::new("a1").slots(4)))
        .cert("client", "alice")
        .start()?;
    let relay_at = g.start_proxy("relay", "")?;
    let quic_at = g.quic()?;
    let broker = g.service("broker")?.pid();
    let proxy = g.service("proxy-relay")?.pid();
    let ca = g.ca();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = g.client("alice")?;

    println!(
        "# qcg-bench attacks: real services on loopback (pids: broker {broker}, proxy {proxy})"
    );
    println!(
        "{:<46} {:>10} {:>12} {:>12} {:>12}",
        "attack", "time", "rss before", "rss after", "peak"
    );
    let row = |what: &str, t: Duration, before: u64| {
        println!(
            "{:<46} {:>8.1}ms {:>10.1}MiB {:>10.1}MiB {:>10.1}MiB",
            what,
            t.as_secs_f64() * 1e3,
            mib(before),
            mib(status_kib(broker, "VmRSS:")),
            mib(status_kib(broker, "VmHWM:"))
        );
    };

    // 1. Deeply nested JobProfiles.
    for levels in [40_000usize, 1_000_000] {
        let xml = format!(
            "<grmsJob appId=\"deep\">{}{}</grmsJob>",
            "<task>".repeat(levels),
            "</task>".repeat(levels)
        );
        let before = status_kib(broker, "VmRSS:");
        let t0 = Instant::now();
        let (status, msg) = match rt.block_on(client.request("POST", "/v1/jobs", xml.into_bytes()))
        {
            Ok(a) => (a.status.to_string(), a.error_message()),
            // Past the size limit the broker answers 413 before reading the body and
            // closes: a client still writing sees the connection go.
            Err(e) => ("closed".into(), e.to_string()),
        };
        let t = t0.elapsed();
        row(
            &format!("POST profile, {levels} levels -> {status}"),
            t,
            before,
        );
        println!("    {}", msg.chars().take(110).collect::<String>());
    }

    // 2. 100 registrations with 1 MB job names, from a frontal's certificate.
    let before = status_kib(broker, "VmRSS:");
    let t0 = Instant::now();
    let refused = rt.block_on(async {
        let ep = quic::client_endpoint(&ca.identity(Role::Frontal, "orsay")?)?;
        let conn = quic::connect(&ep, quic_at, Role::Broker).await?;
        let cluster = ClusterConfig {
            name: "orsay".into(),
            policy: qcg_proto::Policy::Open,
            nat: qcg_proto::Nat::None,
            public_address: None,
        };
        quic::request(&conn, &Request::RegisterCluster(cluster)).await?;
        let big = "j".repeat(1_000_000);
        let mut refused = 0;
        for rank in 0..100 {
            let ap = AccessPoint {
                process: ProcName::new(&big, rank),
                cluster: "orsay".into(),
                node: "n0".into(),
                private_addr: [127, 0, 0, 1].into(),
                public_addr: None,
                port: 4000,
            };
            if matches!(
                quic::request(&conn, &Request::Register(ap)).await?,
                qcg_proto::Response::Error(_)
            ) {
                refused += 1;
            }
        }
        anyhow::Ok(refused)
    })?;
    row(
        &format!("100 registrations, 1 MB names: {refused} refused"),
        t0.elapsed(),
        before,
    );

    // 3. A job printing `lines` lines of 16 KiB.
    let before = status_kib(broker, "VmRSS:");
    let script = format!("yes \"$(head -c 16383 /dev/zero | tr '\\0' x)\" | head -n {lines}");
    let xml = format!(
        r#"<grmsJob appId="flood"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>1</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>/bin/sh</executable>
<arguments><value>-c</value><value>{}</value></arguments></execution></task></grmsJob>"#,
        script
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    );
    let t0 = Instant::now();
    let a = rt.block_on(client.request("POST", "/v1/jobs?workdir=/tmp", xml.into_bytes()))?;
    if a.status != 201 {
        bail!("the flooding job was refused: {}", a.error_message());
    }
    let id = a.json()["id"].as_str().unwrap_or_default().to_string();
    let job = loop {
        let a = rt.block_on(client.request("GET", &format!("/v1/jobs/{id}"), vec![]))?;
        let j = a.json();
        if j["finished"] == true {
            break j;
        }
        if t0.elapsed() > Duration::from_secs(600) {
            bail!("the flooding job did not end in 10 min");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    row(
        &format!("job printing {lines} x 16 KiB lines"),
        t0.elapsed(),
        before,
    );
    println!(
        "    state {}, lines {}, dropped {} lines / {:.1} MiB (reported to the reader)",
        job["status"]["state"],
        job["lines"],
        job["dropped_lines"],
        job["dropped_bytes"].as_f64().unwrap_or(0.0) / 1048576.0
    );

    // 4. Idle strangers on the proxy.
    let (t_before, fd_before) = (
        count(format!("/proc/{proxy}/task")),
        count(format!("/proc/{proxy}/fd")),
    );
    {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let mut l = getrlimit(Resource::Nofile);
        l.current = l.maximum;
        let _ = setrlimit(Resource::Nofile, l);
    }
    let mut conns = Vec::new();
    let mut failed = 0;
    for _ in 0..strangers {
        match TcpStream::connect_timeout(&relay_at, Duration::from_secs(2)) {
            Ok(c) => conns.push(c),
            Err(_) => failed += 1,
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let (t_during, fd_during) = (
        count(format!("/proc/{proxy}/task")),
        count(format!("/proc/{proxy}/fd")),
    );
    drop(conns);
    println!(
        "{strangers} idle connections to the proxy ({failed} not accepted): threads {t_before} -> {t_during}, descriptors {fd_before} -> {fd_during}"
    );
    Ok(())
}
