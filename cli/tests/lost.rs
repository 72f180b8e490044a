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
use qcg_grid::services::{Cluster, Node, ServiceGrid};

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The broker's grace for a lost node in these tests.
const GRACE_S: u64 = 3;

struct Grid {
    s: ServiceGrid,
    http: SocketAddr,
}

impl Grid {
    /// Kills the frontal of `cluster` and the helper of its node together.
    fn kill_cluster(&mut self, cluster: &str, node: &str) {
        self.s.kill(&format!("helper-{node}")).unwrap();
        self.s.kill(&format!("frontal-{cluster}")).unwrap();
    }

    /// Starts the frontal of `cluster` again from its config; where it serves.
    fn start_frontal(&mut self, cluster: &str) -> String {
        let name = format!("frontal-{cluster}");
        self.s.restart(&name).unwrap();
        self.s
            .line(
                &name,
                &format!("qcg-frontal: cluster {cluster} serving helpers on"),
            )
            .unwrap()
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
        let mut c = Command::new(bin("qcg"));
        c.args(args).args(self.s.qcg_args("alice"));
        c
    }

    fn status(&self, id: &str) -> String {
        let o = self.qcg_as_alice(&["status", id]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The log lines of `name` so far that contain `needle`.
    fn logged(&self, name: &str, needle: &str) -> Vec<String> {
        self.s
            .log(name)
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    fn revoke(&self, name: &str) {
        let ca = self.s.ca_dir();
        let o = qcg(&["ca", "revoke", "--dir", ca.to_str().unwrap(), name]);
        assert!(o.status.success(), "{o:?}");
    }
}

/// `orsay` (node orsay-1, 4 slots) and `rennes` (node rennes-1, 1 slot), both open;
/// every service checks the grid's CRL.
fn grid() -> Grid {
    let crl = "crl = \"ca/crl.pem\"";
    let cluster = |name, node, slots| {
        Cluster::new(name)
            .frontal_config(crl)
            .node(Node::new(node).slots(slots).memory_mib(8192))
    };
    let s = ServiceGrid::builder()
        .broker_config(&format!("{crl}\nlost_node_grace_secs = {GRACE_S}"))
        .cluster(cluster("orsay", "orsay-1", 4))
        .cluster(cluster("rennes", "rennes-1", 1))
        .cert("client", "alice")
        .start()
        .unwrap();
    let g = Grid {
        http: s.http().unwrap(),
        s,
    };
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
    g.s.start_proxy("relay", "crl = \"ca/crl.pem\"\n").unwrap();
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
    let path = write(g.s.dir(), "lost.xml", xml);
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
    g.kill_cluster("rennes", "rennes-1");
    g.start_frontal("rennes");
    wait_until("the job failed", || !g.status(&id).contains(": running"));
    let s = g.status(&id);
    assert!(s.contains("node rennes-1"), "{s}");
    assert!(s.contains(&format!("lost for {GRACE_S} s")), "{s}");
    assert_eq!(submit.wait().unwrap().code(), Some(1));
}
