//! The real binaries as separate processes on loopback: a broker, two frontals, two
//! helpers, jobs across both clusters, and bad input thrown at each of them.
//!
//! Needs the workspace's binaries and examples built first
//! (`cargo build --workspace --bins --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{Cluster, Node, ServiceGrid};

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

struct Grid {
    s: ServiceGrid,
    http: SocketAddr,
    broker: SocketAddr,
    sockets: [PathBuf; 2],
}

fn grid() -> Grid {
    let s = ServiceGrid::builder()
        .no_https()
        .cluster(Cluster::new("alpha").node(Node::new("a1")))
        .cluster(
            Cluster::new("beta")
                .policy("port-range 43000-43099")
                .node(Node::new("b1")),
        )
        .start()
        .unwrap();
    Grid {
        http: s.http().unwrap(),
        broker: s.quic().unwrap(),
        sockets: [s.socket("a1"), s.socket("b1")],
        s,
    }
}

fn run_job(g: &Grid, n: &str, example_name: &str) -> Output {
    let a = g.sockets[0].to_str().unwrap();
    let b = g.sockets[1].to_str().unwrap();
    Command::new(bin("qcg"))
        .args([
            "run",
            "--tag-output",
            "-n",
            n,
            "--timeout",
            "60",
            "--helper",
            a,
            "--helper",
            b,
            "--",
        ])
        .arg(example(example_name))
        .output()
        .unwrap()
}

#[test]
fn jobs_run_across_two_clusters_of_real_services() {
    let g = grid();
    let clusters = http_get(g.http, "/v1/clusters");
    assert!(
        clusters.contains("\"alpha\"") && clusters.contains("\"beta\""),
        "{clusters}"
    );

    // The ring: the token goes through both clusters.
    let o = run_job(&g, "4", "ring");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("[0] round 0: token came back as 4 after visiting 4 ranks"),
        "{out}"
    );
    assert!(
        out.contains("[1] round 0: rank 1 on b1 (beta) got 1 from 0"),
        "{out}"
    );
    let links: serde_json::Value = serde_json::from_str(&http_get(g.http, "/v1/links")).unwrap();
    // 0→1 and 2→3 reach beta through its port range, 1→2 and 3→0 reach alpha directly.
    assert_eq!(links["port-range"]["ok"], 2, "{links}");
    assert_eq!(links["direct"]["ok"], 2, "{links}");
    // The job ended: the registry forgot its processes.
    // (Process addresses are on the HTTPS API only; plain HTTP gives the count.)
    assert_eq!(metric(g.http, "qcg_broker_processes"), 0);

    // The frontal cache: ranks 1..5 all look up rank 0, the broker is asked once per
    // cluster.
    let before = metric(g.http, "qcg_broker_lookups_total{result=\"plan\"}");
    let o = run_job(&g, "6", "fanin");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("[0] rank 0 greeted 5 ranks"), "{out}");
    assert!(out.contains("[5] welcome, rank 5 of beta"), "{out}");
    let after = metric(g.http, "qcg_broker_lookups_total{result=\"plan\"}");
    assert_eq!(
        after - before,
        2,
        "5 lookups of rank 0 from 2 clusters reached the broker {} times",
        after - before
    );
    drop(g);
}

