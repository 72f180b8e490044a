//! Job processes run as the local account their submitter maps to: real processes
//! started through the helper's launcher, their uid, gid and groups read from
//! `/proc`. Refusals (no mapping, root, a folder or program out of reach) name the
//! cause. Switching accounts needs root: as another user these tests only check the
//! refusals that need no switch.

#![allow(clippy::unwrap_used)]

use qcg_helper::accounts::{lookup, Accounts};
use qcg_helper::procs::Procs;
use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Ca, Role};
use qcg_proto::{LaunchSpec, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn upstream() -> Arc<Upstream> {
    let ca = Ca::generate().unwrap();
    let ep = quic::client_endpoint(&ca.identity(Role::Helper, "n").unwrap()).unwrap();
    // Nothing listens there: output and exit reports are lost, which is fine here.
    Arc::new(Upstream::new(
        ep,
        "127.0.0.1:9".parse().unwrap(),
        Role::Frontal,
        None,
        None,
    ))
}

fn spec(owner: Option<&str>, wd: &Path, exe: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec {
        job: "job-acct".into(),
        rank: 0,
        node: "n".into(),
        executable: exe.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: vec![],
        working_directory: Some(wd.display().to_string()),
        owner: owner.map(String::from),
    }
}

fn accounts() -> Accounts {
    let mut a = Accounts {
        default: None,
        ..Accounts::default()
    };
    a.map.insert("alice".into(), "nobody".into());
    a.map.insert("rooty".into(), "root".into());
    a
}

fn is_root() -> bool {
    rustix::process::getuid().is_root()
}

/// A folder anyone may enter and write to.
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

fn refusal(r: Response) -> String {
    match r {
        Response::Error(e) => e.message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_mapped_submitter_runs_as_its_account_with_no_extra_groups() {
    if !is_root() {
        eprintln!("skipped: switching accounts needs root");
        return;
    }
    let procs = Arc::new(Procs::new(accounts()));
    let d = open_dir();
    let out = d.path().join("ids");
    let script = format!(
        "id -u > {o}.tmp; id -g >> {o}.tmp; grep '^Groups:' /proc/self/status >> {o}.tmp; echo $HOME >> {o}.tmp; mv {o}.tmp {o}",
        o = out.display()
    );
    let r = procs.launch(
        &spec(Some("alice"), d.path(), "/bin/sh", &["-c", &script]),
        "n",
        Path::new("/nonexistent.sock"),
        upstream(),
    );
    assert_eq!(r, Response::Ok);
    let start = Instant::now();
    while !out.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "no output");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let nobody = lookup("nobody").unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], nobody.uid.to_string(), "{text}");
    assert_eq!(lines[1], nobody.gid.to_string(), "{text}");
    assert_eq!(lines[2].trim_end(), "Groups:", "{text}");
    assert_eq!(lines[3], nobody.home.display().to_string(), "{text}");
}

