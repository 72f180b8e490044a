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
use qcg_grid::services::{
    forged_child, shown, test_child_args, Cluster, Node, OtherUser, ServiceGrid, NOBODY,
};

use qcg_proto::{Request, Response};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A rank of alice's job: this test binary, started by the helper. It joins the job
/// (registers its listener) and stays.
#[test]
fn hijack_rank() {
    if std::env::var(qcg_proto::env::JOB).is_err()
        || std::env::var(qcg_grid::services::FORGED_ENV).is_ok()
    {
        return;
    }
    let comm = qcg::init().unwrap();
    println!("rank {} joined", comm.rank());
    std::thread::sleep(Duration::from_secs(600));
}

/// The attacker's side: this binary started again as `nobody` by [`as_nobody`].
#[test]
fn hijack_child() {
    forged_child();
}

/// Runs `reqs` (socket, request) as `nobody` in a real child process; the answers.
fn as_nobody(reqs: &[(PathBuf, Request)]) -> Vec<String> {
    let answers = OtherUser::NOBODY
        .ask(reqs, &test_child_args("hijack_child"))
        .unwrap();
    answers.iter().map(shown).collect()
}

struct Grid {
    s: ServiceGrid,
}

/// `orsay` (node orsay-1, 4 slots) and `rennes` (node rennes-1, 1 slot), both open;
/// both helpers' sockets in group `nobody`.
fn grid() -> Grid {
    let node = |name, slots| {
        Node::new(name)
            .slots(slots)
            .memory_mib(8192)
            .helper_config(&format!("socket_group = \"{NOBODY}\""))
    };
    let s = ServiceGrid::builder()
        // `nobody` must reach the sockets inside.
        .dir_mode(0o755)
        .cluster(Cluster::new("orsay").node(node("orsay-1", 4)))
        .cluster(Cluster::new("rennes").node(node("rennes-1", 1)))
        .cert("client", "alice")
        .wait_for_topology()
        .start()
        .unwrap();
    Grid { s }
}

impl Grid {
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

    fn socket(&self, node: &str) -> PathBuf {
        self.s.socket(node)
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
    let path = write(g.s.dir(), "alice.xml", &xml);
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
