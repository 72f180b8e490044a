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
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Why a job could not be started or the grid not asked.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A helper could not be reached or did not answer as expected.
    #[error("helper at {}: {detail}", .socket.display())]
    Helper {
        /// The helper's socket.
        socket: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A rank's program could not be started.
    #[error("cannot start {} for rank {rank}: {source}", .program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The rank.
        rank: usize,
        /// Why.
        source: std::io::Error,
    },
    /// A file or folder of `--output-filename` could not be made.
    #[error("cannot create {}: {source}", .path.display())]
    Output {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The launcher's own plumbing (pipes, threads) failed.
    #[error("launcher: {0}")]
    Io(#[from] std::io::Error),
}

impl LaunchError {
    fn helper(socket: &Path, detail: impl std::fmt::Display) -> Self {
        LaunchError::Helper {
            socket: socket.to_path_buf(),
            detail: detail.to_string(),
        }
    }
}

/// How long the output of ended ranks is still read (a process that left their
/// group may hold it open).
const DRAIN: Duration = Duration::from_secs(2);

/// A job to start.
#[derive(Debug, Clone, Default)]
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
    /// Where the ranks' output goes and what they get besides the job's variables.
    pub io: Io,
}

/// A job's input, output and extra environment, as mpirun's options set them.
#[derive(Debug, Clone, Default)]
pub struct Io {
    /// Each line a rank prints is prefixed with `[RANK] ` (`--tag-output`);
    /// otherwise lines pass as the rank printed them, as under mpirun.
    pub tag_output: bool,
    /// Each rank's stdout and stderr go to `DIR/1/rank.N/stdout` and `stderr`
    /// (Open MPI's `--output-filename` layout) instead of the launcher's.
    pub output_dir: Option<PathBuf>,
    /// Rank 0 reads the launcher's stdin (the others read /dev/null).
    pub stdin_to_rank0: bool,
    /// Variables set for every rank (`-x VAR=VALUE`), before the job's own.
    pub env: Vec<(String, String)>,
}

