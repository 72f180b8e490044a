//! Starting a job's processes and collecting what they print.
//!
//! Every rank runs as the leader of a process group of its own, so that whatever it
//! starts goes with it: when a rank ends, what it left behind in its group is killed
//! (orphans would otherwise hold its output open); when a rank fails, or the job is
//! stopped (a timeout, SIGINT or SIGTERM to `qcg run`), every rank's group gets
//! SIGTERM, then SIGKILL after a grace period, and `qcg run` returns only once no
//! process of any group is left.

use qcg_helper::pgroup;
use qcg_proto::{Request, Response};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// How long the output of ended ranks is still read (a process that left their
/// group may hold it open).
const DRAIN: Duration = Duration::from_secs(2);

/// A job to start.
pub struct Job {
    /// Job id.
    pub id: String,
    /// Job secret.
    pub secret: [u8; 32],
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// The helper socket of each rank's node.
    pub sockets: Vec<PathBuf>,
}

/// Why a job was stopped from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// `--timeout` ran out after this many seconds.
    Timeout(u64),
    /// `qcg run` received this signal (SIGINT, SIGTERM).
    Signal(i32),
}

impl Stop {
    /// The exit code of a job stopped this way: 124 for a timeout (as timeout(1)),
    /// 128 + the signal's number for a signal (as a shell).
    pub fn code(&self) -> i32 {
        match self {
            Stop::Timeout(_) => 124,
            Stop::Signal(s) => 128 + s,
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Timeout(s) => write!(f, "timed out after {s} s"),
            Stop::Signal(2) => write!(f, "was interrupted (SIGINT)"),
            Stop::Signal(15) => write!(f, "was terminated (SIGTERM)"),
            Stop::Signal(s) => write!(f, "was stopped by signal {s}"),
        }
    }
}

/// How a job ended.
#[derive(Debug)]
pub struct Outcome {
    /// Each rank's exit status (`None` when it could not be started or waited for).
    pub statuses: Vec<Option<ExitStatus>>,
    /// The first rank that failed, with a description.
    pub failure: Option<(u32, String)>,
    /// Set when the job was stopped from outside before it ended.
    pub stopped: Option<Stop>,
    /// Process groups that were still seen running after SIGKILL (normally none).
    pub survivors: Vec<u32>,
}

impl Outcome {
    /// The exit code `qcg run` should return: the stop's code when it was stopped, else
    /// the exit status of the rank that failed first (128 + the signal's number when
    /// a signal killed it), else 0.
    pub fn code(&self) -> i32 {
        if let Some(s) = &self.stopped {
            return s.code();
        }
        let Some((rank, _)) = &self.failure else {
            return 0;
        };
        use std::os::unix::process::ExitStatusExt;
        match self.statuses.get(*rank as usize).copied().flatten() {
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) if c != 0 => c,
                (None, Some(sig)) => 128 + sig,
                _ => 1,
            },
            None => 1,
        }
    }
}

fn describe(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("was killed by signal {s}"),
        _ => "ended abnormally".into(),
    }
}

/// Starts every rank, prints their output prefixed with `[rank]`, waits for all of
/// them. When a rank fails the others are stopped, as MPI does.
pub async fn run(job: &Job) -> anyhow::Result<Outcome> {
    run_until(job, std::future::pending()).await
}