#[test]
fn a_failing_rank_is_named_and_the_job_stopped() {
    let g = grid();
    // pingpong with one rank refuses to run: rank 0 exits with an error.
    let a = g.sockets[0].to_str().unwrap();
    let o = Command::new(bin("qcg"))
        .args(["run", "-n", "1", "--timeout", "60", "--helper", a, "--"])
        .arg(example("pingpong"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rank 0 exited with status 1"), "{err}");
    assert!(err.contains("pingpong needs at least 2 ranks"), "{err}");
}

#[test]
fn the_helper_answers_bad_frames_and_keeps_serving() {
    let g = grid();
    use std::os::unix::net::UnixStream;
    let ask = |bytes: &[u8]| -> serde_json::Value {
        let mut s = UnixStream::connect(&g.sockets[0]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(bytes).unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).unwrap();
        serde_json::from_slice(&body).unwrap()
    };
    let frame = |body: &[u8]| {
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    };
    let r = ask(&frame(b"{not json"));
    assert_eq!(r["body"]["Error"]["kind"], "malformed", "{r}");
    let r = ask(&(u32::MAX).to_be_bytes());
    assert_eq!(r["body"]["Error"]["kind"], "too_large", "{r}");
    assert!(r["body"]["Error"]["message"]
        .as_str()
        .unwrap()
        .contains("exceeds the maximum"));
    let r = ask(&frame(br#"{"v":9,"body":"NodeInfo"}"#));
    assert_eq!(r["body"]["Error"]["kind"], "version", "{r}");
    let r = ask(&frame(br#"{"v":1,"body":{"Lookup":{"from":{"job":"nobody","rank":0},"target":{"job":"nobody","rank":3}}}}"#));
    assert_eq!(r["body"]["Error"]["kind"], "unknown_process", "{r}");
    assert!(
        r["body"]["Error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody/3"),
        "{r}"
    );
    // And a well-formed request on a new connection is served.
    let r = ask(&frame(br#"{"v":1,"body":"NodeInfo"}"#));
    assert_eq!(r["body"]["Node"]["node"], "a1", "{r}");
    assert_eq!(r["body"]["Node"]["cluster"]["name"], "alpha", "{r}");
}

#[test]
fn services_refuse_peers_of_another_ca_or_role() {
    let g = grid();
    let d = g.s.dir();
    // A second CA, and a frontal certificate from it.
    let other = d.join("other-ca");
    assert!(qcg(&["ca", "init", "--dir", other.to_str().unwrap()])
        .status
        .success());
    issue(&other, "frontal", "intruder");
    // A helper certificate from the right CA: the wrong role for the broker.
    issue(&d.join("ca"), "helper", "sneaky");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use qcg_proto::quic;
        use qcg_proto::tls::{Identity, Role};
        let load = |dir: &Path, name: &str| {
            Identity::load(
                &dir.join(format!("{name}.pem")),
                &dir.join(format!("{name}.key")),
                &dir.join("ca.pem"),
            )
            .unwrap()
        };
        let req = qcg_proto::Request::RegisterCluster(qcg_proto::ClusterConfig {
            name: "evil".into(),
            policy: qcg_proto::Policy::Open,
            nat: qcg_proto::Nat::None,
            public_address: None,
        });
        // Another CA: the TLS handshake itself fails (each side distrusts the other).
        let id = load(&other, "intruder");
        let ep = quic::client_endpoint(&id).unwrap();
        let r = quic::connect(&ep, g.broker, Role::Broker).await;
        assert!(r.is_err(), "a certificate from another CA was accepted");
        // The right CA but the wrong role: the broker closes the connection.
        let id = load(&d.join("ca"), "sneaky");
        let ep = quic::client_endpoint(&id).unwrap();
        let outcome = match quic::connect(&ep, g.broker, Role::Broker).await {
            Err(e) => format!("refused at connect: {e}"),
            Ok(conn) => match quic::request(&conn, &req).await {
                Err(e) => format!("refused: {e}"),
                Ok(resp) => panic!("a helper certificate registered a cluster: {resp:?}"),
            },
        };
        assert!(
            outcome.contains("frontal certificate is required") || outcome.contains("refused"),
            "{outcome}"
        );
    });
    // The broker kept serving: no `evil` cluster, and jobs still run.
    let clusters = http_get(g.http, "/v1/clusters");
    assert!(!clusters.contains("evil"), "{clusters}");
    let o = run_job(&g, "2", "ring");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn bad_configs_name_file_line_and_field_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        (
            "qcg-broker",
            "listen = \"127.0.0.1:0\"\nca = \"c\"\ncert = \"c\"\nkey = \"k\"\nlisten_http = \"x\"\n",
            ":5:",
            "listen_http",
        ),
        (
            "qcg-broker",
            "listen = \"127.0.0.1:99999\"\nca = \"c\"\ncert = \"c\"\nkey = \"k\"\n",
            ":1:",
            "listen",
        ),
        (
            "qcg-frontal",
            "cluster = \"a\"\npolicy = \"port-range 9000-8000\"\nbroker = \"127.0.0.1:1\"\nlisten = \"127.0.0.1:0\"\nca = \"c\"\ncert = \"c\"\nkey = \"k\"\n",
            ":2:",
            "policy",
        ),
        (
            "qcg-frontal",
            "cluster = \"a\"\npolicy = \"open\"\nnat = true\nbroker = \"127.0.0.1:1\"\nlisten = \"127.0.0.1:0\"\nca = \"c\"\ncert = \"c\"\nkey = \"k\"\n",
            ":3:",
            "nat",
        ),
        (
            "qcg-helper",
            "node = \"n\"\nfrontal = \"127.0.0.1:1\"\nsocket = \"s\"\nbind_address = \"localhost\"\nca = \"c\"\ncert = \"c\"\nkey = \"k\"\n",
            ":4:",
            "bind_address",
        ),
    ];
    for (i, (binary, text, line, field)) in cases.iter().enumerate() {
        let path = write(d, &format!("bad{i}.toml"), text);
        let o = Command::new(bin(binary))
            .arg("--config")
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{binary} case {i}: {err}");
        assert!(
            err.contains(&format!("bad{i}.toml{line}")),
            "{binary} case {i}: {err}"
        );
        assert!(
            err.contains(&format!("field `{field}`")),
            "{binary} case {i}: {err}"
        );
    }
    // A config that parses but names certificate files that do not exist.
    let path = write(
        d,
        "nocert.toml",
        "listen = \"127.0.0.1:0\"\nca = \"missing-ca.pem\"\ncert = \"c\"\nkey = \"k\"\n",
    );
    let o = Command::new(bin("qcg-broker"))
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("c: No such file"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
