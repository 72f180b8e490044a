//! Launching a job's ranks through Slurm, for a cluster whose nodes Slurm runs.
//!
//! With a `[slurm]` section in its config the frontal does not ask a node's helper to
//! start a rank: it asks Slurm for an allocation of one task on the node the broker
//! chose (`salloc --no-shell --immediate --nodelist=NODE --ntasks=1`), then runs the
//! rank in it as a step (`srun --jobid=ID`), with qcg's job environment and
//! `QCG_HELPER` naming the socket of the node's helper. The step's output comes back
//! through `srun` to the frontal, which passes it to the broker as the helpers do;
//! the step's end is the rank's end, and the allocation is then released
//! (`scancel`). Cancelling a job is `scancel` of its allocations.
//!
//! Why this and not helpers started inside an allocation: the helpers stay what they
//! are on every other cluster, long-running node daemons (root for raw sockets and
//! account switching, a certificate each, a socket at a known path), and they still
//! carry the ranks' links; only the start, the accounting and the stop of the
//! processes move to Slurm, which owns the nodes' cores. A helper started per job
//! inside a user's allocation would run without those rights, need a certificate
//! per job, and appear only after the broker had already placed the ranks.
//!
//! Each rank is an allocation of its own, asked for when the broker's launch for it
//! arrives (the launches of a job come one rank at a time); `--immediate` because
//! the job's other ranks are starting now elsewhere: a rank queued behind other
//! Slurm jobs would leave them waiting for it, so Slurm's refusal (no such
//! partition, the node's cores taken) fails the launch, and the job, at once with
//! Slurm's own words.
//!
//! The argument lists and the parsing of `salloc`'s answer are pure functions
//! ([`salloc_args`], [`srun_args`], [`granted`]); [`Slurm`] runs them.

use qcg_proto::output::read_lines;
use qcg_proto::{ErrorKind, ExitReport, LaunchSpec, OutputLine, Request, Response, Stream};
use serde::Deserialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use tokio::sync::mpsc;
use tracing::Instrument;

/// The `[slurm]` section of the frontal's config.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmConfig {
    /// The partition ranks are allocated in (Slurm's default partition when absent).
    pub partition: Option<String>,
    /// The socket of the helper of node `{node}`, as seen on that node: a rank's
    /// `QCG_HELPER`. `{node}` is replaced by the node's name; a relative path is
    /// taken from the config file's folder.
    pub helper_socket: String,
    /// The `slurm.conf` the Slurm commands read (`SLURM_CONF`); theirs by default.
    pub conf: Option<PathBuf>,
    /// Folder of `salloc`, `srun` and `scancel` (found on `PATH` by default).
    pub bin_dir: Option<PathBuf>,
    /// Slurm account to charge (`--account`), if the site wants one.
    pub account: Option<String>,
    /// Ranks run as the frontal's own Unix account (Slurm 22.05's `salloc` has no
    /// `--uid`): a frontal running as root refuses to launch unless this is `true`.
    #[serde(default)]
    pub allow_root: bool,
}

impl SlurmConfig {
    /// The socket a rank on `node` is told to use.
    pub fn socket_for(&self, node: &str) -> String {
        self.helper_socket.replace("{node}", node)
    }

