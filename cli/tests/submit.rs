//! `qcg submit` against the real binaries as separate processes on loopback: a
//! broker with its HTTPS job API, two frontals, a helper per cluster, and a client
//! certificate. The master-worker job, cancellation, queueing, and bad input.
//!
//! Needs the workspace's binaries and examples built first
//! (`cargo build --workspace --bins --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{Cluster, Node, ServiceGrid};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Grid {
    s: ServiceGrid,
    http: SocketAddr,
    url: String,
}

/// Two clusters, `alpha` (open) and `beta` (port range), one node of 4 slots each.
fn grid() -> Grid {
    let node = |name| Node::new(name).slots(4).memory_mib(8192);
    let s = ServiceGrid::builder()
        .cluster(Cluster::new("alpha").node(node("a1")))
        .cluster(
            Cluster::new("beta")
                .policy("port-range 43100-43199")
                .node(node("b1")),
        )
        .cert("client", "alice")
        .wait_for_topology()
        .start()
        .unwrap();
    let t = s.topology().unwrap();
    assert_eq!(t["clusters"][0]["nodes"][0]["slots"], 4, "{t}");
    assert_eq!(t["clusters"][0]["nodes"][0]["memory_mib"], 8192.0, "{t}");
    Grid {
        http: s.http().unwrap(),
        url: s.url(),
        s,
    }
}

impl Grid {
    fn ca(&self) -> PathBuf {
        self.s.ca_dir()
    }

    fn client_args(&self, name: &str) -> Vec<String> {
        self.s.qcg_args(name)
    }

    fn qcg_as(&self, who: &str, args: &[&str]) -> Output {
        Command::new(bin("qcg"))
            .args(args)
            .args(self.client_args(who))
            .output()
            .unwrap()
    }

