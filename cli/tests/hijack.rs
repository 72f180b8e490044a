//! Another local user against a submitted job, on the real services (broker with its
//! job API, two frontals, a helper per cluster, each from a config file): alice's job
//! is placed on `orsay-1` only; `nobody`, a member of both helpers' socket group,
//! tries to register one of her ranks, look her processes up and end her job, through
//! her node's helper and through a helper of another cluster. Every try is refused,
//! naming what was wrong, and her job runs on with the same addresses.
//!
//! Needs root (the child processes' uid is set) and the workspace's binaries built.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use qcg_proto::{AccessPoint, ProcName, Request, Response};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
const CHILD_ENV: &str = "QCG_TEST_HIJACK_CHILD";

/// One request on a new connection; the answer.
fn ask(socket: &Path, req: &Request) -> std::io::Result<Response> {
    let mut s = UnixStream::connect(socket)?;
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

/// A rank of alice's job: this test binary, started by the helper. It joins the job
/// (registers its listener) and stays.
#[test]
fn hijack_rank() {
    if std::env::var(qcg_proto::env::JOB).is_err() || std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let comm = qcg::init().unwrap();
    println!("rank {} joined", comm.rank());
    std::thread::sleep(Duration::from_secs(600));
}

/// The attacker: runs as another user, sends each request of $CHILD_ENV on its own
/// connection and prints each answer as a JSON line.
#[test]
fn hijack_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let reqs: Vec<(PathBuf, Request)> = serde_json::from_str(&spec).unwrap();
    for (socket, r) in reqs {
        let line = match ask(&socket, &r) {
            Ok(resp) => serde_json::to_string(&resp).unwrap(),
            Err(e) => format!("\"io error: {e}\""),
        };
        println!("ANSWER {line}");
    }
}

/// Runs `reqs` (socket, request) as `nobody` in a real child process; the answers.
fn as_nobody(reqs: &[(PathBuf, Request)]) -> Vec<String> {
    let spec = serde_json::to_string(reqs).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hijack_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, spec)
        .gid(NOBODY)
        .uid(NOBODY)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once("ANSWER ").map(|(_, a)| a.to_string()))
        .collect()
}

fn register(job: &str, rank: u32, cluster: &str, node: &str, port: u16) -> Request {
    Request::Register(AccessPoint {
        process: ProcName::new(job, rank),
        cluster: cluster.into(),
        node: node.into(),
        private_addr: "127.0.0.1".parse().unwrap(),
        public_addr: None,
        port,
    })
}

fn lookup(job: &str, from: u32, target: u32) -> Request {
    Request::Lookup {
        from: ProcName::new(job, from),
        target: ProcName::new(job, target),
    }
}

struct Grid {
    dir: tempfile::TempDir,
    _services: Services,
    url: String,
}

