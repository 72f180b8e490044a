//! Another local user against a job of `qcg run`, which the broker does not place, on
//! the real services (broker, two frontals, three helpers, each from a config file):
//! alice (a uid of her own) runs `qcg run` on `orsay-1`'s helper; `nobody`, a member
//! of every helper's socket group like her, tries to register one of her ranks, look
//! her ranks up, unregister one and end her job, through her node's helper, through
//! another node's helper of her cluster and through a helper of another cluster.
//! Every try is refused, naming the job and what was wrong; her ranks keep their
//! addresses, and her own `qcg run` still ends its job. The same holds after the
//! broker is killed and started again: it took her job's user back from its database.
//!
//! Needs root (the child processes' uid is set) and the workspace's binaries built.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{
    forged_child, shown, test_child_args, tls_fields, Cluster, Node, OtherUser, ServiceGrid, NOBODY,
};

use qcg_proto::{ProcName, Request, Response};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Alice: a uid no account has, in group `nobody` (the helpers' socket group).
const ALICE: OtherUser = OtherUser {
    uid: 4242,
    gid: NOBODY,
};
const DONE_ENV: &str = "QCG_TEST_HIJACK_RUN_DONE";

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

/// A local user's side: this binary started again by [`as_user`].
#[test]
fn hijack_run_child() {
    forged_child();
}

/// Runs `reqs` (socket, request) as `user` in a real child process; the answers.
fn as_user(user: OtherUser, reqs: &[(PathBuf, Request)]) -> Vec<String> {
    let answers = user
        .ask(reqs, &test_child_args("hijack_run_child"))
        .unwrap();
    answers.iter().map(shown).collect()
}

/// `orsay` (nodes orsay-1 and orsay-2) and `rennes` (node rennes-1), all open; every
/// helper's socket in group `nobody`; the broker keeps its database in the folder.
fn grid() -> ServiceGrid {
    let node = |name| {
        Node::new(name)
            .slots(2)
            .memory_mib(8192)
            .helper_config(&format!("socket_group = \"{NOBODY}\""))
    };
    let g = ServiceGrid::builder()
        // Alice and `nobody` must reach the sockets inside.
        .dir_mode(0o755)
        .no_https()
        .cluster(
            Cluster::new("orsay")
                .node(node("orsay-1"))
                .node(node("orsay-2")),
        )
        .cluster(Cluster::new("rennes").node(node("rennes-1")))
        .start()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = g.topology().unwrap();
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
    g
}

/// Alice's `qcg run` of two ranks on orsay-1's helper, until the file `done` is made.
struct Run {
    child: Child,
    id: String,
    said: JoinHandle<String>,
}

fn run_as_alice(g: &ServiceGrid, done: &Path) -> Run {
    let exe = std::env::current_exe().unwrap();
    let mut child = ALICE
        .command(bin("qcg"))
        .args(["run", "-n", "2", "--timeout", "300", "--helper"])
        .arg(g.socket("orsay-1"))
        .arg("-x")
        .arg(format!("{DONE_ENV}={}", done.display()))
        .arg("--")
        .arg(&exe)
        .args(test_child_args("hijack_run_rank"))
        .current_dir(g.dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, joined) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let stderr = child.stderr.take().unwrap();
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
    Run { child, id, said }
}

impl Run {
    /// Her ranks leave; her `qcg run` ends her job (its `job_end` is hers to send)
    /// and must say nothing went wrong.
    fn finish(mut self, done: &Path) {
        std::fs::write(done, b"").unwrap();
        let status = self.child.wait().unwrap();
        let said = self.said.join().unwrap();
        assert!(status.success(), "qcg run: {status}: {said}");
        assert!(!said.contains("could not tell the grid"), "{said}");
    }
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

/// Runs `forged` as `nobody`; asserts each is refused, naming the job and the
/// request, and (for those the broker answered, the first `by_broker`) alice as the
/// job's user and `nobody` as the sender.
fn all_refused(id: &str, forged: &[(PathBuf, Request)], by_broker: usize) {
    let answers = as_user(OtherUser::NOBODY, forged);
    assert_eq!(answers.len(), forged.len(), "{answers:?}");
    for ((socket, req), a) in forged.iter().zip(&answers) {
        eprintln!("{} via {}: {a}", req.kind(), socket.display());
    }
    for ((socket, req), a) in forged.iter().zip(&answers) {
        let what = format!("{} via {}", req.kind(), socket.display());
        assert!(a.contains("forbidden"), "{what}: {a}");
        assert!(a.contains(id), "{what}: {a}");
        assert!(a.contains(req.kind()), "{what}: {a}");
    }
    for a in &answers[..by_broker] {
        assert!(
            a.contains(&format!("was started by uid {} on node orsay-1", ALICE.uid)),
            "{a}"
        );
        assert!(a.contains(&format!("uid {NOBODY} on node")), "{a}");
    }
}

#[test]
fn another_user_cannot_act_for_a_job_of_qcg_run() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs requests as other users: run it as root"
    );
    let g = grid();
    let (orsay1, orsay2, rennes1) = (
        g.socket("orsay-1"),
        g.socket("orsay-2"),
        g.socket("rennes-1"),
    );
    let done = g.dir().join("done");

    // Alice's job: two ranks on orsay-1, started by her `qcg run`.
    let run = run_as_alice(&g, &done);
    let id = run.id.clone();
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
        // Her own node (its helper refuses).
        (orsay1.clone(), register(&id, 1, "orsay", "orsay-1", 9)),
        (orsay1.clone(), lookup(&id, 1, 0)),
        (orsay1.clone(), end.clone()),
    ];
    all_refused(&id, &forged, 8);

    // Nothing of her job changed: her lookups give the same addresses.
    assert_eq!(plan_as_alice(&orsay1, &lookup(&id, 0, 1)), p01);
    assert_eq!(plan_as_alice(&orsay1, &lookup(&id, 1, 0)), p10);
    assert!(!p01.contains(":9\""), "{p01}");
    // Through another cluster's helper on her machine, hers still.
    let a = as_user(ALICE, &[(rennes1.clone(), lookup(&id, 1, 0))]);
    assert!(a[0].contains("\"Plan\""), "{a:?}");

    // `nobody`'s own job, not placed by the broker either, is served.
    let own = as_user(
        OtherUser::NOBODY,
        &[(
            rennes1.clone(),
            register("nobodys-own", 0, "rennes", "rennes-1", 40000),
        )],
    );
    assert_eq!(own[0], serde_json::to_string(&Response::Ok).unwrap());

    run.finish(&done);
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

