//! Launching a job's ranks through Slurm, for a cluster whose nodes Slurm runs.
//!
//! With a `[slurm]` section in its config the frontal does not ask a node's helper to
//! start a rank. For each job it asks Slurm for one allocation holding all the ranks
//! the broker placed in this cluster, on the nodes the broker chose (`salloc
//! --immediate --ntasks=N --nodes=K --nodelist=NODES --job-name=qcg-JOB`), and runs
//! each rank in it as a step of one task on its node (`srun --jobid=ID --exact
//! --ntasks=1 --nodelist=NODE`), with qcg's job environment and `QCG_HELPER` naming
//! the socket of the node's helper. A step's output comes back through `srun` to the
//! frontal, which passes it to the broker as the helpers do; a step's end is its
//! rank's end. Slurm then sees one job per grid job, as for an `mpirun` in a batch
//! script: one line in `squeue`, one record in the accounting, one `scancel` to stop
//! it.
//!
//! The allocation is held by `salloc` running `cat` on the frontal's host, with its
//! stdin a pipe from the frontal: when every rank placed here has ended the frontal
//! closes the pipe, `cat` ends, and `salloc` gives the allocation back (Slurm records
//! it as completed). Cancelling the job, a launch that fails, or a node's helper going
//! away is `scancel` of the allocation (recorded as cancelled). A frontal that dies
//! closes the pipe too, so it leaves no allocation behind, where `salloc --no-shell`
//! would hold the nodes until the partition's time limit. `salloc`'s messages go to
//! an unnamed file, not a pipe: with its stderr a pipe closed by the frontal's death,
//! Slurm 22.05's `salloc` gave the allocation back and then spun on `wait4` for good.
//!
//! How many ranks the cluster holds, and where, is in every launch: the job's
//! `QCG_TOPOLOGY` names the cluster and node of each rank ([`part`]). The broker sends
//! the launches one rank at a time and at once; the first makes the allocation, the
//! others wait for it.
//!
//! Why this and not helpers started inside an allocation: the helpers stay what they
//! are on every other cluster, long-running node daemons (root for raw sockets and
//! account switching, a certificate each, a socket at a known path), and they still
//! carry the ranks' links; only the start, the accounting and the stop of the
//! processes move to Slurm, which owns the nodes' cores. A helper started per job
//! inside a user's allocation would run without those rights, need a certificate
//! per job, and appear only after the broker had already placed the ranks.
//!
//! `--immediate`, because the job's other ranks are starting now elsewhere: a part
//! queued behind other Slurm jobs would leave them waiting for it, so Slurm's refusal
//! (no such partition, the nodes' cores taken) fails the launch, and the job, at once
//! with Slurm's own words.
//!
//! The argument lists, the job's part and the parsing of `salloc`'s answer are pure
//! functions ([`part`], [`salloc_args`], [`srun_args`], [`granted`]); [`Slurm`] runs
//! them.

use qcg_proto::output::read_lines;
use qcg_proto::{ErrorKind, ExitReport, LaunchSpec, OutputLine, Request, Response, Stream};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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

/// The Slurm job name of a job's allocation: `qcg-JOB`.
pub fn job_name(job: &str) -> String {
    format!("qcg-{job}")
}

/// The Slurm step name of a rank: `qcg-JOB.RANK`.
pub fn step_name(job: &str, rank: u32) -> String {
    format!("qcg-{job}.{rank}")
}

/// The ranks of a job placed in one cluster, with their nodes.
pub type Part = BTreeMap<u32, String>;

