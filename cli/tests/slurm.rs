//! The Slurm hand-off against a real Slurm: this test starts `munged`, `slurmctld`
//! and `slurmd` itself (Debian `slurm-wlm` and `munge`, installed with apt-get when
//! missing) on this machine, one node named `a1` on 127.0.0.1, with a config, ports,
//! a munge key and state folders of its own in a temp dir, and stops them at the end,
//! pass or fail. It needs root (Slurm's daemons run as root here: `SlurmUser=root`).
//!
//! Then a grid of real services (broker, frontals, helpers) whose cluster `alpha` has
//! a `[slurm]` frontal, checked as a Slurm admin would: a job's ranks placed in
//! `alpha` run as steps of ONE Slurm job (the same `SLURM_JOB_ID` in every rank, one
//! line in `squeue` holding as many CPUs as ranks, one step per rank), which Slurm
//! records as completed when the ranks end and which is gone from the queue then; a
//! qcg program spanning `alpha` and a plain cluster computes its result; a cancel is
//! `scancel` of that one job (recorded as cancelled, its processes gone); a node whose
//! helper goes away has its Slurm job cancelled; a rank's exit status comes back
//! through `srun`; a frontal killed mid-job leaves no allocation behind; and Slurm's refusals (no such partition, more ranks than the
//! node's cores, the cores taken by another Slurm job) and a frontal running as root
//! without `allow_root` fail the job naming them, leaving nothing in the queue.
//!
//! Needs the workspace's binaries and examples built first
//! (`cargo build --workspace --bins --examples`).

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{Cluster as GridCluster, Node, ServiceGrid};

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The Slurm node's name, which is also the qcg node's name (`--nodelist`).
const NODE: &str = "a1";
/// Cores Slurm gives the node (`CPUs=`, trusted as configured).
const CPUS: u32 = 2;

/// Installs Slurm and munge if they are missing; fails loudly if that cannot be done.
fn ensure_packages() {
    let have = [
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/sbin/munged",
    ]
    .iter()
    .all(|p| Path::new(p).exists())
        && which("salloc")
        && which("srun");
    if have {
        return;
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    let pkgs = [
        "install",
        "-y",
        "--no-install-recommends",
        "slurm-wlm",
        "munge",
    ];
    let ok = apt(&pkgs) || (apt(&["update"]) && apt(&pkgs));
    assert!(
        ok,
        "this test needs Slurm (Debian packages slurm-wlm and munge) and could not install \
         them with apt-get: install them, as root, and run it again"
    );
}

fn which(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).exists()))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// munged, slurmctld and slurmd of this test; stopped (jobs cancelled first) on drop.
struct Slurm {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
}

impl Slurm {
    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    /// A Slurm client command against this test's cluster.
    fn cmd(&self, name: &str, args: &[&str]) -> Output {
        Command::new(name)
            .args(args)
            .env("SLURM_CONF", self.conf())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"))
    }

