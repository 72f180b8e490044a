//! Every technique proven through real firewalls and NATs: the real services run in
//! the lab's namespaces (broker and proxy on the public side, a frontal on each site's
//! gateway, a helper on each node), and for each pair of sites of
//! `topologies/techniques.toml` the test first proves that the simpler techniques are
//! really blocked (a raw connect times out), then runs a job whose rank 0 (initiator
//! site) sends 64 MiB to rank 1 (target site) with a SHA-256, and checks the technique
//! the link was made by and the checksum.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use qcg_bench::lab::topo::{self, Nat};
use qcg_proto::tls::{Ca, Role};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const REFUSED: i32 = qcg_bench::lab::probe::EXIT_REFUSED;

fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace --bins --examples` first",
        p.display()
    );
    p
}

/// Services started in the lab, killed on drop (before the lab goes down).
struct Services(Vec<Child>);

impl Drop for Services {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn in_host(lab: &Lab, host: &str, program: &Path) -> Command {
    let mut c = Command::new(QCG_LAB);
    c.args(["exec", "--prefix", &lab.prefix, host, "--"])
        .arg(program);
    c
}

/// Starts a service in `host` and waits for its line starting with `ready`.
fn start(lab: &Lab, services: &mut Services, host: &str, name: &str, config: &Path, ready: &str) {
    let mut child = in_host(lab, host, &bin(name))
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "warn")
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
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{name} in {host} never said `{ready}`"));
        if line.starts_with(ready) {
            return;
        }
    }
}

fn write_pem(dir: &Path, ca: &Ca, role: Role, name: &str) {
    ca.issue(role, name).unwrap().save(dir, name).unwrap();
}

/// Runs the two ranks of a transfer job, rank 0 on `a`'s node and rank 1 on `b`'s.
fn transfer(lab: &Lab, dir: &Path, job: &str, a: &str, b: &str) -> (Output, Output) {
    let secret = "5a".repeat(32);
    let spawn = |rank: u32, site: &str| {
        in_host(lab, &format!("{site}-1"), &bin("examples/transfer"))
            .env("QCG_JOB", job)
            .env("QCG_RANK", rank.to_string())
            .env("QCG_SIZE", "2")
            .env("QCG_HELPER", dir.join(format!("{site}.sock")))
            .env("QCG_JOB_SECRET", &secret)
            .env("QCG_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (r1, r0) = (spawn(1, b), spawn(0, a));
    (
        r0.wait_with_output().unwrap(),
        r1.wait_with_output().unwrap(),
    )
}

#[test]
fn every_technique_links_through_real_firewalls() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/techniques.toml"),
    )
    .unwrap();
    let lab = Lab::up("tq", &text);
    let t = lab.topo.clone();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let ca = Ca::generate().unwrap();
    ca.save(d).unwrap();
    write_pem(d, &ca, Role::Broker, "broker");
    write_pem(d, &ca, Role::Proxy, "proxy");
    let mut services = Services(Vec::new());
    let broker = SocketAddr::from((lab.addr("broker"), 7700));
    let cfg = d.join("broker.toml");
    std::fs::write(
        &cfg,
        "listen = \"0.0.0.0:7700\"\nca = \"ca.pem\"\ncert = \"broker.pem\"\nkey = \"broker.key\"\n",
    )
    .unwrap();
    start(
        &lab,
        &mut services,
        "broker",
        "qcg-broker",
        &cfg,
        "qcg-broker: QUIC on",
    );
    let cfg = d.join("proxy.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"0.0.0.0:7800\"\npublic_address = \"{}:7800\"\nbroker = \"{broker}\"\nca = \"ca.pem\"\ncert = \"proxy.pem\"\nkey = \"proxy.key\"\n",
            lab.addr("proxy")
        ),
    )
    .unwrap();
    start(
        &lab,
        &mut services,
        "proxy",
        "qcg-proxy",
        &cfg,
        "qcg-proxy: relaying",
    );

    for site in &t.sites {
        let i = t.site_index(&site.name).unwrap();
        let (nat, public) = match site.nat {
            Nat::None => ("none", String::new()),
            Nat::PortPreserving => (
                "port-preserving",
                format!("public_address = \"{}\"\n", topo::gateway_addr(i)),
            ),
            Nat::RandomPort => (
                "random-port",
                format!("public_address = \"{}\"\n", topo::gateway_addr(i)),
            ),
        };
        let name = &site.name;
        write_pem(d, &ca, Role::Frontal, name);
        let cfg = d.join(format!("frontal-{name}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "cluster = \"{name}\"\npolicy = \"{}\"\nnat = \"{nat}\"\n{public}broker = \"{broker}\"\nlisten = \"0.0.0.0:7701\"\nca = \"ca.pem\"\ncert = \"{name}.pem\"\nkey = \"{name}.key\"\n",
                site.firewall
            ),
        )
        .unwrap();
        start(
            &lab,
            &mut services,
            &format!("{name}-gw"),
            "qcg-frontal",
            &cfg,
            "qcg-frontal:",
        );
        let node = format!("{name}-node");
        write_pem(d, &ca, Role::Helper, &node);
        let cfg = d.join(format!("helper-{name}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "node = \"{name}-1\"\nfrontal = \"{}:7701\"\nsocket = \"{name}.sock\"\nbind_address = \"{}\"\nca = \"ca.pem\"\ncert = \"{node}.pem\"\nkey = \"{node}.key\"\n",
                topo::lan_gw(i),
                topo::node_addr(i, 1)
            ),
        )
        .unwrap();
        start(
            &lab,
            &mut services,
            &format!("{name}-1"),
            "qcg-helper",
            &cfg,
            "qcg-helper:",
        );
    }

    // (initiator site, target site, the technique the link must be made by)
    let cases = [
        ("direct1", "direct2", "direct"),
        ("range1", "range2", "port-range"),
        ("rev1", "rev2", "reversed"),
        ("rev1", "rev3", "reversed"),
        ("trav1", "trav2", "traversed"),
        ("punch1", "punch2", "punched"),
        ("relay1", "relay2", "relayed"),
    ];
    let mut failures = Vec::new();
    for (n, (a, b, technique)) in cases.iter().enumerate() {
        // The simpler techniques are really blocked: a raw connect from a's node to
        // b's node (outside any open range) times out, and for the techniques past
        // `reversed`, the other way round too.
        if *technique != "direct" {
            let _srv = lab.serve(&format!("{b}-1"), &[5000]);
            let to = at(lab.addr(&format!("{b}-1")), 5000);
            let target = match t.site(t.site_index(b).unwrap()).unwrap().nat {
                Nat::None => to,
                _ => at(topo::gateway_addr(t.site_index(b).unwrap()), 5000),
            };
            // Dropped (timeout), or refused by a NAT gateway that forwards nothing.
            let r = lab.connect(&format!("{a}-1"), target, None);
            assert!(
                matches!(r, Err(TIMEOUT | REFUSED)),
                "{a} -> {b}: a direct connect got through ({r:?}), so {technique} is not needed"
            );
        }
        if ["traversed", "punched", "relayed"].contains(technique) {
            let _srv = lab.serve(&format!("{a}-1"), &[5001]);
            assert_eq!(
                lab.connect(
                    &format!("{b}-1"),
                    at(lab.addr(&format!("{a}-1")), 5001),
                    None
                ),
                Err(TIMEOUT),
                "{b} -> {a}: a connect back got through, so {technique} is not needed"
            );
        }
        let (r0, r1) = transfer(&lab, d, &format!("tq{n}"), a, b);
        let out = String::from_utf8_lossy(&r0.stdout);
        let want = format!("by {technique}: checksum ok");
        if !(r0.status.success() && r1.status.success() && out.contains(&want)) {
            failures.push(format!(
                "{a} -> {b} (want {technique}): rank 0 {}: {out}{}\nrank 1 {}: {}",
                r0.status,
                String::from_utf8_lossy(&r0.stderr),
                r1.status,
                String::from_utf8_lossy(&r1.stderr)
            ));
        }
    }
    drop(services);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