    /// Where `name` (`salloc`, `srun`, `scancel`) is, if it can be found.
    pub fn find(&self, name: &str) -> Option<PathBuf> {
        match &self.bin_dir {
            Some(d) => Some(d.join(name)).filter(|p| p.is_file()),
            None => std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            }),
        }
    }

    /// What `--check-config` finds wrong in the `[slurm]` section: Slurm's commands
    /// missing, its config missing, root without `allow_root`.
    pub fn problems(&self, running_as_root: bool) -> Vec<qcg_proto::check::Problem> {
        let mut out = Vec::new();
        for cmd in ["salloc", "srun", "scancel"] {
            if self.find(cmd).is_none() {
                out.push(qcg_proto::check::Problem {
                    field: "slurm.bin_dir".into(),
                    message: format!(
                        "Slurm's `{cmd}` is not in {}: install Slurm's client commands \
                         (Debian: apt-get install slurm-client) or set `bin_dir`",
                        self.bin_dir
                            .as_ref()
                            .map(|d| d.display().to_string())
                            .unwrap_or_else(|| "PATH".into())
                    ),
                });
            }
        }
        if let Some(conf) = self.conf.as_ref().filter(|c| !c.is_file()) {
            out.push(qcg_proto::check::Problem {
                field: "slurm.conf".into(),
                message: format!(
                    "{} is not a file: name the cluster's slurm.conf, or omit `conf` to use \
                     Slurm's own",
                    conf.display()
                ),
            });
        }
        if running_as_root && !self.allow_root {
            out.push(qcg_proto::check::Problem {
                field: "slurm.allow_root".into(),
                message: ROOT_REFUSAL.into(),
            });
        }
        out
    }
}

const ROOT_REFUSAL: &str = "ranks started through Slurm run as the frontal's own account, \
     and this frontal runs as root: run it as an unprivileged account Slurm knows, or set \
     `allow_root = true` under [slurm]";

/// Whether this process runs as root.
pub fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The Slurm job name of a rank's allocation: `qcg-JOB.RANK`.
pub fn job_name(job: &str, rank: u32) -> String {
    format!("qcg-{job}.{rank}")
}

/// `salloc`'s arguments for the allocation of `spec`'s rank.
pub fn salloc_args(cfg: &SlurmConfig, spec: &LaunchSpec) -> Vec<String> {
    let mut a = vec![
        "--no-shell".to_string(),
        "--immediate".into(),
        "--ntasks=1".into(),
        format!("--nodelist={}", spec.node),
        format!("--job-name={}", job_name(&spec.job, spec.rank)),
    ];
    if let Some(p) = &cfg.partition {
        a.push(format!("--partition={p}"));
    }
    if let Some(acct) = &cfg.account {
        a.push(format!("--account={acct}"));
    }
    a
}

/// `srun`'s arguments for running `spec`'s program as a step of allocation `id`.
pub fn srun_args(spec: &LaunchSpec, id: u64) -> Vec<String> {
    let mut a = vec![
        format!("--jobid={id}"),
        format!("--job-name={}", job_name(&spec.job, spec.rank)),
        "--ntasks=1".into(),
        "--quiet".into(),
        "--input=none".into(),
        "--export=ALL".into(),
    ];
    if let Some(wd) = &spec.working_directory {
        a.push(format!("--chdir={wd}"));
    }
    a.push("--".into());
    a.push(program(spec));
    a.extend(spec.args.iter().cloned());
    a
}

/// The program as `srun` is to find it: a relative path with a `/` is taken from the
/// working directory (as the helpers do); a bare name is left for `PATH`.
fn program(spec: &LaunchSpec) -> String {
    match &spec.working_directory {
        Some(wd) if !spec.executable.starts_with('/') && spec.executable.contains('/') => {
            std::path::Path::new(wd)
                .join(&spec.executable)
                .display()
                .to_string()
        }
        _ => spec.executable.clone(),
    }
}

/// The allocation id in `salloc`'s messages (`salloc: Granted job allocation 12`).
pub fn granted(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.split("Granted job allocation ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|id| id.parse().ok())
}

/// What Slurm said when it refused: its `error:` lines, or the whole text.
pub fn refusal(text: &str) -> String {
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("error:"))
        .map(str::trim)
        .collect();
    if errors.is_empty() {
        text.trim().to_string()
    } else {
        errors.join("; ")
    }
}

/// How many cancelled jobs are remembered (their late launches are refused).
const KILLED_MEMORY: usize = 4096;

