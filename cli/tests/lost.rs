//! Revocation and lost nodes on the real services (broker with its job API, two
//! frontals, a helper per cluster, each from a config file naming the grid's CRL):
//! `qcg ca revoke` of a connected helper, relay proxy or frontal cuts its live
//! connection and takes it out of `/v1/topology` (or of the live proxies); a job whose node went away unseen (its helper killed
//! while its frontal was being restarted) fails once the broker's grace has passed,
//! naming the node, instead of running on.
//!
//! Needs the workspace's binaries built first.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The broker's grace for a lost node in these tests.
const GRACE_S: u64 = 3;

struct Grid {
    dir: tempfile::TempDir,
    services: Services,
    http: SocketAddr,
    url: String,
    broker: SocketAddr,
    /// Index in `services` of each service, by name.
    index: Vec<(String, usize)>,
    /// Each service's log (stdout) lines, by name.
    logs: Vec<(String, mpsc::Receiver<String>)>,
}

impl Grid {
    fn at(&self, name: &str) -> usize {
        self.index.iter().find(|(n, _)| n == name).unwrap().1
    }

    fn kill(&mut self, name: &str) {
        let i = self.at(name);
        let c = &mut self.services.0[i];
        c.kill().unwrap();
        c.wait().unwrap();
    }

    fn frontal_cfg(&self, cluster: &str) -> PathBuf {
        self.dir.path().join(format!("frontal-{cluster}.toml"))
    }

    fn start_frontal(&mut self, cluster: &str) -> String {
        let cfg = self.frontal_cfg(cluster);
        let lines = start(&mut self.services, "qcg-frontal", &cfg);
        self.index
            .push((format!("frontal-{cluster}"), self.services.0.len() - 1));
        let at = wait_for(
            &lines,
            &format!("qcg-frontal: cluster {cluster} serving helpers on"),
        );
        self.logs.push((format!("frontal-{cluster}"), lines));
        at
    }

    fn topology(&self) -> serde_json::Value {
        serde_json::from_str(&http_get(self.http, "/v1/topology")).unwrap()
    }

    /// The nodes of `/v1/topology`, as "cluster/node".
    fn nodes(&self) -> Vec<String> {
        let t = self.topology();
        let mut out = Vec::new();
        for c in t["clusters"].as_array().into_iter().flatten() {
            for n in c["nodes"].as_array().into_iter().flatten() {
                out.push(format!(
                    "{}/{}",
                    c["name"].as_str().unwrap(),
                    n["name"].as_str().unwrap()
                ));
            }
        }
        out
    }

    fn qcg_as_alice(&self, args: &[&str]) -> Command {
        let ca = self.dir.path().join("ca");
        let mut c = Command::new(bin("qcg"));
        c.args(args).args([
            "--broker",
            &self.url,
            "--cert",
            ca.join("alice.pem").to_str().unwrap(),
            "--key",
            ca.join("alice.key").to_str().unwrap(),
            "--ca",
            ca.join("ca.pem").to_str().unwrap(),
        ]);
        c
    }

    fn status(&self, id: &str) -> String {
        let o = self.qcg_as_alice(&["status", id]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The log lines of `name` so far that contain `needle`.
    fn logged(&self, name: &str, needle: &str) -> Vec<String> {
        self.logs
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, rx)| rx.try_iter())
            .filter(|l| l.contains(needle))
            .collect()
    }

    fn revoke(&self, name: &str) {
        let ca = self.dir.path().join("ca");
        let o = qcg(&["ca", "revoke", "--dir", ca.to_str().unwrap(), name]);
        assert!(o.status.success(), "{o:?}");
    }
}