#[tokio::test]
async fn refusals_name_the_submitter_the_account_or_the_path() {
    let procs = Arc::new(Procs::new(accounts()));
    let d = open_dir();
    let launch = |s: LaunchSpec| procs.launch(&s, "n", Path::new("/x.sock"), upstream());
    let e = refusal(launch(spec(Some("mallory"), d.path(), "/bin/true", &[])));
    assert!(
        e.contains("submitter `mallory` has no local account"),
        "{e}"
    );
    let e = refusal(launch(spec(Some("rooty"), d.path(), "/bin/true", &[])));
    assert!(e.contains("would run as root"), "{e}");
    assert!(e.contains("allow_root"), "{e}");
    if !is_root() {
        return;
    }
    // A folder nobody may not enter, and a program nobody may not run.
    let closed = tempfile::tempdir().unwrap();
    std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let e = refusal(launch(spec(Some("alice"), closed.path(), "/bin/true", &[])));
    assert!(
        e.contains(&format!(
            "account `nobody` cannot enter the folder {}",
            closed.path().display()
        )),
        "{e}"
    );
    let prog = d.path().join("prog.sh");
    std::fs::write(&prog, "#!/bin/sh\ntrue\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o700)).unwrap();
    let e = refusal(launch(spec(Some("alice"), d.path(), "./prog.sh", &[])));
    assert!(e.contains("account `nobody` cannot run"), "{e}");
    assert!(e.contains("prog.sh"), "{e}");
    assert_eq!(procs.len(), 0);
}

/// Accounts with a job pool of `count` uids from `first`, group `nogroup` (65534).
fn pooled(first: u32, count: u32) -> Accounts {
    let mut a = accounts();
    a.pool = Some(qcg_helper::accounts::Pool {
        first,
        count,
        group: None,
        gid: 65534,
    });
    a
}

fn pooled_spec(job: &str, rank: u32, wd: &Path, script: &str) -> LaunchSpec {
    LaunchSpec {
        job: job.into(),
        rank,
        ..spec(Some("bob"), wd, "/bin/sh", &["-c", script])
    }
}

async fn wait_file(p: &Path) -> String {
    let start = Instant::now();
    while !p.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no {}",
            p.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::read_to_string(p).unwrap()
}

/// The live processes whose real uid is `uid`.
fn running_as(uid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/status")).is_ok_and(|s| {
                !s.contains("State:\tZ")
                    && s.lines()
                        .find_map(|l| l.strip_prefix("Uid:"))
                        .and_then(|r| r.split_whitespace().next())
                        == Some(uid.to_string().as_str())
            })
        })
        .collect()
}

async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn pooled_jobs_each_get_a_uid_of_their_own_and_ranks_of_a_job_share_it() {
    if !is_root() {
        panic!("the job pool needs root to switch uids: run this test as root (CI does)");
    }
    const FIRST: u32 = 61300;
    let procs = Arc::new(Procs::new(pooled(FIRST, 50)));
    let d = open_dir();
    let gate = d.path().join("go");
    let mut files = Vec::new();
    // Jobs a and b, two ranks each, all running at once (they wait for `go`).
    for (job, rank) in [("job-a", 0), ("job-a", 1), ("job-b", 0), ("job-b", 1)] {
        let out = d.path().join(format!("{job}.{rank}"));
        let script = format!(
            "id -u > {o}.tmp; id -g >> {o}.tmp; mv {o}.tmp {o}; while [ ! -e {g} ]; do sleep 0.02; done",
            o = out.display(),
            g = gate.display()
        );
        let r = procs.launch(
            &pooled_spec(job, rank, d.path(), &script),
            "n",
            Path::new("/x.sock"),
            upstream(),
        );
        assert_eq!(r, Response::Ok, "{job} rank {rank}");
        files.push(out);
    }
    let mut ids = Vec::new();
    for f in &files {
        let t = wait_file(f).await;
        let v: Vec<u32> = t.lines().map(|l| l.parse().unwrap()).collect();
        ids.push((v[0], v[1]));
    }
    let (a, b) = (ids[0].0, ids[2].0);
    assert_eq!(ids[1].0, a, "the ranks of job a share its uid: {ids:?}");
    assert_eq!(ids[3].0, b, "the ranks of job b share its uid: {ids:?}");
    assert_ne!(a, b, "two jobs, two uids: {ids:?}");
    for (uid, gid) in &ids {
        assert!((FIRST..FIRST + 50).contains(uid), "{ids:?}");
        assert_eq!(*gid, 65534, "{ids:?}");
    }
    assert_eq!(procs.leased_uid("job-a"), Some(a));
    // A daemon job a leaves behind, out of its process group, goes with the lease.
    let out = d.path().join("daemon");
    let script = format!(
        "setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo $! > {o}.tmp; mv {o}.tmp {o}",
        o = out.display()
    );
    let r = procs.launch(
        &pooled_spec("job-a", 2, d.path(), &script),
        "n",
        Path::new("/x.sock"),
        upstream(),
    );
    assert_eq!(r, Response::Ok);
    let daemon: u32 = wait_file(&out).await.trim().parse().unwrap();
    std::fs::write(&gate, "").unwrap();
    wait_until("job a's uid back in the pool", || {
        procs.leased_uid("job-a").is_none()
    })
    .await;
    assert!(
        running_as(a).is_empty(),
        "nothing runs as {a} once job a ended: {:?}",
        running_as(a)
    );
    assert!(
        !Path::new(&format!("/proc/{daemon}/status")).exists()
            || std::fs::read_to_string(format!("/proc/{daemon}/status"))
                .unwrap()
                .contains("State:\tZ"),
        "the daemon {daemon} left behind was killed"
    );
    wait_until("job b's uid back in the pool", || {
        procs.leased_uid("job-b").is_none()
    })
    .await;
}