/// A rank running under Slurm: its allocation and its node.
#[derive(Clone, Debug)]
struct Alloc {
    id: u64,
    node: String,
    /// Why the rank is lost, when it was cancelled for something other than its job
    /// (its node's helper went away): its end is reported so.
    lost: Option<String>,
}

/// The ranks this frontal runs through Slurm.
pub struct Slurm {
    cfg: SlurmConfig,
    /// Job → rank → allocation, while the step runs.
    running: Mutex<BTreeMap<String, BTreeMap<u32, Alloc>>>,
    killed: Mutex<VecDeque<String>>,
    /// Where the ranks' output and ends go (the frontal sends them to the broker).
    reports: mpsc::UnboundedSender<Request>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Slurm {
    /// Launches through Slurm as `cfg` says; the ranks' `Output` and
    /// `ProcessExited` are sent on `reports`, in order.
    pub fn new(cfg: SlurmConfig, reports: mpsc::UnboundedSender<Request>) -> Slurm {
        Slurm {
            cfg,
            running: Default::default(),
            killed: Default::default(),
            reports,
        }
    }

    fn command(&self, name: &str) -> tokio::process::Command {
        let program = match &self.cfg.bin_dir {
            Some(d) => d.join(name),
            None => PathBuf::from(name),
        };
        let mut c = tokio::process::Command::new(program);
        if let Some(conf) = &self.cfg.conf {
            c.env("SLURM_CONF", conf);
        }
        c
    }

    /// The processes running under Slurm, with their nodes.
    pub fn processes(&self) -> Vec<(qcg_proto::ProcName, String)> {
        lock(&self.running)
            .iter()
            .flat_map(|(job, ranks)| {
                ranks
                    .iter()
                    .map(|(&r, a)| (qcg_proto::ProcName::new(job, r), a.node.clone()))
            })
            .collect()
    }

    /// Asks Slurm for the rank's allocation and starts the rank in it. `Ok` once the
    /// step is started; Slurm's refusal otherwise, naming the rank and the node.
    pub async fn launch(self: &std::sync::Arc<Self>, spec: &LaunchSpec) -> Response {
        let (job, rank, node) = (spec.job.clone(), spec.rank, spec.node.clone());
        if !self.cfg.allow_root && running_as_root() {
            return Response::error(
                ErrorKind::Forbidden,
                format!("rank {rank} of job {job} not started on node {node}: {ROOT_REFUSAL}"),
            );
        }
        if lock(&self.killed).iter().any(|j| *j == job) {
            return Response::error(
                ErrorKind::Forbidden,
                format!("job {job} was cancelled; not starting rank {rank}"),
            );
        }
        let out = match self
            .command("salloc")
            .args(salloc_args(&self.cfg, spec))
            .stdin(Stdio::null())
            .output()
            .await
        {
            Ok(o) => o,
            Err(e) => {
                return Response::error(
                    ErrorKind::Unavailable,
                    format!("cannot run Slurm's `salloc` for rank {rank} of job {job}: {e}"),
                )
            }
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let id = match (out.status.success(), granted(&text)) {
            (true, Some(id)) => id,
            _ => {
                tracing::warn!(%job, rank, %node, answer = %text.trim(), "Slurm refused the allocation");
                return Response::error(
                    ErrorKind::Unavailable,
                    format!(
                        "Slurm refused rank {rank} of job {job} on node {node}{}: {}",
                        self.cfg
                            .partition
                            .as_ref()
                            .map(|p| format!(" (partition `{p}`)"))
                            .unwrap_or_default(),
                        refusal(&text)
                    ),
                );
            }
        };
        let mut cmd = self.command("srun");
        cmd.args(srun_args(spec, id))
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env(qcg_proto::env::HELPER, self.cfg.socket_for(&node))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.release(id).await;
                return Response::error(
                    ErrorKind::Unavailable,
                    format!("cannot run Slurm's `srun` for rank {rank} of job {job}: {e}"),
                );
            }
        };
        lock(&self.running).entry(job.clone()).or_default().insert(
            rank,
            Alloc {
                id,
                node: node.clone(),
                lost: None,
            },
        );
        // A cancel that came while the allocation was being made finds it now.
        if lock(&self.killed).iter().any(|j| *j == job) {
            self.scancel(&[id]).await;
        }
        tracing::info!(%job, rank, %node, slurm_job = id, "rank started under Slurm");
        // The rank's tasks outlive the broker's launch request: a root span each.
        let rank_span =
            || tracing::error_span!(parent: None, "slurm_rank", %job, rank, %node, slurm_job = id);
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(o) = child.stdout.take() {
            let read = read_lines(o, Stream::Stdout, None, tx.clone());
            tokio::spawn(read.instrument(rank_span()));
        }
        if let Some(e) = child.stderr.take() {
            // srun's own word on the task's end (`Exited with exit code 7`,
            // `Terminated`) says what the exit report says; slurmstepd's (`*** STEP
            // 7.0 ON a1 CANCELLED AT …`, a time limit) is passed on: it says why.
            let own = format!("srun: error: {node}: task 0: ");
            let read = read_lines(e, Stream::Stderr, Some(own), tx.clone());
            tokio::spawn(read.instrument(rank_span()));
        }
        drop(tx);
        let me = self.clone();
        let span = rank_span();
        tokio::spawn(
            async move {
                me.forward_output(&job, rank, rx).await;
                let exit = match child.wait().await {
                    Ok(s) => {
                        use std::os::unix::process::ExitStatusExt;
                        ExitReport {
                            code: s.code(),
                            signal: s.signal(),
                            error: None,
                        }
                    }
                    Err(e) => {
                        ExitReport::not_started(format!("`srun` could not be waited for: {e}"))
                    }
                };
                me.release(id).await;
                let lost = {
                    let mut running = lock(&me.running);
                    let alloc = running.get_mut(&job).and_then(|r| r.remove(&rank));
                    if running.get(&job).is_some_and(|r| r.is_empty()) {
                        running.remove(&job);
                    }
                    alloc.and_then(|a| a.lost)
                };
                let exit = match lost {
                    Some(why) => ExitReport::not_started(why),
                    None => exit,
                };
                tracing::info!(%job, rank, slurm_job = id, %exit, "rank ended under Slurm");
                let _ = me.reports.send(Request::ProcessExited { job, rank, exit });
            }
            .instrument(span),
        );
        Response::Ok
    }