    fn text(&self, name: &str, args: &[&str]) -> String {
        let o = self.cmd(name, args);
        assert!(
            o.status.success(),
            "{name} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The `salloc` processes run against this test's cluster (`SLURM_CONF` in
    /// their environment), with their command lines.
    fn sallocs(&self) -> Vec<(u32, String)> {
        let conf = format!("SLURM_CONF={}", self.conf().display());
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let (Ok(cmd), Ok(env)) = (
                std::fs::read(e.path().join("cmdline")),
                std::fs::read(e.path().join("environ")),
            ) else {
                continue;
            };
            let mut words = cmd.split(|&b| b == 0).map(String::from_utf8_lossy);
            let is_salloc = words
                .next()
                .is_some_and(|w| w.rsplit('/').next() == Some("salloc"));
            if is_salloc && env.split(|&b| b == 0).any(|v| v == conf.as_bytes()) {
                found.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
            }
        }
        found
    }

    /// The names of the Slurm jobs in the queue.
    fn queue(&self) -> Vec<String> {
        self.text("squeue", &["-h", "-o", "%j"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The Slurm jobs in the queue: id, name, CPUs.
    fn jobs(&self) -> Vec<(String, String, u32)> {
        self.text("squeue", &["-h", "-o", "%i %j %C"])
            .lines()
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                assert_eq!(w.len(), 3, "squeue: {l}");
                (w[0].to_string(), w[1].to_string(), w[2].parse().unwrap())
            })
            .collect()
    }

    /// The running steps: `JOBID.STEP` and name.
    fn steps(&self) -> Vec<(String, String)> {
        self.text("squeue", &["-s", "-h", "-o", "%i %j"])
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(i, n)| (i.to_string(), n.trim().to_string()))
            .collect()
    }

    /// Slurm's state of job `id` (`COMPLETED`, `CANCELLED`, …), from slurmctld's
    /// record (kept `MinJobAge`, 300 s, after the job ended).
    fn state(&self, id: &str) -> String {
        let t = self.text("scontrol", &["-o", "show", "job", id]);
        t.split_whitespace()
            .find_map(|w| w.strip_prefix("JobState="))
            .unwrap_or_else(|| panic!("no JobState in {t}"))
            .to_string()
    }

    fn start() -> Slurm {
        assert!(
            rustix::process::geteuid().is_root(),
            "the Slurm test starts slurmctld and slurmd, which needs root: run it as root \
             (CI does)"
        );
        ensure_packages();
        let dir = tempfile::Builder::new()
            .prefix("qcg-slurm-")
            .tempdir()
            .unwrap();
        let d = &dir.path().to_path_buf();
        for sub in ["munge", "state", "spool", "log"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        let mut key = vec![0u8; 1024];
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .unwrap()
            .read_exact(&mut key)
            .unwrap();
        std::fs::write(d.join("munge/key"), key).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.join("munge/key"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::set_permissions(d.join("munge"), std::fs::Permissions::from_mode(0o711)).unwrap();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim()
            .to_string();
        let p = |s: &str| d.join(s).display().to_string();
        let conf = format!(
            "ClusterName=qcgtest\n\
             SlurmctldHost=localhost(127.0.0.1)\n\
             SlurmctldPort={ctld}\n\
             SlurmdPort={slurmd}\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             AuthInfo=socket={sock}\n\
             StateSaveLocation={state}\n\
             SlurmdSpoolDir={spool}\n\
             SlurmctldPidFile={ctldpid}\n\
             SlurmdPidFile={slurmdpid}\n\
             SlurmctldLogFile={ctldlog}\n\
             SlurmdLogFile={slurmdlog}\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\n\
             SlurmdParameters=config_overrides\n\
             MpiDefault=none\n\
             ReturnToService=2\n\
             KillWait=2\n\
             AccountingStorageType=accounting_storage/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={CPUS} State=UNKNOWN\n\
             PartitionName=qcg Nodes={NODE} Default=YES MaxTime=INFINITE State=UP\n",
            ctld = free_port(),
            slurmd = free_port(),
            sock = p("munge/sock"),
            state = p("state"),
            spool = p("spool"),
            ctldpid = p("ctld.pid"),
            slurmdpid = p("slurmd.pid"),
            ctldlog = p("log/slurmctld.log"),
            slurmdlog = p("log/slurmd.log"),
        );
        std::fs::write(d.join("slurm.conf"), conf).unwrap();
        let mut s = Slurm {
            dir,
            daemons: Vec::new(),
        };
        let spawn = |prog: &str, args: &[String]| -> Child {
            Command::new(prog)
                .args(args)
                .env("SLURM_CONF", d.join("slurm.conf"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {prog}: {e}"))
        };
        let munged = spawn(
            "/usr/sbin/munged",
            &[
                "--foreground".into(),
                "--force".into(),
                format!("--socket={}", p("munge/sock")),
                format!("--key-file={}", p("munge/key")),
                format!("--pid-file={}", p("munge/pid")),
                format!("--seed-file={}", p("munge/seed")),
                format!("--log-file={}", p("log/munged.log")),
            ],
        );
        s.daemons.push(munged);
        wait_until("munged's socket", || d.join("munge/sock").exists());
        let conf = p("slurm.conf");
        s.daemons.push(spawn(
            "/usr/sbin/slurmctld",
            &["-D".into(), "-i".into(), "-f".into(), conf.clone()],
        ));
        s.daemons.push(spawn(
            "/usr/sbin/slurmd",
            &["-D".into(), "-N".into(), NODE.into(), "-f".into(), conf],
        ));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let o = s.cmd("sinfo", &["-h", "-n", NODE, "-o", "%t"]);
            let state = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if state == "idle" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "Slurm's node {NODE} is not idle (state `{state}`, {}); slurmctld's log:\n{}\nslurmd's log:\n{}",
                String::from_utf8_lossy(&o.stderr).trim(),
                std::fs::read_to_string(p("log/slurmctld.log")).unwrap_or_default(),
                std::fs::read_to_string(p("log/slurmd.log")).unwrap_or_default(),
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        s
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // Whatever a failed test left in the queue, then the daemons, newest first.
        let _ = self.cmd("scancel", &["--user=root"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && !self.queue().is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
        // A frontal's `salloc` left running (one was seen after CI runs, orphaned,
        // spinning at 90 % of a core) must not outlive the test: wait for it, and
        // end what is left, naming it, before the daemons stop.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && !self.sallocs().is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
        for (pid, cmd) in self.sallocs() {
            eprintln!("a salloc of this test was still running at its end, killed: {pid} {cmd}");
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        for c in self.daemons.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One cluster of a test grid: its name, its one node, the node's slots as the
/// frontal offers them, and the Slurm partition when Slurm runs it.
struct Cluster {
    name: &'static str,
    node: &'static str,
    slots: u32,
    slurm: Option<&'static str>,
    /// `allow_root` under `[slurm]` (the test runs as root).
    root: bool,
}

/// A cluster of one node, `a1`, run by Slurm.
fn slurm_cluster(name: &'static str, slots: u32, partition: &'static str) -> Cluster {
    Cluster {
        name,
        node: NODE,
        slots,
        slurm: Some(partition),
        root: true,
    }
}

struct Grid {
    s: ServiceGrid,
}

fn grid(slurm: &Slurm, clusters: &[Cluster]) -> Grid {
    let mut b = ServiceGrid::builder().cert("client", "alice");
    for c in clusters {
        let mut gc = GridCluster::new(c.name).node(Node::new(c.node).slots(c.slots));
        if let Some(partition) = c.slurm {
            gc = gc.frontal_tables(&format!(
                "[slurm]\npartition = \"{partition}\"\nhelper_socket = \"{{node}}.sock\"\nconf = \"{}\"\nallow_root = {}\n",
                slurm.conf().display(),
                c.root
            ));
        }
        b = b.cluster(gc);
    }
    Grid {
        s: b.wait_for_topology().start().unwrap(),
    }
}

impl Grid {
    fn qcg(&self, args: &[&str]) -> Output {
        Command::new(bin("qcg"))
            .args(args)
            .args(self.client_args())
            .output()
            .unwrap()
    }

    /// `qcg submit` of a profile of `n` ranks running `/bin/sh -c script`; waits.
    fn submit_sh(&self, name: &str, n: u32, script: &str) -> Output {
        let p = write(
            self.s.dir(),
            &format!("{name}.xml"),
            &sh_profile(name, n, script),
        );
        self.qcg(&["submit", p.to_str().unwrap()])
    }

    /// `qcg submit` in the background, killed when the guard goes (a failed test
    /// leaves none behind).
    fn submit_bg(&self, xml: &Path) -> Services {
        let child = Command::new(bin("qcg"))
            .arg("submit")
            .arg(xml)
            .args(self.client_args())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Services(vec![child])
    }

    fn client_args(&self) -> Vec<String> {
        self.s.qcg_args("alice")
    }
}

/// A profile of `n` ranks running `/bin/sh -c script`.
fn sh_profile(name: &str, n: u32, script: &str) -> String {
    let script = script
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        r#"<grmsJob appId="{name}">
  <task taskId="t">
    <resourcesDescription><topology>
      <group groupId="g"><processes><processesCount><value>{n}</value></processesCount></processes></group>
    </topology></resourcesDescription>
    <execution type="qcg"><executable>/bin/sh</executable><arguments><value>-c</value><value>{script}</value></arguments></execution>
  </task>
</grmsJob>
"#
    )
}

fn texts(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
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

#[test]
fn ranks_placed_in_a_slurm_cluster_run_as_slurm_steps_and_slurm_refusals_fail_the_job() {
    let slurm = Slurm::start();
    // Slurm itself runs a step (the simpler path works before qcg is involved).
    assert_eq!(
        slurm
            .text(
                "srun",
                &["--nodelist", NODE, "--ntasks=1", "echo", "slurm-ok"]
            )
            .trim(),
        "slurm-ok"
    );

    // alpha: Slurm's node a1, as many slots as Slurm gives it cores; beta: plain.
    let g = grid(
        &slurm,
        &[
            slurm_cluster("alpha", CPUS, "qcg"),
            Cluster {
                name: "beta",
                node: "b1",
                slots: 4,
                slurm: None,
                root: false,
            },
        ],
    );

    // Six ranks fill both clusters: the two in alpha are Slurm steps, with qcg's job
    // environment and the socket of a1's helper; the four in beta are not.
    let script = "echo \"where rank=$QCG_RANK of $QCG_SIZE slurm=${SLURM_JOB_ID:-none} step=${SLURM_STEP_ID:-none} name=${SLURM_JOB_NAME:-none} helper=$(basename $QCG_HELPER) secret=${#QCG_JOB_SECRET}\"";
    let o = g.submit_sh("where", 6, script);
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("where rank=")).collect();
    assert_eq!(lines.len(), 6, "{out}");
    let under_slurm: Vec<&&str> = lines.iter().filter(|l| !l.contains("slurm=none")).collect();
    assert_eq!(under_slurm.len(), CPUS as usize, "{out}");
    for l in &under_slurm {
        assert!(l.contains("helper=a1.sock"), "{l}");
        assert!(l.contains("name=qcg-job"), "{l}");
        assert!(l.contains("secret=64"), "{l}");
        assert!(l.contains(" of 6 "), "{l}");
    }
    for l in lines.iter().filter(|l| l.contains("slurm=none")) {
        assert!(l.contains("helper=b1.sock"), "{l}");
    }
    // The ranks Slurm ran are two steps of one Slurm job.
    let word = |l: &str, key: &str| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap()
            .to_string()
    };
    let ids: std::collections::BTreeSet<String> =
        under_slurm.iter().map(|l| word(l, "slurm=")).collect();
    assert_eq!(ids.len(), 1, "the ranks ran in several Slurm jobs: {out}");
    let steps: std::collections::BTreeSet<String> =
        under_slurm.iter().map(|l| word(l, "step=")).collect();
    assert_eq!(steps.len(), CPUS as usize, "{out}");
    // Its allocation was given back when they ended: nothing is left in the queue,
    // and Slurm records the job as completed, not cancelled.
    wait_until("an empty Slurm queue", || slurm.queue().is_empty());
    let id = ids.into_iter().next().unwrap();
    wait_until("the allocation recorded as completed", || {
        slurm.state(&id) == "COMPLETED"
    });

    // A qcg program across both clusters: the ranks Slurm runs make their links
    // through a1's helper and the job computes its result.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let xml = std::fs::read_to_string(repo.join("jobprofile/examples-xml/master-worker.xml"))
        .unwrap()
        .replace(
            "<executable>master_worker<",
            &format!("<executable>{}<", example("master_worker").display()),
        );
    let p = write(g.s.dir(), "mw.xml", &xml);
    let o = g.qcg(&["submit", p.to_str().unwrap()]);
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains(": correct"), "{out}\n{err}");
    assert!(
        err.contains(" on alpha"),
        "no rank was placed in alpha: {err}"
    );
    assert_eq!(metric(g.s.http().unwrap(), "qcg_broker_processes"), 0);

    // A cancel reaches Slurm: the allocations go, and the processes with them.
    let xml = write(
        g.s.dir(),
        "sleepy.xml",
        &sh_profile("sleepy", 6, "exec sleep 3023"),
    );
    let mut bg = g.submit_bg(&xml);
    let child = &mut bg.0[0];
    wait_until("six sleeps", || count_procs(&["sleep", "3023"]) == 6);
    // One Slurm job for the job's two ranks in alpha, holding two CPUs, named after
    // the qcg job; each rank is a step of it, named after its rank.
    let jobs = slurm.jobs();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let (slurm_id, name, cpus) = jobs[0].clone();
    assert_eq!(cpus, CPUS, "{jobs:?}");
    let id = name.strip_prefix("qcg-").unwrap().to_string();
    assert!(id.starts_with("job-"), "{jobs:?}");
    wait_until("a step per rank", || {
        slurm
            .steps()
            .iter()
            .filter(|(_, n)| n.starts_with("qcg-"))
            .count()
            == CPUS as usize
    });
    let mut steps = slurm.steps();
    steps.retain(|(_, n)| n.starts_with("qcg-"));
    for (step, n) in &steps {
        assert!(step.starts_with(&format!("{slurm_id}.")), "{steps:?}");
        assert!(n.starts_with(&format!("qcg-{id}.")), "{steps:?}");
    }
    let o = g.qcg(&["cancel", &id]);
    assert!(o.status.success(), "{}", texts(&o).1);
    assert_eq!(child.wait().unwrap().code(), Some(3));
    // The cancel was Slurm's: the job is gone from the queue, recorded as
    // cancelled, and its processes are gone.
    wait_until("an empty Slurm queue after the cancel", || {
        slurm.queue().is_empty()
    });
    assert_eq!(slurm.state(&slurm_id), "CANCELLED");
    wait_until("no sleep left", || count_procs(&["sleep", "3023"]) == 0);
    let o = g.qcg(&["status", &id]);
    assert!(texts(&o).0.contains(": cancelled"), "{}", texts(&o).0);

    // The helper of a1 goes away while its ranks run under Slurm: they cannot make
    // links any more, so their allocations are cancelled and the job fails naming it.
    let mut bg = g.submit_bg(&xml);
    let child = &mut bg.0[0];
    wait_until("six sleeps again", || count_procs(&["sleep", "3023"]) == 6);
    assert_eq!(slurm.queue().len(), 1);
    let mut g = g;
    g.s.kill(&format!("helper-{NODE}")).unwrap();
    wait_until("an empty Slurm queue after the helper left", || {
        slurm.queue().is_empty()
    });
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(1), "{err}");
    assert!(
        err.contains("the helper of node a1 (cluster `alpha`) went away"),
        "{err}"
    );
    wait_until("no sleep left", || count_procs(&["sleep", "3023"]) == 0);
    drop(g);

    // A partition Slurm does not have: the job fails with Slurm's words.
    let g = grid(&slurm, &[slurm_cluster("gamma", CPUS, "nope")]);
    let o = g.submit_sh("nopart", 1, "echo never");
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(!out.contains("never"), "{out}");
    assert!(
        err.contains("failed: rank 0 could not be started: Slurm refused the allocation of job")
            && err.contains("1 rank(s) on a1 (partition `nope`)"),
        "{err}"
    );
    assert!(err.contains("Invalid partition name"), "{err}");
    assert!(slurm.queue().is_empty());
    drop(g);

    // More ranks than Slurm gives the node (the frontal offers 4 slots, Slurm has 2
    // cores): Slurm refuses the job's allocation, and no rank starts.
    let g = grid(&slurm, &[slurm_cluster("delta", 4, "qcg")]);
    let o = g.submit_sh("toomany", CPUS + 1, "exec sleep 3029");
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("Slurm refused the allocation of job") && err.contains("3 rank(s) on a1"),
        "{err}"
    );
    assert!(err.contains("salloc: error:"), "{err}");
    assert!(slurm.queue().is_empty(), "{:?}", slurm.queue());
    assert_eq!(count_procs(&["sleep", "3029"]), 0);

    // The node's cores taken by another Slurm job: `--immediate`, so the qcg job
    // fails at once naming it, rather than waiting in Slurm's queue.
    let o = slurm.cmd(
        "salloc",
        &[
            "--no-shell",
            "--immediate",
            "--nodelist",
            NODE,
            "--ntasks=1",
            "--job-name=other",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = g.submit_sh("busy", CPUS, "exec sleep 3029");
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(err.contains("Slurm refused the allocation of job"), "{err}");
    assert!(err.contains("Requested nodes are busy"), "{err}");
    assert_eq!(slurm.queue(), ["other"]);
    let o = slurm.cmd("scancel", &["--name=other"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_until("an empty Slurm queue", || slurm.queue().is_empty());

    // A rank's own exit status and its last words come back through srun.
    let script = "if [ \"$QCG_RANK\" = 1 ]; then echo dying >&2; exit 7; fi; exec sleep 3031";
    let o = g.submit_sh("dies", 2, script);
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(err.contains("[1] dying"), "{err}");
    assert!(err.contains("failed: rank 1 exited with status 7"), "{err}");
    // srun's own report of it is not passed on as the rank's output.
    assert!(!err.contains("srun:"), "{err}");
    wait_until("an empty Slurm queue after the failure", || {
        slurm.queue().is_empty()
    });
    wait_until("no sleep left", || count_procs(&["sleep", "3031"]) == 0);

    // A frontal that dies (SIGKILL, nothing said to Slurm) leaves no allocation
    // behind: the pipe holding it closes with the frontal, and Slurm stops the steps.
    let xml = write(
        g.s.dir(),
        "orphan.xml",
        &sh_profile("orphan", CPUS, "exec sleep 3037"),
    );
    let _bg = g.submit_bg(&xml);
    wait_until("two sleeps", || count_procs(&["sleep", "3037"]) == 2);
    assert_eq!(slurm.queue().len(), 1);
    let mut g = g;
    g.s.kill("frontal-delta").unwrap();
    wait_until("an empty Slurm queue after the frontal died", || {
        slurm.queue().is_empty()
    });
    wait_until("no sleep left", || count_procs(&["sleep", "3037"]) == 0);
    // Nor a `salloc` of it, orphaned, on the frontal's host.
    wait_until("no salloc left after the frontal died", || {
        slurm.sallocs().is_empty()
    });
    drop(g);

    // A frontal running as root does not hand grid jobs to Slurm as root unless its
    // config says so.
    let g = grid(
        &slurm,
        &[Cluster {
            root: false,
            ..slurm_cluster("epsilon", CPUS, "qcg")
        }],
    );
    let o = g.submit_sh("asroot", 1, "echo never");
    let (out, err) = texts(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(err.contains("allow_root = true"), "{err}");
    assert!(slurm.queue().is_empty());
}