#[tokio::test]
async fn a_full_pool_refuses_and_a_uid_in_use_is_never_leased() {
    if !is_root() {
        panic!("the job pool needs root to switch uids: run this test as root (CI does)");
    }
    const FIRST: u32 = 61400;
    // A stray process already runs as the pool's first uid: that uid is skipped.
    let mut stray = std::process::Command::new("/bin/sleep");
    std::os::unix::process::CommandExt::uid(&mut stray, FIRST);
    let mut stray = stray.arg("60").spawn().unwrap();
    let procs = Arc::new(Procs::new(pooled(FIRST, 2)));
    let d = open_dir();
    let gate = d.path().join("go");
    let script = format!(
        "while [ ! -e {g} ]; do sleep 0.02; done",
        g = gate.display()
    );
    let launch = |job: &str| {
        procs.launch(
            &pooled_spec(job, 0, d.path(), &script),
            "n",
            Path::new("/x.sock"),
            upstream(),
        )
    };
    assert_eq!(launch("job-c"), Response::Ok);
    assert_eq!(
        procs.leased_uid("job-c"),
        Some(FIRST + 1),
        "uid {FIRST} is in use"
    );
    let e = refusal(launch("job-d"));
    assert!(
        e.contains("every uid of the job pool (61400..61402) is taken"),
        "{e}"
    );
    assert!(e.contains("job-d"), "the refusal names the job: {e}");
    stray.kill().unwrap();
    stray.wait().unwrap();
    assert_eq!(launch("job-d"), Response::Ok);
    assert_eq!(procs.leased_uid("job-d"), Some(FIRST));
    std::fs::write(&gate, "").unwrap();
    wait_until("both uids back in the pool", || {
        procs.leased_uid("job-c").is_none() && procs.leased_uid("job-d").is_none()
    })
    .await;
}

/// A process whose children keep its output open ends all the same: a child in its
/// group is killed with it, and one that left the group (`setsid`) does not hold the
/// end back beyond the drain time.
#[tokio::test]
async fn a_rank_whose_children_hold_its_output_open_still_ends() {
    let procs = Arc::new(Procs::new(Accounts::current_user()));
    let d = open_dir();
    let pidfile = d.path().join("child");
    let launch = |job: &str, script: &str| {
        procs.launch(
            &LaunchSpec {
                job: job.into(),
                ..spec(None, d.path(), "/bin/sh", &["-c", script])
            },
            "n",
            Path::new("/x.sock"),
            upstream(),
        )
    };
    // A background child in the group, with the rank's stdout.
    let script = format!(
        "sleep 1000 & echo $! > {p}.tmp; mv {p}.tmp {p}; echo started",
        p = pidfile.display()
    );
    assert_eq!(launch("job-bg", &script), Response::Ok);
    let child: u32 = wait_file(&pidfile).await.trim().parse().unwrap();
    wait_until("the rank's end, with a child holding its output", || {
        procs.is_empty()
    })
    .await;
    let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap_or_default();
    assert!(
        status.is_empty() || status.contains("State:\tZ"),
        "the child in the rank's group is killed with it: {status}"
    );
    // A child out of the group (setsid) with the rank's stdout: the end comes anyway.
    std::fs::remove_file(&pidfile).unwrap();
    let script = format!(
        "setsid sleep 1000 & echo $! > {p}.tmp; mv {p}.tmp {p}; echo started",
        p = pidfile.display()
    );
    assert_eq!(launch("job-setsid", &script), Response::Ok);
    let daemon: u32 = wait_file(&pidfile).await.trim().parse().unwrap();
    wait_until("the rank's end, with a daemon holding its output", || {
        procs.is_empty()
    })
    .await;
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon as i32).unwrap(),
        rustix::process::Signal::KILL,
    );
}