/// Issue 21, the restart race: the broker gives a job of `qcg run` to the first user
/// that registers one of its processes, and after a restart the first registration
/// to arrive used to set that user again. The window is held open here: alice's
/// ranks leave the registry (she unregisters them, so no frontal has a registration
/// of her job to send again), the broker is killed and started again, and only then,
/// with every cluster back, does `nobody` act for her job through the helpers of
/// orsay-2 and rennes-1, which never saw it. Every request is refused naming alice:
/// the broker took her job's user back from its database. Her own requests are
/// served, and her `qcg run` ends its job.
#[test]
fn after_a_broker_restart_another_user_still_cannot_act_for_a_job_of_qcg_run() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs requests as other users: run it as root"
    );
    let mut g = grid();
    let (orsay1, orsay2, rennes1) = (
        g.socket("orsay-1"),
        g.socket("orsay-2"),
        g.socket("rennes-1"),
    );
    let done = g.dir().join("done");
    let run = run_as_alice(&g, &done);
    let id = run.id.clone();
    plan_as_alice(&orsay1, &lookup(&id, 0, 1));
    plan_as_alice(&orsay1, &lookup(&id, 1, 0));
    let unregister = |rank| Request::Unregister {
        process: ProcName::new(&id, rank),
    };
    let ok = serde_json::to_string(&Response::Ok).unwrap();
    let gone = as_user(
        ALICE,
        &[
            (orsay1.clone(), unregister(0)),
            (orsay1.clone(), unregister(1)),
        ],
    );
    assert_eq!(gone, [ok.clone(), ok.clone()]);

    // The broker is killed and started again on the same addresses and database.
    let (quic, http) = (g.quic().unwrap(), g.http().unwrap());
    g.kill("broker").unwrap();
    let cfg = format!(
        "listen = \"{quic}\"\nhttp_listen = \"{http}\"\n{}",
        tls_fields("broker")
    );
    g.start("broker", "qcg-broker", &cfg).unwrap();
    g.line("broker", "qcg-broker: QUIC on").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let clusters = g.http_get("/v1/clusters").unwrap_or_default();
        if clusters.contains("\"orsay\"") && clusters.contains("\"rennes\"") {
            break;
        }
        assert!(Instant::now() < deadline, "clusters not back: {clusters}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let end = Request::JobEnd { job: id.clone() };
    let forged = [
        // The first registration of her job the new broker sees: not hers.
        (rennes1.clone(), register(&id, 1, "rennes", "rennes-1", 9)),
        (rennes1.clone(), lookup(&id, 1, 0)),
        (rennes1.clone(), unregister(1)),
        (rennes1.clone(), end.clone()),
        (orsay2.clone(), register(&id, 0, "orsay", "orsay-2", 9)),
        (orsay2.clone(), lookup(&id, 0, 1)),
        (orsay2.clone(), end.clone()),
    ];
    all_refused(&id, &forged, forged.len());

    // Nothing of her job changed: no rank of it at port 9, and hers to act for.
    let back = as_user(ALICE, &[(rennes1.clone(), lookup(&id, 0, 1))]);
    assert!(!back[0].contains(":9\""), "{back:?}");
    assert!(!back[0].contains("forbidden"), "{back:?}");
    run.finish(&done);
}