/// Like [`run`], and stops every rank when `stop` resolves first.
pub async fn run_until(job: &Job, stop: impl Future<Output = Stop>) -> anyhow::Result<Outcome> {
    let n = job.sockets.len();
    let topology = topology(&job.sockets).await?;
    let mut children: Vec<tokio::process::Child> = Vec::with_capacity(n);
    let mut groups: Vec<u32> = Vec::with_capacity(n);
    let mut printers = tokio::task::JoinSet::new();
    for (rank, socket) in job.sockets.iter().enumerate() {
        let mut cmd = Command::new(&job.program);
        let vars = qcg_proto::env::JobVars {
            job: job.id.clone(),
            rank: rank as u32,
            size: n as u32,
            secret_hex: hex::encode(job.secret),
            // Without a JobProfile every rank is in one group, `all`.
            groups: Some(qcg_proto::groups::encode(&[("all".to_string(), n as u32)])),
            topology: Some(topology.clone()),
        };
        cmd.args(&job.args)
            .envs(vars.pairs())
            .env(qcg_proto::env::HELPER, socket)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = match cmd.spawn().map(|c| {
            let pid = c.id();
            (c, pid)
        }) {
            Ok((c, Some(pid))) => {
                groups.push(pid);
                c
            }
            Ok((_, None)) => {
                pgroup::kill_groups(&groups).await;
                anyhow::bail!("rank {rank} ended before it could be watched");
            }
            Err(e) => {
                pgroup::kill_groups(&groups).await;
                anyhow::bail!(
                    "cannot start {} for rank {rank}: {e}",
                    job.program.display()
                );
            }
        };
        if let Some(out) = child.stdout.take() {
            printers.spawn(async move {
                let mut lines = BufReader::new(out).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    println!("[{rank}] {l}");
                }
            });
        }
        if let Some(err) = child.stderr.take() {
            printers.spawn(async move {
                let mut lines = BufReader::new(err).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    eprintln!("[{rank}] {l}");
                }
            });
        }
        children.push(child);
    }

    let mut statuses: Vec<Option<ExitStatus>> = vec![None; n];
    let mut failure: Option<(u32, String)> = None;
    let mut stopped: Option<Stop> = None;
    let mut waits: tokio::task::JoinSet<(usize, std::io::Result<ExitStatus>)> = Default::default();
    for (rank, mut child) in children.into_iter().enumerate() {
        let group = groups[rank];
        waits.spawn(async move {
            let status = child.wait().await;
            // What the rank left behind in its group goes with it: it would hold the
            // rank's output open and run on unseen.
            pgroup::signal_group(group, rustix::process::Signal::KILL);
            (rank, status)
        });
    }
    // The stop of every group runs beside the waits: once it is under way, the
    // ranks' ends are still collected as they come.
    let mut stopping: Option<tokio::task::JoinHandle<Vec<u32>>> = None;
    let begin_stop = |stopping: &mut Option<tokio::task::JoinHandle<Vec<u32>>>| {
        if stopping.is_none() {
            let groups = groups.clone();
            *stopping = Some(tokio::spawn(async move {
                pgroup::stop_groups(&groups, pgroup::GRACE).await
            }));
        }
    };
    tokio::pin!(stop);
    loop {
        tokio::select! {
            done = waits.join_next() => {
                let Some(done) = done else { break };
                let Ok((rank, status)) = done else { continue };
                match status {
                    Ok(s) => {
                        statuses[rank] = Some(s);
                        if !s.success() && failure.is_none() && stopped.is_none() {
                            failure = Some((rank as u32, describe(&s)));
                            if !waits.is_empty() {
                                eprintln!(
                                    "qcg: rank {rank} {}; stopping the other ranks",
                                    describe(&s)
                                );
                            }
                            begin_stop(&mut stopping);
                        }
                    }
                    Err(e) => {
                        if failure.is_none() && stopped.is_none() {
                            failure = Some((rank as u32, format!("could not be waited for: {e}")));
                            begin_stop(&mut stopping);
                        }
                    }
                }
            }
            why = &mut stop, if stopped.is_none() => {
                eprintln!("qcg: job {} {why}; stopping every rank", job.id);
                stopped = Some(why);
                begin_stop(&mut stopping);
            }
        }
    }
    // Every rank has ended; make sure nothing of their groups runs on.
    let mut survivors = match stopping {
        Some(h) => h.await.unwrap_or_default(),
        None => Vec::new(),
    };
    for g in pgroup::kill_groups(&groups).await {
        if !survivors.contains(&g) {
            survivors.push(g);
        }
    }
    // Output still buffered is printed; a pipe held open from outside the groups is
    // not waited for long.
    let _ = tokio::time::timeout(DRAIN, async {
        while printers.join_next().await.is_some() {}
    })
    .await;
    printers.abort_all();
    Ok(Outcome {
        statuses,
        failure,
        stopped,
        survivors,
    })
}

/// Asks a helper which cluster and node it serves; while the answer is
/// `unavailable` (its frontal or the broker restarting), asks again with a growing
/// pause for up to a minute.
pub async fn node_info(socket: &Path) -> anyhow::Result<(String, String)> {
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut pause = std::time::Duration::from_millis(100);
    loop {
        match node_info_answer(socket).await {
            Ok(r) => return Ok(r),
            Err(NodeInfoError::Unavailable(e)) if tokio::time::Instant::now() + pause < until => {
                tracing::debug!(error = %e, "the grid is not there yet; asking again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(2));
            }
            Err(NodeInfoError::Unavailable(e)) => {
                anyhow::bail!("helper at {}: {e}", socket.display())
            }
            Err(NodeInfoError::Other(e)) => return Err(e),
        }
    }
}

/// Why a helper did not say where it is: `unavailable` is worth asking again.
enum NodeInfoError {
    Unavailable(qcg_proto::msg::ErrorReply),
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for NodeInfoError {
    fn from(e: E) -> Self {
        NodeInfoError::Other(e.into())
    }
}

async fn node_info_answer(socket: &Path) -> Result<(String, String), NodeInfoError> {
    let mut s = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| anyhow::anyhow!("helper at {}: {e}", socket.display()))?;
    qcg_proto::frame::write_frame(&mut s, &Request::NodeInfo).await?;
    match qcg_proto::frame::read_frame::<Response, _>(&mut s).await? {
        Some(Response::Node { cluster, node, .. }) => Ok((cluster.name, node)),
        Some(Response::Error(e)) if e.kind == qcg_proto::ErrorKind::Unavailable => {
            Err(NodeInfoError::Unavailable(e))
        }
        Some(Response::Error(e)) => {
            Err(anyhow::anyhow!("helper at {}: {e}", socket.display()).into())
        }
        other => Err(anyhow::anyhow!(
            "helper at {}: unexpected answer {other:?}",
            socket.display()
        )
        .into()),
    }
}

/// The job's topology (`QCG_TOPOLOGY`: cluster/node of every rank), from its helpers.
pub async fn topology(sockets: &[PathBuf]) -> anyhow::Result<String> {
    let mut known: std::collections::HashMap<&Path, (String, String)> = Default::default();
    let mut paths = Vec::with_capacity(sockets.len());
    for s in sockets {
        if !known.contains_key(s.as_path()) {
            known.insert(s, node_info(s).await?);
        }
        let (c, n) = &known[s.as_path()];
        // `/` and `;` separate levels and ranks: keep them out of names.
        let clean = |x: &str| x.replace(['/', ';'], "_");
        paths.push(format!("{}/{}", clean(c), clean(n)));
    }
    Ok(paths.join(";"))
}

/// Tells the grid, through a helper, that a job has ended.
pub async fn end_job(socket: &Path, job: &str) -> anyhow::Result<()> {
    let mut s = tokio::net::UnixStream::connect(socket).await?;
    qcg_proto::frame::write_frame(&mut s, &Request::JobEnd { job: job.into() }).await?;
    match qcg_proto::frame::read_frame::<Response, _>(&mut s).await? {
        Some(Response::Ok) => Ok(()),
        other => anyhow::bail!("job end not acknowledged: {other:?}"),
    }
}