/// `orsay` (node orsay-1, 4 slots) and `rennes` (node rennes-1, 1 slot), both open;
/// both helpers' sockets in group `nobody`.
fn grid() -> Grid {
    let dir = grid_ca(&[
        ("broker", "broker"),
        ("frontal", "orsay"),
        ("frontal", "rennes"),
        ("helper", "orsay-1"),
        ("helper", "rennes-1"),
        ("client", "alice"),
    ]);
    let d = dir.path();
    // `nobody` must reach the sockets inside.
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut services = Services(Vec::new());
    let cfg = write(
        d,
        "broker.toml",
        "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n",
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
    for (cluster, node, slots) in [("orsay", "orsay-1", 4), ("rennes", "rennes-1", 1)] {
        let cfg = write(
            d,
            &format!("frontal-{cluster}.toml"),
            &format!(
                "cluster = \"{cluster}\"\npolicy = \"open\"\nbroker = \"{broker}\"\nlisten = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/{cluster}.pem\"\nkey = \"ca/{cluster}.key\"\n\n[[nodes]]\nname = \"{node}\"\nslots = {slots}\nmemory_mib = 8192\n"
            ),
        );
        let lines = start(&mut services, "qcg-frontal", &cfg);
        let at = wait_for(
            &lines,
            &format!("qcg-frontal: cluster {cluster} serving helpers on"),
        );
        let cfg = write(
            d,
            &format!("helper-{node}.toml"),
            &format!(
                "node = \"{node}\"\nfrontal = \"{at}\"\nsocket = \"{node}.sock\"\nsocket_group = \"{NOBODY}\"\nbind_address = \"127.0.0.1\"\nca = \"ca/ca.pem\"\ncert = \"ca/{node}.pem\"\nkey = \"ca/{node}.key\"\n\n# Test grid, run as root: root allowed explicitly.\n[accounts]\ndefault = \"root\"\nallow_root = true\n"
            ),
        );
        let lines = start(&mut services, "qcg-helper", &cfg);
        wait_for(&lines, &format!("qcg-helper: node {node} serving"));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t: serde_json::Value = serde_json::from_str(&http_get(http, "/v1/topology")).unwrap();
        let nodes: usize = t["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["nodes"].as_array().map_or(0, |n| n.len()))
            .sum();
        if nodes == 2 && t["links"].as_array().map_or(0, |l| l.len()) == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "topology incomplete: {t}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Grid {
        dir,
        _services: services,
        url,
    }
}

impl Grid {
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

    fn socket(&self, node: &str) -> PathBuf {
        self.dir.path().join(format!("{node}.sock"))
    }
}

/// Asks until the answer is a plan (the ranks are still joining); the plan, as JSON.
fn plan(socket: &Path, req: &Request) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = ask(socket, req).unwrap();
        if matches!(r, Response::Plan(_)) {
            return serde_json::to_string(&r).unwrap();
        }
        assert!(Instant::now() < deadline, "no plan: {r:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn another_user_cannot_act_for_a_job_placed_elsewhere() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs requests as `nobody`: run it as root"
    );
    let g = grid();
    let exe = std::env::current_exe().unwrap();
    // Two ranks in one group: only orsay-1 holds both.
    let xml = format!(
        r#"<grmsJob appId="alice">
  <task taskId="t">
    <resourcesDescription><topology>
      <group groupId="g"><processes><processesCount><value>2</value></processesCount></processes></group>
    </topology></resourcesDescription>
    <execution type="qcg"><executable>{}</executable>
      <arguments><value>--exact</value><value>hijack_rank</value><value>--nocapture</value><value>--test-threads=1</value></arguments>
    </execution>
  </task>
</grmsJob>
"#,
        exe.display()
    );
    let path = write(g.dir.path(), "alice.xml", &xml);
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
    let orsay = g.socket("orsay-1");
    let rennes = g.socket("rennes-1");
    // Her ranks joined (root plays her side: it may act for any job).
    let p01 = plan(&orsay, &lookup(&id, 0, 1));
    let p10 = plan(&orsay, &lookup(&id, 1, 0));
    let s = g.status(&id);
    assert!(s.contains(": running"), "{s}");
    assert_eq!(s.matches("orsay/orsay-1").count(), 2, "{s}");

    let forged = [
        // Through another cluster's helper: her rank 1 moved to port 9 of rennes-1.
        (rennes.clone(), register(&id, 1, "rennes", "rennes-1", 9)),
        (rennes.clone(), lookup(&id, 1, 0)),
        (rennes.clone(), Request::JobEnd { job: id.clone() }),
        // A registration claiming another node.
        (rennes.clone(), register(&id, 1, "orsay", "orsay-1", 9)),
        // Through her own node's helper.
        (orsay.clone(), register(&id, 1, "orsay", "orsay-1", 9)),
        (orsay.clone(), lookup(&id, 1, 0)),
        (orsay.clone(), Request::JobEnd { job: id.clone() }),
    ];
    let answers = as_nobody(&forged);
    assert_eq!(answers.len(), forged.len(), "{answers:?}");
    for ((socket, req), a) in forged.iter().zip(&answers) {
        eprintln!("{} via {}: {a}", req.kind(), socket.display());
    }
    for ((socket, req), a) in forged.iter().zip(&answers) {
        let what = format!("{} via {}", req.kind(), socket.display());
        assert!(a.contains("forbidden"), "{what}: {a}");
        assert!(a.contains(&id), "{what}: {a}");
        assert!(a.contains(req.kind()), "{what}: {a}");
    }
    // The broker (or frontal) names where the rank was placed.
    assert!(
        answers[0].contains("placed on node orsay-1"),
        "{}",
        answers[0]
    );
    assert!(
        answers[1].contains("placed on node orsay-1"),
        "{}",
        answers[1]
    );
    assert!(answers[2].contains("submitted"), "{}", answers[2]);
    assert!(
        answers[3].contains("serves node rennes-1"),
        "{}",
        answers[3]
    );

    // Nothing of her job changed: it runs, and her lookups give the same addresses.
    assert_eq!(plan(&orsay, &lookup(&id, 0, 1)), p01);
    assert_eq!(plan(&orsay, &lookup(&id, 1, 0)), p10);
    assert!(!p01.contains(":9\""), "{p01}");
    let s = g.status(&id);
    assert!(s.contains(": running"), "{s}");
    assert!(!s.contains("exited"), "{s}");

    // A job the broker did not place (as `qcg run` starts them), running on orsay-1:
    // ended from rennes-1 by another user, refused: it is root's (hijack_run.rs).
    assert_eq!(
        ask(&orsay, &register("roots-run", 0, "orsay", "orsay-1", 40001)).unwrap(),
        Response::Ok
    );
    let end = as_nobody(&[(
        rennes.clone(),
        Request::JobEnd {
            job: "roots-run".into(),
        },
    )]);
    assert!(
        end[0].contains("forbidden") && end[0].contains("was started by uid 0 on node orsay-1"),
        "{end:?}"
    );
    assert!(matches!(
        ask(&orsay, &lookup("roots-run", 0, 0)).unwrap(),
        Response::Plan(_)
    ));

    // nobody's own `qcg run`-style job (not placed by the broker) is still served.
    let own = as_nobody(&[(
        rennes.clone(),
        register("nobodys-own", 0, "rennes", "rennes-1", 40000),
    )]);
    assert_eq!(own[0], serde_json::to_string(&Response::Ok).unwrap());

    let _ = g.qcg_as_alice(&["cancel", &id]).output();
    let _ = submit.kill();
    let _ = submit.wait();
}