    /// Cancels every allocation of `job` and refuses its later launches; returns how
    /// many there were.
    pub async fn cancel(&self, job: &str) -> usize {
        {
            let mut killed = lock(&self.killed);
            if !killed.iter().any(|j| j == job) {
                killed.push_back(job.to_string());
                if killed.len() > KILLED_MEMORY {
                    killed.pop_front();
                }
            }
        }
        let ids: Vec<u64> = lock(&self.running)
            .get(job)
            .map(|r| r.values().map(|a| a.id).collect())
            .unwrap_or_default();
        if !ids.is_empty() {
            tracing::info!(%job, allocations = ?ids, "cancelling the job's Slurm allocations");
            self.scancel(&ids).await;
        }
        ids.len()
    }

    /// Cancels the allocations of the ranks on `node` (its helper went away: they
    /// cannot make links any more) and returns those ranks; each one's end is
    /// reported, once its step has ended, as lost for `why`.
    pub async fn cancel_node(&self, node: &str, why: &str) -> Vec<qcg_proto::ProcName> {
        let (ranks, ids): (Vec<_>, Vec<_>) = lock(&self.running)
            .iter_mut()
            .flat_map(|(job, ranks)| {
                ranks
                    .iter_mut()
                    .filter(|(_, a)| a.node == node)
                    .map(|(&r, a)| {
                        a.lost = Some(why.to_string());
                        (qcg_proto::ProcName::new(job, r), a.id)
                    })
            })
            .unzip();
        if !ids.is_empty() {
            tracing::warn!(%node, allocations = ?ids, "the node's helper went away: cancelling its Slurm ranks");
            self.scancel(&ids).await;
        }
        ranks
    }