impl Io {
    /// The files rank `rank`'s stdout and stderr go to under `--output-filename DIR`.
    pub fn output_files(dir: &Path, rank: usize) -> (PathBuf, PathBuf) {
        let d = dir.join("1").join(format!("rank.{rank}"));
        (d.join("stdout"), d.join("stderr"))
    }
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

/// A rank's end as its waiting thread saw it.
struct End {
    rank: usize,
    status: std::io::Result<ExitStatus>,
    /// When the thread blocked in `waitpid` for it woke up.
    at: Instant,
}

/// What a rank said of a peer: `rank K is gone` (libqcg's words for a peer whose
/// links broke, libqcg's `Error::PeerLost`) on its stderr names K, the rank its own
/// failure followed from.
fn peer_gone(line: &[u8]) -> Option<u32> {
    let text = String::from_utf8_lossy(line);
    let (before, _) = text.split_once(" is gone")?;
    before.rsplit_once("rank ")?.1.trim().parse().ok()
}

/// Kills every rank's group if the launcher is dropped before the job ended (the
/// ranks are waited for by threads, which a dropped future does not stop).
struct Groups {
    pgids: Vec<u32>,
    done: bool,
}

impl Drop for Groups {
    fn drop(&mut self) {
        if !self.done {
            for &g in &self.pgids {
                pgroup::signal_group(g, rustix::process::Signal::KILL);
            }
        }
    }
}

/// Starts every rank, passes their output on, waits for all of them. When a rank
/// fails the others are stopped, as MPI does.
pub async fn run(job: &Job) -> Result<Outcome, LaunchError> {
    run_until(job, std::future::pending()).await
}

/// Like [`run`], and stops every rank when `stop` resolves first.
///
/// The rank blamed for a failure is settled once every rank has ended, not taken
/// from the first end seen: a rank that exits makes its peers fail a moment later
/// (their links break), and on a busy machine the launcher may see them first. A
/// rank this launcher's stop killed is not blamed, nor one whose stderr said that
/// another failed rank `is gone`; of the rest, the one whose waiting thread woke
/// first.
pub async fn run_until(
    job: &Job,
    stop: impl Future<Output = Stop>,
) -> Result<Outcome, LaunchError> {
    let n = job.sockets.len();
    let topology = topology(&job.sockets).await?;
    let mut groups = Groups {
        pgids: Vec::with_capacity(n),
        done: false,
    };
    let mut printers = tokio::task::JoinSet::new();
    let said: Said = Arc::new(Mutex::new(vec![None; n]));
    let (ends_tx, mut ends) = tokio::sync::mpsc::unbounded_channel::<End>();
    for (rank, socket) in job.sockets.iter().enumerate() {
        let mut cmd = std::process::Command::new(&job.program);
        let vars = qcg_proto::env::JobVars {
            job: job.id.clone(),
            rank: rank as u32,
            size: n as u32,
            secret_hex: hex::encode(job.secret),
            // Without a JobProfile every rank is in one group, `all`.
            groups: Some(qcg_proto::groups::encode(&[("all".to_string(), n as u32)])),
            topology: Some(topology.clone()),
        };
        let stdin = if rank == 0 && job.io.stdin_to_rank0 {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        cmd.args(&job.args)
            .envs(job.io.env.iter().map(|(k, v)| (k, v)))
            .envs(vars.pairs())
            .env(qcg_proto::env::HELPER, socket)
            .stdin(stdin)
            .process_group(0);
        match &job.io.output_dir {
            Some(dir) => {
                let (out, err) = Io::output_files(dir, rank);
                let open = |p: &Path| -> Result<std::fs::File, LaunchError> {
                    let cannot = |path: &Path| {
                        let path = path.to_path_buf();
                        move |source| LaunchError::Output { path, source }
                    };
                    if let Some(d) = p.parent() {
                        std::fs::create_dir_all(d).map_err(cannot(d))?;
                    }
                    std::fs::File::create(p).map_err(cannot(p))
                };
                let files = open(&out).and_then(|o| Ok((o, open(&err)?)));
                match files {
                    Ok((o, e)) => cmd.stdout(o).stderr(e),
                    Err(e) => {
                        pgroup::kill_groups(&groups.pgids).await;
                        return Err(e);
                    }
                };
            }
            None => {
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            }
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(source) => {
                pgroup::kill_groups(&groups.pgids).await;
                return Err(LaunchError::Spawn {
                    program: job.program.clone(),
                    rank,
                    source,
                });
            }
        };
        groups.pgids.push(child.id());
        let tag = job.io.tag_output.then(|| format!("[{rank}] "));
        if let Some(out) = child.stdout.take() {
            let out = tokio::process::ChildStdout::from_std(out)?;
            printers.spawn(pass_lines(out, tag.clone(), None));
        }
        if let Some(err) = child.stderr.take() {
            let err = tokio::process::ChildStderr::from_std(err)?;
            printers.spawn(pass_lines(err, tag, Some((rank, said.clone()))));
        }
        if let Some(mut input) = child.stdin.take() {
            // A plain thread: a read of a terminal cannot be cancelled, and the
            // launcher's process ends it when the job is over.
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut input);
            });
        }
        let tx = ends_tx.clone();
        let group = child.id();
        std::thread::Builder::new()
            .name(format!("rank-{rank}-wait"))
            .spawn(move || {
                let status = child.wait();
                let at = Instant::now();
                // What the rank left behind in its group goes with it: it would hold
                // the rank's output open and run on unseen.
                pgroup::signal_group(group, rustix::process::Signal::KILL);
                let _ = tx.send(End { rank, status, at });
            })?;
    }
    drop(ends_tx);

    let mut statuses: Vec<Option<ExitStatus>> = vec![None; n];
    let mut failed: Vec<(Instant, u32, String)> = Vec::new();
    let mut stopped: Option<Stop> = None;
    let mut failing = false;
    let mut left = n;
    // The stop of every group runs beside the waits: once it is under way, the
    // ranks' ends are still collected as they come.
    let mut stopping: Option<tokio::task::JoinHandle<Vec<u32>>> = None;
    let mut stop_began: Option<Instant> = None;
    let mut begin_stop = |stopping: &mut Option<tokio::task::JoinHandle<Vec<u32>>>| {
        if stopping.is_none() {
            stop_began = Some(Instant::now());
            let groups = groups.pgids.clone();
            *stopping = Some(tokio::spawn(async move {
                pgroup::stop_groups(&groups, pgroup::GRACE).await
            }));
        }
    };
    let note = |end: End,
                statuses: &mut Vec<Option<ExitStatus>>,
                failed: &mut Vec<(Instant, u32, String)>| {
        let rank = end.rank as u32;
        match end.status {
            Ok(s) => {
                statuses[end.rank] = Some(s);
                if !s.success() {
                    failed.push((end.at, rank, describe(&s)));
                }
            }
            Err(e) => failed.push((end.at, rank, format!("could not be waited for: {e}"))),
        }
    };
    tokio::pin!(stop);
    while left > 0 {
        tokio::select! {
            end = ends.recv() => {
                let Some(end) = end else { break };
                left -= 1;
                note(end, &mut statuses, &mut failed);
                if !failing && stopped.is_none() && !failed.is_empty() {
                    // Which rank to blame is settled once all have ended: the one
                    // that failed may end after the peers its end made fail.
                    failing = true;
                    if left > 0 {
                        eprintln!("qcg: job {}: a rank failed; stopping the other ranks", job.id);
                    }
                    begin_stop(&mut stopping);
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
    for g in pgroup::kill_groups(&groups.pgids).await {
        if !survivors.contains(&g) {
            survivors.push(g);
        }
    }
    groups.done = true;
    // Output still buffered is printed; a pipe held open from outside the groups is
    // not waited for long.
    let _ = tokio::time::timeout(DRAIN, async {
        while printers.join_next().await.is_some() {}
    })
    .await;
    printers.abort_all();
    let failure = if failing {
        let said = said.lock().map(|s| s.clone()).unwrap_or_default();
        blame(failed, &statuses, &said, stop_began)
    } else {
        None
    };
    Ok(Outcome {
        statuses,
        failure,
        stopped,
        survivors,
    })
}

/// Per rank, the peer its stderr last said `is gone` ([`peer_gone`]).
type Said = Arc<Mutex<Vec<Option<u32>>>>;

/// The failed rank to name, and how it ended: see [`run_until`]. `failed` holds
/// (when its waiting thread woke, rank, description).
fn blame(
    mut failed: Vec<(Instant, u32, String)>,
    statuses: &[Option<ExitStatus>],
    said: &[Option<u32>],
    stop_began: Option<Instant>,
) -> Option<(u32, String)> {
    use std::os::unix::process::ExitStatusExt;
    failed.sort_by_key(|f| f.0);
    let ours = |(at, rank, _): &(Instant, u32, String)| {
        let signalled = statuses[*rank as usize]
            .and_then(|s| s.signal())
            .is_some_and(|s| s == libc_sig::TERM || s == libc_sig::KILL);
        signalled && stop_began.is_some_and(|t| *at >= t)
    };
    let failed_ranks: Vec<u32> = failed.iter().map(|f| f.1).collect();
    let secondary = |(_, rank, _): &(Instant, u32, String)| {
        said[*rank as usize].is_some_and(|p| p != *rank && failed_ranks.contains(&p))
    };
    failed
        .iter()
        .find(|f| !ours(f) && !secondary(f))
        .or_else(|| failed.iter().find(|f| !ours(f)))
        .or_else(|| failed.first())
        .map(|(_, rank, why)| (*rank, why.clone()))
}

/// The signals a stop sends.
mod libc_sig {
    pub const TERM: i32 = 15;
    pub const KILL: i32 = 9;
}

/// Passes a rank's output on line by line (so that ranks' lines do not mix), as
/// bytes: what is not UTF-8 passes too. `stderr` is set for a rank's stderr, which
/// is also read for the peer it says is gone.
async fn pass_lines(
    from: impl tokio::io::AsyncRead + Unpin,
    tag: Option<String>,
    stderr: Option<(usize, Said)>,
) {
    use std::io::Write;
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        let write = |w: &mut dyn Write| {
            if let Some(t) = &tag {
                let _ = w.write_all(t.as_bytes());
            }
            let _ = w.write_all(&line);
            let _ = w.flush();
        };
        if let Some((rank, said)) = &stderr {
            if let Some(peer) = peer_gone(&line) {
                if let Ok(mut s) = said.lock() {
                    s[*rank] = Some(peer);
                }
            }
            write(&mut std::io::stderr().lock());
        } else {
            write(&mut std::io::stdout().lock());
        }
    }
}

/// Asks a helper which cluster and node it serves; while the answer is
/// `unavailable` (its frontal or the broker restarting), asks again with a growing
/// pause for up to a minute.
pub async fn node_info(socket: &Path) -> Result<(String, String), LaunchError> {
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut pause = Duration::from_millis(100);
    loop {
        match node_info_answer(socket).await {
            Ok(r) => return Ok(r),
            Err(NodeInfoError::Unavailable(e)) if tokio::time::Instant::now() + pause < until => {
                tracing::debug!(error = %e, "the grid is not there yet; asking again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(NodeInfoError::Unavailable(e)) => return Err(LaunchError::helper(socket, e)),
            Err(NodeInfoError::Other(e)) => return Err(e),
        }
    }
}

/// Why a helper did not say where it is: `unavailable` is worth asking again.
enum NodeInfoError {
    Unavailable(qcg_proto::msg::ErrorReply),
    Other(LaunchError),
}

async fn node_info_answer(socket: &Path) -> Result<(String, String), NodeInfoError> {
    let other = |e: &dyn std::fmt::Display| NodeInfoError::Other(LaunchError::helper(socket, e));
    let mut s = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| other(&e))?;
    qcg_proto::frame::write_frame(&mut s, &Request::NodeInfo)
        .await
        .map_err(|e| other(&e))?;
    let answer = qcg_proto::frame::read_frame::<Response, _>(&mut s)
        .await
        .map_err(|e| other(&e))?;
    match answer {
        Some(Response::Node { cluster, node, .. }) => Ok((cluster.name, node)),
        Some(Response::Error(e)) if e.kind == qcg_proto::ErrorKind::Unavailable => {
            Err(NodeInfoError::Unavailable(e))
        }
        Some(Response::Error(e)) => Err(other(&e)),
        other_answer => Err(other(&format!("unexpected answer {other_answer:?}"))),
    }
}

/// The job's topology (`QCG_TOPOLOGY`: cluster/node of every rank), from its helpers.
pub async fn topology(sockets: &[PathBuf]) -> Result<String, LaunchError> {
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
pub async fn end_job(socket: &Path, job: &str) -> Result<(), LaunchError> {
    let fail = |e: &dyn std::fmt::Display| LaunchError::helper(socket, e);
    let mut s = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| fail(&e))?;
    qcg_proto::frame::write_frame(&mut s, &Request::JobEnd { job: job.into() })
        .await
        .map_err(|e| fail(&e))?;
    match qcg_proto::frame::read_frame::<Response, _>(&mut s)
        .await
        .map_err(|e| fail(&e))?
    {
        Some(Response::Ok) => Ok(()),
        other => Err(fail(&format!("job end not acknowledged: {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn the_peer_a_rank_says_is_gone() {
        let l = b"qcg-mpi: MPI_Barrier failed on rank 2: MPI_ERR_OTHER: barrier: rank 0 failed: barrier: rank 1 is gone: it closed its link; aborting the job\n";
        assert_eq!(peer_gone(l), Some(1));
        assert_eq!(peer_gone(b"rank 12 is gone: its process exited"), Some(12));
        assert_eq!(peer_gone(b"everything is gone"), None);
        assert_eq!(peer_gone(b"hello"), None);
    }

    #[test]
    fn the_rank_whose_end_made_the_others_fail_is_blamed() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let exit = |c: i32| Some(ExitStatus::from_raw(c << 8));
        let killed = |s: i32| Some(ExitStatus::from_raw(s));
        // Rank 2 and rank 0 were seen before rank 1, but both said rank 1 was gone.
        let statuses = [exit(16), exit(7), exit(16), killed(15)];
        let failed = vec![
            (at(0), 2, "exited with status 16".to_string()),
            (at(1), 0, "exited with status 16".to_string()),
            (at(2), 1, "exited with status 7".to_string()),
            (at(3), 3, "was killed by signal 15".to_string()),
        ];
        let said = [Some(1), None, Some(1), None];
        assert_eq!(
            blame(failed.clone(), &statuses, &said, Some(at(0))),
            Some((1, "exited with status 7".to_string()))
        );
        // Nothing said: the first seen.
        assert_eq!(
            blame(failed.clone(), &statuses, &[None; 4], Some(at(0)))
                .unwrap()
                .0,
            2
        );
        // A rank our stop killed is not blamed, even if seen first.
        let statuses = [killed(15), exit(7)];
        let failed = vec![
            (at(5), 0, "was killed by signal 15".to_string()),
            (at(6), 1, "exited with status 7".to_string()),
        ];
        assert_eq!(
            blame(failed, &statuses, &[None; 2], Some(at(4))).unwrap().0,
            1
        );
    }
}