/// The ranks of `spec`'s job that the broker placed in the same cluster as `spec`'s
/// rank, and their nodes, read from the job's `QCG_TOPOLOGY` (`cluster/node` per
/// rank, `;` between ranks; the last value when the profile set one too, as the
/// rank sees it). An error names what is missing or does not fit.
pub fn part(spec: &LaunchSpec) -> Result<Part, String> {
    let (job, rank) = (&spec.job, spec.rank);
    let Some((_, topology)) = spec
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == qcg_proto::env::TOPOLOGY)
    else {
        return Err(format!(
            "the launch of rank {rank} of job {job} does not say where the job's ranks run \
             ({} is missing): the broker is older than this frontal",
            qcg_proto::env::TOPOLOGY
        ));
    };
    let places: Vec<Option<(&str, &str)>> =
        topology.split(';').map(|p| p.split_once('/')).collect();
    let Some(Some((cluster, node))) = places.get(rank as usize).copied() else {
        return Err(format!(
            "{} of job {job} has no `cluster/node` for rank {rank}: `{topology}`",
            qcg_proto::env::TOPOLOGY
        ));
    };
    // The broker writes names with `/` and `;` replaced by `_`.
    if node != spec.node.replace(['/', ';'], "_") {
        return Err(format!(
            "{} of job {job} puts rank {rank} on node {node}, its launch on node {}",
            qcg_proto::env::TOPOLOGY,
            spec.node
        ));
    }
    let mut out: Part = places
        .iter()
        .enumerate()
        .filter_map(|(r, p)| {
            p.filter(|(c, _)| *c == cluster)
                .map(|(_, n)| (r as u32, n.to_string()))
        })
        .collect();
    out.insert(rank, spec.node.clone());
    Ok(out)
}

/// The distinct nodes of a part, in rank order.
fn nodes(part: &Part) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    part.values()
        .map(String::as_str)
        .filter(|n| seen.insert(*n))
        .collect()
}

/// `salloc`'s arguments for the allocation of `job`'s part in this cluster: one task
/// per rank, on the nodes the broker chose. The allocation's command is `cat`, on
/// the frontal's host: it ends, and `salloc` gives the allocation back, when the
/// frontal closes its stdin.
pub fn salloc_args(cfg: &SlurmConfig, job: &str, part: &Part) -> Vec<String> {
    let nodes = nodes(part);
    let mut a = vec![
        "--immediate".to_string(),
        format!("--ntasks={}", part.len()),
        format!("--nodes={}", nodes.len()),
        format!("--nodelist={}", nodes.join(",")),
        format!("--job-name={}", job_name(job)),
    ];
    if let Some(p) = &cfg.partition {
        a.push(format!("--partition={p}"));
    }
    if let Some(acct) = &cfg.account {
        a.push(format!("--account={acct}"));
    }
    a.push("--".into());
    a.push("cat".into());
    a
}

/// `srun`'s arguments for running `spec`'s program as a step of one task on its node
/// in allocation `id`. `--exact`: the step takes one of the allocation's CPUs, not
/// all of them on the node, so the ranks sharing a node run side by side.
pub fn srun_args(spec: &LaunchSpec, id: u64) -> Vec<String> {
    let mut a = vec![
        format!("--jobid={id}"),
        format!("--job-name={}", step_name(&spec.job, spec.rank)),
        "--ntasks=1".into(),
        "--nodes=1".into(),
        format!("--nodelist={}", spec.node),
        "--exact".into(),
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

/// What `salloc` wrote to its file of messages, read line by line as it comes.
struct Messages {
    file: std::fs::File,
    /// How far the file was read.
    read: u64,
    /// All it said, complete lines only.
    text: String,
    /// The start of a line not yet ended.
    partial: Vec<u8>,
}

impl Messages {
    /// At most this much of salloc's messages is kept (they are a few lines).
    const KEEP: usize = 64 * 1024;

    fn new(file: std::fs::File) -> Messages {
        Messages {
            file,
            read: 0,
            text: String::new(),
            partial: Vec::new(),
        }
    }

    /// The lines written since the last call.
    fn lines(&mut self) -> Vec<String> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 4096];
        let mut lines = Vec::new();
        loop {
            let n = match self.file.read_at(&mut buf, self.read) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            self.read += n as u64;
            for &b in &buf[..n] {
                if b == b'\n' {
                    let l = String::from_utf8_lossy(&self.partial).into_owned();
                    self.partial.clear();
                    if self.text.len() + l.len() < Self::KEEP {
                        self.text.push_str(&l);
                        self.text.push('\n');
                    }
                    lines.push(l);
                } else if self.partial.len() < Self::KEEP {
                    self.partial.push(b);
                }
            }
        }
        lines
    }

    /// Everything it said so far, with a last line not ended.
    fn text(&mut self) -> String {
        self.lines();
        let mut t = self.text.clone();
        t.push_str(&String::from_utf8_lossy(&self.partial));
        t
    }
}

/// How many ended jobs are remembered (their late launches are refused).
const CLOSED_MEMORY: usize = 4096;