/// `orsay` (node orsay-1, 4 slots) and `rennes` (node rennes-1, 1 slot), both open;
/// every service checks the grid's CRL.
fn grid() -> Grid {
    let dir = grid_ca(&[
        ("broker", "broker"),
        ("frontal", "orsay"),
        ("frontal", "rennes"),
        ("helper", "orsay-1"),
        ("helper", "rennes-1"),
        ("client", "alice"),
        ("proxy", "relay"),
    ]);
    let d = dir.path();
    let mut services = Services(Vec::new());
    let cfg = write(
        d,
        "broker.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\n\
             ca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\ncrl = \"ca/crl.pem\"\n\
             lost_node_grace_secs = {GRACE_S}\n"
        ),
    );
    let lines = start(&mut services, "qcg-broker", &cfg);
    let broker: SocketAddr = wait_for(&lines, "qcg-broker: QUIC on").parse().unwrap();
    let http: SocketAddr = wait_for(&lines, "qcg-broker: HTTP API on http://")
        .parse()
        .unwrap();
    let url = format!(
        "https://{}",
        wait_for(&lines, "qcg-broker: HTTPS API on https://")
    );
    let mut g = Grid {
        dir,
        services,
        http,
        url,
        broker,
        index: vec![("broker".into(), 0)],
        logs: vec![("broker".into(), lines)],
    };
    for (cluster, node, slots) in [("orsay", "orsay-1", 4), ("rennes", "rennes-1", 1)] {
        write(
            g.dir.path(),
            &format!("frontal-{cluster}.toml"),
            &format!(
                "cluster = \"{cluster}\"\npolicy = \"open\"\nbroker = \"{}\"\nlisten = \"127.0.0.1:0\"\n\
                 ca = \"ca/ca.pem\"\ncert = \"ca/{cluster}.pem\"\nkey = \"ca/{cluster}.key\"\ncrl = \"ca/crl.pem\"\n\n\
                 [[nodes]]\nname = \"{node}\"\nslots = {slots}\nmemory_mib = 8192\n",
                g.broker
            ),
        );
        let at = g.start_frontal(cluster);
        let cfg = write(
            g.dir.path(),
            &format!("helper-{node}.toml"),
            &format!(
                "node = \"{node}\"\nfrontal = \"{at}\"\nsocket = \"{node}.sock\"\nbind_address = \"127.0.0.1\"\n\
                 ca = \"ca/ca.pem\"\ncert = \"ca/{node}.pem\"\nkey = \"ca/{node}.key\"\n\n\
                 # Test grid, run as root: root allowed explicitly.\n[accounts]\ndefault = \"root\"\nallow_root = true\n"
            ),
        );
        let lines = start(&mut g.services, "qcg-helper", &cfg);
        g.index.push((node.into(), g.services.0.len() - 1));
        wait_for(&lines, &format!("qcg-helper: node {node} serving"));
        g.logs.push((node.into(), lines));
    }
    wait_until("both nodes in the topology", || g.nodes().len() == 2);
    g
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_revoked_helper_proxy_or_frontal_is_cut_and_leaves_the_topology() {
    let mut g = grid();
    // Connected helpers and frontals stay up until the CRL names them.
    assert_eq!(g.nodes(), ["orsay/orsay-1", "rennes/rennes-1"]);
    g.revoke("rennes-1");
    wait_until("rennes-1 out of the topology", || {
        g.nodes() == ["orsay/orsay-1"]
    });
    let said = g.logged("frontal-rennes", "certificate revoked");
    assert!(
        said.iter().any(|l| l.contains("helper of node rennes-1")),
        "{said:?}"
    );
    // A relay proxy, connected, then revoked: no longer alive for the broker.
    let cfg = write(
        g.dir.path(),
        "proxy.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\nbroker = \"{}\"\nca = \"ca/ca.pem\"\ncert = \"ca/relay.pem\"\n\
             key = \"ca/relay.key\"\ncrl = \"ca/crl.pem\"\n",
            g.broker
        ),
    );
    let lines = start(&mut g.services, "qcg-proxy", &cfg);
    wait_for(&lines, "qcg-proxy: relaying on");
    wait_until("the proxy alive", || {
        metric(g.http, "qcg_broker_proxies_alive") == 1
    });
    g.revoke("relay");
    wait_until("the proxy cut", || {
        metric(g.http, "qcg_broker_proxies_alive") == 0
    });
    let said = g.logged("broker", "certificate revoked");
    assert!(
        said.iter().any(|l| l.contains("relay proxy at")),
        "{said:?}"
    );
    g.revoke("orsay");
    wait_until("orsay's node out of the topology", || g.nodes().is_empty());
    let said = g.logged("broker", "certificate revoked");
    assert!(
        said.iter().any(|l| l.contains("frontal of cluster orsay")),
        "{said:?}"
    );
    // They stay out: their dials back are refused (the helper and frontal retry).
    std::thread::sleep(Duration::from_secs(2));
    assert!(g.nodes().is_empty(), "{:?}", g.nodes());
}

#[test]
fn a_job_on_a_node_gone_unseen_fails_after_the_grace_naming_it() {
    let mut g = grid();
    // Five processes: four on orsay-1, one on rennes-1 (the only fit).
    let xml = r#"<grmsJob appId="lost">
  <task taskId="t">
    <resourcesDescription><topology>
      <group groupId="g1"><processes><processesCount><value>4</value></processesCount></processes></group>
      <group groupId="g2"><processes><processesCount><value>1</value></processesCount></processes></group>
    </topology></resourcesDescription>
    <execution type="qcg"><executable>/bin/sleep</executable><arguments><value>3037</value></arguments></execution>
  </task>
</grmsJob>
"#;
    let path = write(g.dir.path(), "lost.xml", xml);
    let mut submit = g
        .qcg_as_alice(&["submit", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, err) = mpsc::channel();
    let stderr = submit.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let id = wait_for(&err, "qcg: job ")
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    wait_until("every rank running", || {
        let s = g.status(&id);
        s.contains(": running") && s.matches("running").count() == 6
    });
    assert!(g.status(&id).contains("rennes/rennes-1"));
    // rennes' frontal and rennes-1's helper die together; the frontal is back before
    // the broker noticed it gone, without the helper: nobody reports the node lost.
    g.kill("rennes-1");
    g.kill("frontal-rennes");
    g.start_frontal("rennes");
    wait_until("the job failed", || !g.status(&id).contains(": running"));
    let s = g.status(&id);
    assert!(s.contains("node rennes-1"), "{s}");
    assert!(s.contains(&format!("lost for {GRACE_S} s")), "{s}");
    assert_eq!(submit.wait().unwrap().code(), Some(1));
}