    /// The allocation is no longer needed (its step ended).
    async fn release(&self, id: u64) {
        self.scancel(&[id]).await;
    }

    async fn scancel(&self, ids: &[u64]) {
        let r = self
            .command("scancel")
            .args(ids.iter().map(u64::to_string))
            .stdin(Stdio::null())
            .output()
            .await;
        match r {
            Ok(o) if o.status.success() => {}
            Ok(o) => tracing::warn!(
                allocations = ?ids,
                answer = %String::from_utf8_lossy(&o.stderr).trim(),
                "scancel failed"
            ),
            Err(e) => tracing::warn!(allocations = ?ids, error = %e, "cannot run scancel"),
        }
    }

    async fn forward_output(
        &self,
        job: &str,
        rank: u32,
        mut rx: mpsc::UnboundedReceiver<OutputLine>,
    ) {
        while let Some(first) = rx.recv().await {
            let lines = qcg_proto::output::batch(first, &mut rx);
            let req = Request::Output {
                job: job.to_string(),
                rank,
                lines,
            };
            if self.reports.send(req).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LaunchSpec {
        LaunchSpec {
            job: "job-7".into(),
            rank: 3,
            node: "a1".into(),
            executable: "bin/app".into(),
            args: vec!["--x".into(), "1".into()],
            env: vec![],
            working_directory: Some("/w".into()),
            owner: None,
        }
    }

    #[test]
    fn allocation_and_step_arguments() {
        let cfg = SlurmConfig {
            partition: Some("qcg".into()),
            helper_socket: "/run/qcg/{node}.sock".into(),
            conf: None,
            bin_dir: None,
            account: None,
            allow_root: false,
        };
        let a = salloc_args(&cfg, &spec());
        assert!(a.contains(&"--nodelist=a1".to_string()), "{a:?}");
        assert!(a.contains(&"--partition=qcg".to_string()), "{a:?}");
        assert!(a.contains(&"--job-name=qcg-job-7.3".to_string()), "{a:?}");
        assert!(a.contains(&"--immediate".to_string()), "{a:?}");
        let s = srun_args(&spec(), 12);
        assert_eq!(s[0], "--jobid=12");
        assert!(s.contains(&"--chdir=/w".to_string()), "{s:?}");
        let tail: Vec<&str> = s
            .iter()
            .skip_while(|a| *a != "--")
            .map(String::as_str)
            .collect();
        assert_eq!(tail, ["--", "/w/bin/app", "--x", "1"]);
        assert_eq!(cfg.socket_for("a1"), "/run/qcg/a1.sock");
        let missing = SlurmConfig {
            bin_dir: Some("/nonexistent".into()),
            conf: Some("/nonexistent/slurm.conf".into()),
            ..cfg.clone()
        };
        let p = missing.problems(true);
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "slurm.bin_dir",
                "slurm.bin_dir",
                "slurm.bin_dir",
                "slurm.conf",
                "slurm.allow_root"
            ]
        );
        assert!(p[0].message.contains("`salloc`"), "{}", p[0]);
        assert!(missing.problems(false).len() == 4);
    }

    #[test]
    fn salloc_answers() {
        assert_eq!(
            granted("salloc: Pending job allocation 2\nsalloc: Granted job allocation 2\n"),
            Some(2)
        );
        assert_eq!(
            granted("salloc: error: invalid partition specified: nope"),
            None
        );
        assert_eq!(
            refusal("salloc: error: invalid partition specified: nope\nsalloc: error: Job submit/allocate failed: Invalid partition name specified\n"),
            "salloc: error: invalid partition specified: nope; salloc: error: Job submit/allocate failed: Invalid partition name specified"
        );
    }
}
