//! Another local user against a job of `qcg run`, which the broker does not place, on
//! the real services (broker, two frontals, three helpers, each from a config file):
//! alice (a uid of her own) runs `qcg run` on `orsay-1`'s helper; `nobody`, a member
//! of every helper's socket group like her, tries to register one of her ranks, look
//! her ranks up, unregister one and end her job, through her node's helper, through
//! another node's helper of her cluster and through a helper of another cluster.
//! Every try is refused, naming the job and what was wrong; her ranks keep their
//! addresses, and her own `qcg run` still ends its job.
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
/// Alice: a uid no account has, in group `nobody` (the helpers' socket group).
const ALICE: u32 = 4242;
const CHILD_ENV: &str = "QCG_TEST_HIJACK_RUN_CHILD";
const DONE_ENV: &str = "QCG_TEST_HIJACK_RUN_DONE";

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

/// A rank of alice's job: this test binary, started by `qcg run`. It joins the job
/// (registers its listener), says so, and leaves once the file $DONE_ENV exists.
#[test]
fn hijack_run_rank() {
    let (Ok(job), Ok(done)) = (std::env::var(qcg_proto::env::JOB), std::env::var(DONE_ENV)) else {
        return;
    };
    let comm = qcg::init().unwrap();
    // On a line of its own: the test harness has begun one (`test NAME ... `).
    println!("\nJOINED {job} {}", comm.rank());
    let deadline = Instant::now() + Duration::from_secs(300);
    while !Path::new(&done).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A local user's side: sends each request of $CHILD_ENV on its own connection and
/// prints each answer as a JSON line.
#[test]
fn hijack_run_child() {
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

/// Runs `reqs` (socket, request) as `uid` (group `nobody`) in a real child process;
/// the answers.
fn as_user(uid: u32, reqs: &[(PathBuf, Request)]) -> Vec<String> {
    let spec = serde_json::to_string(reqs).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hijack_run_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, spec)
        .gid(NOBODY)
        .uid(uid)
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

/// `orsay` (nodes orsay-1 and orsay-2) and `rennes` (node rennes-1), all open; every
/// helper's socket in group `nobody`. The folder and the services.
fn grid() -> (tempfile::TempDir, Services) {
    let dir = grid_ca(&[
        ("broker", "broker"),
        ("frontal", "orsay"),
        ("frontal", "rennes"),
        ("helper", "orsay-1"),
        ("helper", "orsay-2"),
        ("helper", "rennes-1"),
    ]);
    let d = dir.path();
    // Alice and `nobody` must reach the sockets inside.
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut services = Services(Vec::new());
    let cfg = write(
        d,
        "broker.toml",
        "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n",
    );
    let lines = start(&mut services, "qcg-broker", &cfg);
    let broker: SocketAddr = wait_for(&lines, "qcg-broker: QUIC on").parse().unwrap();
    let http: SocketAddr = wait_for(&lines, "qcg-broker: HTTP API on http://")
        .parse()
        .unwrap();
    for (cluster, nodes) in [
        ("orsay", &["orsay-1", "orsay-2"][..]),
        ("rennes", &["rennes-1"]),
    ] {
        let listed: String = nodes
            .iter()
            .map(|n| format!("\n[[nodes]]\nname = \"{n}\"\nslots = 2\nmemory_mib = 8192\n"))
            .collect();
        let cfg = write(
            d,
            &format!("frontal-{cluster}.toml"),
            &format!(
                "cluster = \"{cluster}\"\npolicy = \"open\"\nbroker = \"{broker}\"\nlisten = \"127.0.0.1:0\"\nca = \"ca/ca.pem\"\ncert = \"ca/{cluster}.pem\"\nkey = \"ca/{cluster}.key\"\n{listed}"
            ),
        );
        let lines = start(&mut services, "qcg-frontal", &cfg);
        let at = wait_for(
            &lines,
            &format!("qcg-frontal: cluster {cluster} serving helpers on"),
        );
        for node in nodes {
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
        if nodes == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "topology incomplete: {t}");
        std::thread::sleep(Duration::from_millis(100));
    }
    (dir, services)
}

/// Asks as alice until the answer is a plan (her ranks are still joining); the plan,
/// as JSON.
fn plan_as_alice(socket: &Path, req: &Request) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = as_user(ALICE, &[(socket.to_path_buf(), req.clone())]);
        if a[0].contains("\"Plan\"") {
            return a[0].clone();
        }
        assert!(Instant::now() < deadline, "no plan: {a:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn another_user_cannot_act_for_a_job_of_qcg_run() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs requests as other users: run it as root"
    );
    let (dir, _services) = grid();
    let d = dir.path();
    let sock = |node: &str| d.join(format!("{node}.sock"));
    let (orsay1, orsay2, rennes1) = (sock("orsay-1"), sock("orsay-2"), sock("rennes-1"));
    let done = d.join("done");
    let exe = std::env::current_exe().unwrap();

    // Alice's job: two ranks on orsay-1, started by her `qcg run`.
    let mut run = Command::new(bin("qcg"))
        .args(["run", "-n", "2", "--timeout", "300", "--helper"])
        .arg(&orsay1)
        .arg("-x")
        .arg(format!("{DONE_ENV}={}", done.display()))
        .arg("--")
        .arg(&exe)
        .args([
            "--exact",
            "hijack_run_rank",
            "--nocapture",
            "--test-threads=1",
        ])
        .current_dir(d)
        .stdin(Stdio::null())
        .gid(NOBODY)
        .uid(ALICE)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, joined) = mpsc::channel();
    let stdout = run.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let stderr = run.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(stderr).read_to_string(&mut s);
        s
    });
    let id = wait_for(&joined, "JOINED ")
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    wait_for(&joined, &format!("JOINED {id} "));
    let p01 = plan_as_alice(&orsay1, &lookup(&id, 0, 1));
    let p10 = plan_as_alice(&orsay1, &lookup(&id, 1, 0));

    let unregister = |rank| Request::Unregister {
        process: ProcName::new(&id, rank),
    };
    let end = Request::JobEnd { job: id.clone() };
    let forged = [
        // Another node of her cluster: her rank 1 moved to port 9 of orsay-2.
        (orsay2.clone(), register(&id, 1, "orsay", "orsay-2", 9)),
        (orsay2.clone(), lookup(&id, 1, 0)),
        (orsay2.clone(), unregister(1)),
        (orsay2.clone(), end.clone()),
        // Another cluster.
        (rennes1.clone(), register(&id, 1, "rennes", "rennes-1", 9)),
        (rennes1.clone(), lookup(&id, 1, 0)),
        (rennes1.clone(), unregister(1)),
        (rennes1.clone(), end.clone()),
        // Her own node.
        (orsay1.clone(), register(&id, 1, "orsay", "orsay-1", 9)),
        (orsay1.clone(), lookup(&id, 1, 0)),
        (orsay1.clone(), end.clone()),
    ];
    let answers = as_user(NOBODY, &forged);
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
    // The broker names whose job it is and who asked.
    for a in &answers[..8] {
        assert!(
            a.contains(&format!("was started by uid {ALICE} on node orsay-1")),
            "{a}"
        );
        assert!(a.contains(&format!("uid {NOBODY} on node")), "{a}");
    }

    // Nothing of her job changed: her lookups give the same addresses.
    assert_eq!(plan_as_alice(&orsay1, &lookup(&id, 0, 1)), p01);
    assert_eq!(plan_as_alice(&orsay1, &lookup(&id, 1, 0)), p10);
    assert!(!p01.contains(":9\""), "{p01}");
    // Through another cluster's helper on her machine, hers still.
    let a = as_user(ALICE, &[(rennes1.clone(), lookup(&id, 1, 0))]);
    assert!(a[0].contains("\"Plan\""), "{a:?}");

    // `nobody`'s own job, not placed by the broker either, is served.
    let own = as_user(
        NOBODY,
        &[(
            rennes1.clone(),
            register("nobodys-own", 0, "rennes", "rennes-1", 40000),
        )],
    );
    assert_eq!(own[0], serde_json::to_string(&Response::Ok).unwrap());

    // Her ranks leave; her `qcg run` ends her job (its `job_end` is hers to send).
    std::fs::write(&done, b"").unwrap();
    let status = run.wait().unwrap();
    let said = said.join().unwrap();
    assert!(status.success(), "qcg run: {status}: {said}");
    assert!(!said.contains("could not tell the grid"), "{said}");
    // Forgotten by the broker (the frontal's cache is told a moment later).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let after = as_user(ALICE, &[(orsay1.clone(), lookup(&id, 1, 0))]);
        if after[0].contains("is not registered") {
            break;
        }
        assert!(Instant::now() < deadline, "{after:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