    /// `qcg submit` in the background; its stdout and stderr lines on channels.
    fn submit_bg(&self, xml: &Path) -> (Child, mpsc::Receiver<String>, mpsc::Receiver<String>) {
        let mut child = Command::new(bin("qcg"))
            .arg("submit")
            .arg(xml)
            .args(self.client_args("alice"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = |r: Box<dyn Read + Send>| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for l in BufReader::new(r).lines().map_while(Result::ok) {
                    let _ = tx.send(l);
                }
            });
            rx
        };
        let out = lines(Box::new(child.stdout.take().unwrap()));
        let err = lines(Box::new(child.stderr.take().unwrap()));
        (child, out, err)
    }

    fn status(&self, id: &str) -> String {
        let o = self.qcg_as("alice", &["status", id]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

/// The job id from `qcg submit`'s stderr.
fn job_id(err: &mpsc::Receiver<String>) -> String {
    let line = wait_for(err, "qcg: job ");
    line.split_whitespace().next().unwrap().to_string()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Processes whose command line is exactly `words`.
fn count_procs(words: &[&str]) -> usize {
    let want: Vec<u8> = words.iter().flat_map(|w| w.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| *c == want)
        .count()
}

/// A profile of two groups (`g1` of `n1`, `g2` of `n2`) running `exe ARGS`.
fn profile(n1: u32, n2: u32, exe: &str, args: &[&str]) -> String {
    let args: String = args.iter().map(|a| format!("<value>{a}</value>")).collect();
    format!(
        r#"<grmsJob appId="test">
  <task taskId="t">
    <resourcesDescription><topology>
      <group groupId="g1"><processes><processesCount><value>{n1}</value></processesCount></processes></group>
      <group groupId="g2"><processes><processesCount><value>{n2}</value></processesCount></processes></group>
    </topology></resourcesDescription>
    <execution type="qcg"><executable>{exe}</executable><arguments>{args}</arguments></execution>
  </task>
</grmsJob>
"#
    )
}

#[test]
fn the_master_worker_job_runs_on_the_real_services() {
    let g = grid();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let xml = std::fs::read_to_string(repo.join("jobprofile/examples-xml/master-worker.xml"))
        .unwrap()
        .replace(
            "<executable>master_worker<",
            &format!("<executable>{}<", bin("examples/master_worker").display()),
        );
    let path = write(g.s.dir(), "mw.xml", &xml);
    let o = g.qcg_as("alice", &["submit", path.to_str().unwrap()]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{err}\ntopology: {}",
        http_get(g.http, "/v1/topology")
    );
    assert!(
        out.contains("[0] hierarchical master-worker: 48 chunks over 2 groups"),
        "{out}"
    );
    assert!(
        out.contains("[0] result: 48 chunks, sum 8047631614041; sequential computation: 8047631614041: correct"),
        "{out}"
    );
    assert!(err.contains("boss: "), "{err}");
    assert!(err.contains("submitted (central_master: 1 on"), "{err}");
    // The job is over: no process registered, and its status says so.
    // (Process addresses are on the HTTPS API only; plain HTTP gives the count.)
    assert_eq!(metric(g.http, "qcg_broker_processes"), 0);
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("qcg: job "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap();
    let s = g.status(id);
    assert!(s.contains("(master-worker): succeeded"), "{s}");
    assert!(s.contains("exited 0"), "{s}");
    // --vanilla through the same profile: the flat master-worker.
    let path = write(
        g.s.dir(),
        "mw-vanilla.xml",
        &xml.replace(
            "<value>--chunks</value>",
            "<value>--vanilla</value><value>--chunks</value>",
        ),
    );
    let o = g.qcg_as("alice", &["submit", path.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("[0] vanilla master-worker: 48 chunks, 4 workers"),
        "{out}"
    );
    assert!(out.contains(": correct"), "{out}");
}

#[test]
fn cancel_stops_every_process_and_a_second_job_waits_for_slots() {
    let g = grid();
    // 5 + 2 of the 8 slots; each rank leaves a child behind in its process group.
    let xml = profile(5, 2, "/bin/sh", &["-c", "sleep 3017 &amp; exec sleep 3017"]);
    let a = write(g.s.dir(), "a.xml", &xml);
    let (mut first, _out, err) = g.submit_bg(&a);
    let id = job_id(&err);
    wait_until("14 sleeps", || count_procs(&["sleep", "3017"]) == 14);
    assert!(g.status(&id).contains(": running"));
    // A second job of 7 does not fit next to the first: it waits, holding nothing.
    let (mut second, _out2, err2) = g.submit_bg(&a);
    let id2 = job_id(&err2);
    assert_ne!(id, id2);
    assert!(g.status(&id2).contains(": queued"), "{}", g.status(&id2));
    assert_eq!(count_procs(&["sleep", "3017"]), 14);
    // Cancel the first: every process of it goes, on both nodes; the second starts.
    let o = g.qcg_as("alice", &["cancel", &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(first.wait().unwrap().code(), Some(3));
    wait_until("the second job running", || {
        g.status(&id2).contains(": running")
    });
    wait_until("14 sleeps of the second job", || {
        count_procs(&["sleep", "3017"]) == 14
    });
    let o = g.qcg_as("alice", &["cancel", &id2]);
    assert!(o.status.success());
    assert_eq!(second.wait().unwrap().code(), Some(3));
    wait_until("no sleep left", || count_procs(&["sleep", "3017"]) == 0);
    let s = g.status(&id);
    assert!(s.contains(": cancelled"), "{s}");
    // A cancel sends SIGTERM first: `sleep` dies of it.
    assert!(s.contains("killed by signal 15"), "{s}");
    // Unknown jobs are named.
    let o = g.qcg_as("alice", &["status", "job-nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no job `job-nope`"));
}

#[test]
fn a_dying_rank_or_a_missing_program_fails_the_job_and_stops_the_rest() {
    let g = grid();
    let script = "if [ \"$QCG_RANK\" = 3 ]; then sleep 1; echo dying &gt;&amp;2; exit 7; fi; exec sleep 3019";
    let p = write(
        g.s.dir(),
        "die.xml",
        &profile(3, 3, "/bin/sh", &["-c", script]),
    );
    let o = g.qcg_as("alice", &["submit", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("[3] dying"), "{err}");
    assert!(err.contains("failed: rank 3 exited with status 7"), "{err}");
    wait_until("no sleep left", || count_procs(&["sleep", "3019"]) == 0);

    let p = write(
        g.s.dir(),
        "missing.xml",
        &profile(2, 2, "/nonexistent/qcg-prog", &[]),
    );
    let o = g.qcg_as("alice", &["submit", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("could not be started: cannot start `/nonexistent/qcg-prog` on node"),
        "{err}"
    );
    assert!(err.contains("No such file"), "{err}");

    // The slots are free again: a job of all 8 runs.
    let p = write(g.s.dir(), "full.xml", &profile(4, 4, "/bin/echo", &["hi"]));
    let o = g.qcg_as("alice", &["submit", p.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.ends_with("] hi")).count(),
        8,
        "{out}"
    );
    assert!(out.contains("[7] hi"), "{out}");
}

#[test]
fn bad_profiles_infeasible_jobs_and_strangers_are_refused() {
    let g = grid();
    let d = g.s.dir();
    // --check: valid, malformed, unknown element, undefined reference.
    let good = write(d, "good.xml", &profile(1, 1, "/bin/true", &[]));
    let o = qcg(&["submit", "--check", good.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout)
        .contains("valid JobProfile `test`: 2 groups, 2 processes"));
    let base = profile(1, 1, "/bin/true", &[]);
    let cases = [
        ("malformed", base.replace("</task>", "</tsk>"), "malformed XML"),
        ("unknown", base.replace("<task taskId=\"t\">", "<task taskId=\"t\">\n<priority/>"), "unknown element <priority>"),
        (
            "reference",
            base.replace(
                "<processesCount><value>1</value></processesCount></processes></group>\n      <group groupId=\"g2\">",
                "<processesCount><value>1</value></processesCount></processes><processesConnection><groupConnection endpointGroupId=\"nowhere\"><networkResource><templateIdReference>x</templateIdReference></networkResource></groupConnection></processesConnection></group>\n      <group groupId=\"g2\">",
            ),
            "line 4, column",
        ),
    ];
    for (name, xml, want) in &cases {
        assert_ne!(xml, &base, "{name}: the case did not change the profile");
        let p = write(d, &format!("{name}.xml"), xml);
        for args in [vec!["submit", "--check"], vec!["submit"]] {
            let mut args = args.clone();
            args.push(p.to_str().unwrap());
            let o = g.qcg_as("alice", &args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{name}: {err}");
            assert!(err.contains(&format!("{name}.xml: line ")), "{name}: {err}");
            assert!(err.contains(want), "{name}: {err}");
        }
    }
    // The API itself answers a bad profile with 400 and the line and column.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ca = g.ca();
    let client = |name: &str, ca_dir: &Path| {
        let id = qcg_proto::tls::Identity::load(
            &ca_dir.join(format!("{name}.pem")),
            &ca_dir.join(format!("{name}.key")),
            &ca_dir.join("ca.pem"),
        )
        .unwrap();
        qcg_grid::client::Client::new(&g.url, &id).unwrap()
    };
    let alice = client("alice", &ca);
    let a = rt
        .block_on(alice.request("POST", "/v1/jobs", cases[1].1.as_bytes().to_vec()))
        .unwrap();
    assert_eq!(a.status, 400);
    assert!(
        a.error_message()
            .contains("line 3, column 1: unknown element <priority>"),
        "{}",
        a.error_message()
    );

    // An infeasible job: the reason, exit 2, and nothing reserved.
    let p = write(d, "huge.xml", &profile(100, 1, "/bin/true", &[]));
    let o = g.qcg_as("alice", &["submit", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot run on this grid: group \"g1\" needs 100 processes"),
        "{err}"
    );
    let jobs = rt
        .block_on(alice.request("GET", "/v1/jobs", vec![]))
        .unwrap();
    assert_eq!(jobs.json(), serde_json::json!([]));

    // Strangers: a frontal's certificate (the wrong role) and another CA's client.
    issue(&ca, "frontal", "mallory");
    let o = g.qcg_as("mallory", &["submit", good.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("403") && err.contains("client certificate"),
        "{err}"
    );
    let other = d.join("other-ca");
    assert!(qcg(&["ca", "init", "--dir", other.to_str().unwrap()])
        .status
        .success());
    issue(&other, "client", "eve");
    let eve = client("eve", &other);
    let r = rt.block_on(eve.request("POST", "/v1/jobs", base.as_bytes().to_vec()));
    assert!(r.is_err(), "a client of another CA was served: {r:?}");
    // The read-only API stays plain HTTP and has no job endpoints.
    let mut s = TcpStream::connect(g.http).unwrap();
    write!(
        s,
        "GET /v1/jobs HTTP/1.1\r\nHost: qcg\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
    // Nothing was started by any of this.
    assert_eq!(
        rt.block_on(alice.request("GET", "/v1/jobs", vec![]))
            .unwrap()
            .json(),
        serde_json::json!([])
    );
}

#[test]
fn a_c_mpi_program_runs_from_a_jobprofile() {
    // The MPI collectives check, in C, built with qcg-mpicc and submitted as a
    // JobProfile's executable: the services start it as they start any program, and
    // its ranks find each other and pass every check.
    let g = grid();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let exe = g.s.dir().join("collectives");
    let o = Command::new(bin("qcg-mpicc"))
        .arg("-O1")
        .arg(repo.join("mpi/tests/c/collectives.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "qcg-mpicc failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let path = write(
        g.s.dir(),
        "mpi.xml",
        &profile(2, 2, exe.to_str().unwrap(), &[]),
    );
    let o = g.qcg_as("alice", &["submit", path.to_str().unwrap()]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    for r in 0..4 {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("[{r}] rank {r}: collectives: ")))
            .unwrap_or_else(|| panic!("no result from rank {r}:\n{out}\n{err}"));
        assert!(line.ends_with(" checks, 0 failed"), "{line}");
    }
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn without_a_broker_the_job_runs_on_an_embedded_grid() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let xml = std::fs::read_to_string(repo.join("jobprofile/examples-xml/master-worker.xml"))
        .unwrap()
        .replace(
            "<executable>master_worker<",
            &format!("<executable>{}<", bin("examples/master_worker").display()),
        );
    let path = write(dir.path(), "mw.xml", &xml);
    let o = Command::new(bin("qcg"))
        .arg("submit")
        .arg(&path)
        .env_remove("QCG_BROKER")
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("[0] hierarchical master-worker: 48 chunks over 2 groups"),
        "{out}"
    );
    assert!(out.contains(": correct"), "{out}");
    // One cluster per group is offered; the scheduler places the groups on them.
    assert!(
        err.contains("submitted (central_master: 1 on cluster-"),
        "{err}"
    );
    // A rank that fails: the same exit status as with a broker.
    let path = write(
        dir.path(),
        "fail.xml",
        &profile(1, 2, "/bin/sh", &["-c", "exit 5"]),
    );
    let o = Command::new(bin("qcg"))
        .arg("submit")
        .arg(&path)
        .env_remove("QCG_BROKER")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("exited with status 5"), "{err}");
}

#[test]
fn sigterm_to_qcg_submit_alone_cancels_the_job() {
    let g = grid();
    let xml = profile(2, 1, "/bin/sh", &["-c", "sleep 3023 &amp; exec sleep 3023"]);
    let a = write(g.s.dir(), "term.xml", &xml);
    let (mut child, _out, err) = g.submit_bg(&a);
    let id = job_id(&err);
    wait_until("6 sleeps", || count_procs(&["sleep", "3023"]) == 6);
    // To `qcg submit` alone, not to a terminal's process group.
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(3));
    wait_until("no sleep left", || count_procs(&["sleep", "3023"]) == 0);
    let s = g.status(&id);
    assert!(s.contains(": cancelled"), "{s}");
}

#[test]
fn a_helper_killed_takes_its_processes_along_and_the_job_fails_naming_its_node() {
    let mut g = grid();
    let xml = profile(2, 1, "/bin/sh", &["-c", "sleep 3029 &amp; exec sleep 3029"]);
    let a = write(g.s.dir(), "lost.xml", &xml);
    let (mut child, _out, err) = g.submit_bg(&a);
    let id = job_id(&err);
    wait_until("6 sleeps", || count_procs(&["sleep", "3029"]) == 6);
    // kill -9 the helper of a1.
    g.s.kill("helper-a1").unwrap();
    // Its processes go with it, and the job fails naming the node: the rest stop too.
    wait_until("no sleep left", || count_procs(&["sleep", "3029"]) == 0);
    assert_eq!(child.wait().unwrap().code(), Some(1));
    let text: Vec<String> = err.try_iter().collect();
    let text = text.join("\n");
    assert!(text.contains("node a1"), "{text}");
    let s = g.status(&id);
    assert!(s.contains("node a1"), "{s}");
}