/// A job's allocation in Slurm.
struct Alloc {
    /// Slurm's answer, once `salloc` gave it: the allocation, or its refusal.
    grant: tokio::sync::OnceCell<Result<u64, String>>,
    /// `salloc`'s command's stdin: closing it gives the allocation back.
    hold: Mutex<Option<tokio::process::ChildStdin>>,
    /// `scancel` was sent.
    cancelled: AtomicBool,
}

/// How an allocation ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// Every rank placed here ended: given back (completed, in Slurm's records).
    Done,
    /// `scancel` (cancelled).
    Cancel,
}

/// A rank's step.
#[derive(Clone, Debug)]
struct Step {
    node: String,
    /// Why the rank is lost, when its allocation was cancelled for something other
    /// than its job (a node's helper went away): its end is reported so.
    lost: Option<String>,
}

/// A job this frontal runs through Slurm.
struct JobRun {
    alloc: Arc<Alloc>,
    /// The ranks placed in this cluster, with their nodes.
    part: Part,
    /// The ranks whose step runs.
    running: BTreeMap<u32, Step>,
    /// The ranks whose step ended.
    done: BTreeSet<u32>,
    /// Cancelled or failed: no step starts any more; forgotten once none runs.
    over: bool,
}

/// The jobs this frontal runs through Slurm.
pub struct Slurm {
    cfg: SlurmConfig,
    /// Job → its allocation and steps, from its first launch until its last step ended.
    jobs: Mutex<BTreeMap<String, JobRun>>,
    /// Jobs cancelled or failed here, and why: their late launches are refused.
    closed: Mutex<VecDeque<(String, String)>>,
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
            jobs: Default::default(),
            closed: Default::default(),
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
        lock(&self.jobs)
            .iter()
            .flat_map(|(job, run)| {
                run.running
                    .iter()
                    .map(|(&r, s)| (qcg_proto::ProcName::new(job, r), s.node.clone()))
            })
            .collect()
    }

    /// Why `job`'s launches are refused, if they are.
    fn closed(&self, job: &str) -> Option<String> {
        lock(&self.closed)
            .iter()
            .find(|(j, _)| j == job)
            .map(|(_, why)| why.clone())
    }

    fn close(&self, job: &str, why: &str) {
        let mut closed = lock(&self.closed);
        if !closed.iter().any(|(j, _)| j == job) {
            closed.push_back((job.to_string(), why.to_string()));
            if closed.len() > CLOSED_MEMORY {
                closed.pop_front();
            }
        }
    }

    /// Starts `spec`'s rank as a step of its job's allocation, asking Slurm for the
    /// allocation first if no launch of the job did. `Ok` once the step is started;
    /// Slurm's refusal otherwise, naming the job's part and the nodes.
    pub async fn launch(self: &Arc<Self>, spec: &LaunchSpec) -> Response {
        let (job, rank, node) = (spec.job.clone(), spec.rank, spec.node.clone());
        if !self.cfg.allow_root && running_as_root() {
            return Response::error(
                ErrorKind::Forbidden,
                format!("rank {rank} of job {job} not started on node {node}: {ROOT_REFUSAL}"),
            );
        }
        if let Some(why) = self.closed(&job) {
            return Response::error(
                ErrorKind::Forbidden,
                format!("rank {rank} of job {job} not started: {why}"),
            );
        }
        let part = match part(spec) {
            Ok(p) => p,
            Err(e) => return Response::error(ErrorKind::Malformed, e),
        };
        let alloc = lock(&self.jobs)
            .entry(job.clone())
            .or_insert_with(|| JobRun {
                alloc: Arc::new(Alloc {
                    grant: Default::default(),
                    hold: Mutex::new(None),
                    cancelled: AtomicBool::new(false),
                }),
                part: part.clone(),
                running: BTreeMap::new(),
                done: BTreeSet::new(),
                over: false,
            })
            .alloc
            .clone();
        let grant = alloc
            .grant
            .get_or_init(|| self.allocate(&job, &part, &alloc))
            .await
            .clone();
        let id = match grant {
            Ok(id) => id,
            Err(why) => {
                self.close(&job, &why);
                self.forget_if_idle(&job, &alloc);
                return Response::error(ErrorKind::Unavailable, why);
            }
        };
        // The step is counted before it starts: a cancel from now on finds it.
        let refused = {
            let mut jobs = lock(&self.jobs);
            match jobs.get_mut(&job) {
                Some(run) if Arc::ptr_eq(&run.alloc, &alloc) && !run.over => {
                    run.running.insert(
                        rank,
                        Step {
                            node: node.clone(),
                            lost: None,
                        },
                    );
                    None
                }
                _ => Some(
                    self.closed(&job)
                        .unwrap_or_else(|| format!("job {job} has ended here")),
                ),
            }
        };
        if let Some(why) = refused {
            // Cancelled while Slurm was granting the allocation: it goes now.
            self.end(&alloc, End::Cancel).await;
            return Response::error(
                ErrorKind::Forbidden,
                format!("rank {rank} of job {job} not started: {why}"),
            );
        }
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
                // The job cannot run whole: its allocation goes.
                let why = format!("cannot run Slurm's `srun` for rank {rank} of job {job}: {e}");
                self.close(&job, &why);
                self.fail_step(&job, rank, &alloc);
                self.end(&alloc, End::Cancel).await;
                return Response::error(ErrorKind::Unavailable, why);
            }
        };
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
                let (lost, all_done) = me.step_ended(&job, rank, &alloc);
                if all_done {
                    me.end(&alloc, End::Done).await;
                }
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

    /// Asks Slurm for `job`'s allocation; its id once granted (`salloc` then holds
    /// it), Slurm's refusal otherwise.
    async fn allocate(&self, job: &str, part: &Part, alloc: &Alloc) -> Result<u64, String> {
        let where_ = format!(
            "{} rank(s) on {}{}",
            part.len(),
            nodes(part).join(","),
            self.cfg
                .partition
                .as_ref()
                .map(|p| format!(" (partition `{p}`)"))
                .unwrap_or_default()
        );
        // salloc's messages go to a file, not a pipe: a salloc whose stderr pipe
        // closed with a dead frontal was seen spinning on `wait4` for good (Slurm
        // 22.05, orphaned, 90 % of a core) after giving its allocation back. A file
        // never refuses a write; it is read here at our own offset.
        let messages = tempfile::tempfile()
            .map_err(|e| format!("cannot make a file for salloc's messages of job {job}: {e}"))?;
        let their_end = messages
            .try_clone()
            .map_err(|e| format!("cannot make a file for salloc's messages of job {job}: {e}"))?;
        let mut child = self
            .command("salloc")
            .args(salloc_args(&self.cfg, job, part))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(their_end)
            .kill_on_drop(false)
            .spawn()
            .map_err(|e| format!("cannot run Slurm's `salloc` for job {job}: {e}"))?;
        *lock(&alloc.hold) = child.stdin.take();
        let mut said = Messages::new(messages);
        let mut id = None;
        let mut exited = None;
        while id.is_none() && exited.is_none() {
            exited = child.try_wait().ok().flatten();
            // Read after the exit check, so that all it said before exiting is seen.
            for l in said.lines() {
                id = id.or(granted(&l));
            }
            if id.is_none() && exited.is_none() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
        let Some(id) = id else {
            drop(lock(&alloc.hold).take());
            let text = said.text();
            tracing::warn!(%job, status = ?exited, answer = %text.trim(), "Slurm refused the allocation");
            return Err(format!(
                "Slurm refused the allocation of job {job}'s {where_}: {}",
                refusal(&text)
            ));
        };
        tracing::info!(%job, slurm_job = id, part = %where_, "Slurm allocation granted");
        // salloc holds the allocation until its command ends; what it said until
        // then (the allocation given back, revoked, timed out) is logged.
        let job = job.to_string();
        tokio::spawn(
            async move {
                let status = child.wait().await;
                for l in said.lines() {
                    tracing::debug!(line = %l, "salloc");
                }
                match status {
                    Ok(s) => tracing::info!(status = %s, "Slurm allocation ended"),
                    Err(e) => tracing::warn!(error = %e, "salloc could not be waited for"),
                }
            }
            .instrument(tracing::error_span!(parent: None, "slurm_alloc", %job, slurm_job = id)),
        );
        Ok(id)
    }

    /// Ends an allocation: given back, or cancelled (once, whatever many ask).
    async fn end(&self, alloc: &Alloc, how: End) {
        if how == End::Cancel {
            if let Some(Ok(id)) = alloc.grant.get() {
                if !alloc.cancelled.swap(true, Ordering::SeqCst) {
                    self.scancel(*id).await;
                }
            }
        }
        drop(lock(&alloc.hold).take());
    }

    /// Forgets `job` if `alloc` is still its allocation and no step of it runs.
    fn forget_if_idle(&self, job: &str, alloc: &Arc<Alloc>) {
        let mut jobs = lock(&self.jobs);
        if jobs
            .get(job)
            .is_some_and(|r| Arc::ptr_eq(&r.alloc, alloc) && r.running.is_empty())
        {
            jobs.remove(job);
        }
    }

    /// `rank`'s step could not start: the job is over here.
    fn fail_step(&self, job: &str, rank: u32, alloc: &Arc<Alloc>) {
        if let Some(run) = lock(&self.jobs).get_mut(job) {
            run.running.remove(&rank);
            run.over = true;
        }
        self.forget_if_idle(job, alloc);
    }

    /// `rank`'s step ended: why it is lost, if it is, and whether every rank placed
    /// here has now ended (the allocation is then given back).
    fn step_ended(&self, job: &str, rank: u32, alloc: &Arc<Alloc>) -> (Option<String>, bool) {
        let mut jobs = lock(&self.jobs);
        let Some(run) = jobs.get_mut(job).filter(|r| Arc::ptr_eq(&r.alloc, alloc)) else {
            return (None, false);
        };
        let lost = run.running.remove(&rank).and_then(|s| s.lost);
        run.done.insert(rank);
        let all_done = run.part.keys().all(|r| run.done.contains(r));
        let over = run.over;
        if all_done || (over && run.running.is_empty()) {
            jobs.remove(job);
        }
        (lost, all_done && !over)
    }

    /// Cancels `job`'s allocation and refuses its later launches; returns how many
    /// allocations there were (0 or 1).
    pub async fn cancel(&self, job: &str) -> usize {
        self.close(job, &format!("job {job} was cancelled"));
        let alloc = {
            let mut jobs = lock(&self.jobs);
            let alloc = jobs.get_mut(job).map(|run| {
                run.over = true;
                run.alloc.clone()
            });
            if jobs.get(job).is_some_and(|r| r.running.is_empty()) {
                jobs.remove(job);
            }
            alloc
        };
        let Some(alloc) = alloc else { return 0 };
        tracing::info!(%job, allocation = ?alloc.grant.get(), "cancelling the job's Slurm allocation");
        // An allocation still being granted is cancelled by its launch when it comes.
        self.end(&alloc, End::Cancel).await;
        1
    }

    /// Cancels the allocations of the jobs with ranks on `node` (its helper went
    /// away: they cannot make links any more) and returns those ranks; each rank's
    /// end is reported, once its step has ended, as lost for `why` (the job's ranks
    /// on other nodes, stopped with the allocation, say so too).
    pub async fn cancel_node(&self, node: &str, why: &str) -> Vec<qcg_proto::ProcName> {
        let mut ranks = Vec::new();
        let mut allocs = Vec::new();
        {
            let mut jobs = lock(&self.jobs);
            for (job, run) in jobs.iter_mut() {
                if !run.running.values().any(|s| s.node == node) {
                    continue;
                }
                for (&r, s) in run.running.iter_mut() {
                    if s.node == node {
                        s.lost = Some(why.to_string());
                        ranks.push(qcg_proto::ProcName::new(job, r));
                    } else {
                        s.lost = Some(format!("its Slurm allocation was cancelled: {why}"));
                    }
                }
                run.over = true;
                allocs.push((job.clone(), run.alloc.clone()));
            }
        }
        for (job, alloc) in allocs {
            tracing::warn!(%job, %node, allocation = ?alloc.grant.get(), "the node's helper went away: cancelling the job's Slurm allocation");
            self.close(&job, why);
            self.end(&alloc, End::Cancel).await;
        }
        ranks
    }

    async fn scancel(&self, id: u64) {
        let r = self
            .command("scancel")
            .arg(id.to_string())
            .stdin(Stdio::null())
            .output()
            .await;
        match r {
            Ok(o) if o.status.success() => {}
            Ok(o) => tracing::warn!(
                allocation = id,
                answer = %String::from_utf8_lossy(&o.stderr).trim(),
                "scancel failed"
            ),
            Err(e) => tracing::warn!(allocation = id, error = %e, "cannot run scancel"),
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
            env: vec![(
                "QCG_TOPOLOGY".into(),
                "alpha/a1;beta/b1;alpha/a2;alpha/a1;alpha/a1".into(),
            )],
            working_directory: Some("/w".into()),
            owner: None,
        }
    }

    fn cfg() -> SlurmConfig {
        SlurmConfig {
            partition: Some("qcg".into()),
            helper_socket: "/run/qcg/{node}.sock".into(),
            conf: None,
            bin_dir: None,
            account: None,
            allow_root: false,
        }
    }

    #[test]
    fn the_part_of_a_job_in_the_cluster_comes_from_its_topology() {
        let p = part(&spec()).unwrap();
        let want: Part = [(0, "a1"), (2, "a2"), (3, "a1"), (4, "a1")]
            .into_iter()
            .map(|(r, n)| (r, n.to_string()))
            .collect();
        assert_eq!(p, want);
        assert_eq!(nodes(&p), ["a1", "a2"]);
        // The profile's own value comes first; the broker's, last, is the rank's.
        let mut s = spec();
        s.env.insert(0, ("QCG_TOPOLOGY".into(), "x/y".into()));
        assert_eq!(part(&s).unwrap(), want);
        let wrong = |env: Vec<(String, String)>, node: &str| {
            let s = LaunchSpec {
                env,
                node: node.into(),
                ..spec()
            };
            part(&s).unwrap_err()
        };
        assert!(wrong(vec![], "a1").contains("QCG_TOPOLOGY is missing"));
        let e = wrong(vec![("QCG_TOPOLOGY".into(), "alpha/a1".into())], "a1");
        assert!(e.contains("no `cluster/node` for rank 3"), "{e}");
        let e = wrong(spec().env, "a9");
        assert!(
            e.contains("puts rank 3 on node a1, its launch on node a9"),
            "{e}"
        );
    }

    #[test]
    fn allocation_and_step_arguments() {
        let cfg = cfg();
        let a = salloc_args(&cfg, "job-7", &part(&spec()).unwrap());
        for want in [
            "--immediate",
            "--ntasks=4",
            "--nodes=2",
            "--nodelist=a1,a2",
            "--partition=qcg",
            "--job-name=qcg-job-7",
        ] {
            assert!(a.contains(&want.to_string()), "{want} not in {a:?}");
        }
        assert_eq!(a[a.len() - 2..], ["--", "cat"]);
        let s = srun_args(&spec(), 12);
        assert_eq!(s[0], "--jobid=12");
        for want in [
            "--job-name=qcg-job-7.3",
            "--ntasks=1",
            "--nodelist=a1",
            "--exact",
            "--chdir=/w",
        ] {
            assert!(s.contains(&want.to_string()), "{want} not in {s:?}");
        }
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
    fn salloc_messages_are_read_line_by_line_as_they_are_written() {
        use std::io::Write;
        let file = tempfile::tempfile().unwrap();
        let mut theirs = file.try_clone().unwrap();
        let mut said = Messages::new(file);
        assert!(said.lines().is_empty());
        theirs
            .write_all(b"salloc: Pending job allocation 2\nsalloc: Gra")
            .unwrap();
        assert_eq!(said.lines(), ["salloc: Pending job allocation 2"]);
        theirs
            .write_all(b"nted job allocation 2\nsalloc: error: half")
            .unwrap();
        let lines = said.lines();
        assert_eq!(lines, ["salloc: Granted job allocation 2"]);
        assert_eq!(granted(&lines[0]), Some(2));
        assert_eq!(
            said.text(),
            "salloc: Pending job allocation 2\nsalloc: Granted job allocation 2\nsalloc: error: half"
        );
        // A salloc that talks without end is kept to a bound.
        let line = vec![b'x'; 1000];
        for _ in 0..200 {
            theirs.write_all(&line).unwrap();
            theirs.write_all(b"\n").unwrap();
        }
        assert_eq!(said.lines().len(), 200);
        assert!(said.text().len() <= Messages::KEEP + 1000);
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
