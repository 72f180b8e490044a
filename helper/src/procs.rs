//! The processes a helper started for jobs: start, stream their output up, report
//! their end, and kill whole process groups.

use qcg_proto::quic::Upstream;
use qcg_proto::{ErrorKind, ExitReport, LaunchSpec, OutputLine, Request, Response, Stream};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

/// Longest line forwarded; longer ones are cut (and marked).
const MAX_LINE: usize = 16 * 1024;
/// Most bytes of text in one `Output` request.
const MAX_BATCH: usize = 256 * 1024;
/// How many killed jobs are remembered (their late launches are refused).
const KILLED_MEMORY: usize = 4096;

/// Running processes by job and rank (the value is the process group id), and jobs
/// that were killed.
#[derive(Default)]
pub struct Procs {
    running: Mutex<BTreeMap<String, BTreeMap<u32, u32>>>,
    killed: Mutex<VecDeque<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where the program of `spec` is: a relative path with a `/` is taken from the
/// working directory; a bare name is left for `PATH`.
pub fn program_path(spec: &LaunchSpec) -> PathBuf {
    let exe = Path::new(&spec.executable);
    match &spec.working_directory {
        Some(wd) if exe.is_relative() && spec.executable.contains('/') => Path::new(wd).join(exe),
        _ => exe.to_path_buf(),
    }
}

impl Procs {
    /// Number of running processes.
    pub fn len(&self) -> usize {
        lock(&self.running).values().map(|r| r.len()).sum()
    }

    /// Whether no process runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The job of the running process `pid` (a process group leader this helper
    /// started), if it is one.
    pub fn job_of_pid(&self, pid: u32) -> Option<String> {
        lock(&self.running)
            .iter()
            .find(|(_, ranks)| ranks.values().any(|&p| p == pid))
            .map(|(job, _)| job.clone())
    }

    /// Starts a process in its own process group; its output and its end are sent
    /// up through `frontal`.
    pub fn launch(
        self: &Arc<Self>,
        spec: &LaunchSpec,
        node: &str,
        socket: &Path,
        frontal: Arc<Upstream>,
    ) -> Response {
        if spec.node != node {
            return Response::error(
                ErrorKind::Forbidden,
                format!("this helper serves node `{node}`, not `{}`", spec.node),
            );
        }
        if lock(&self.killed).iter().any(|j| *j == spec.job) {
            return Response::error(
                ErrorKind::Forbidden,
                format!(
                    "job {} was killed; not starting rank {}",
                    spec.job, spec.rank
                ),
            );
        }
        let program = program_path(spec);
        let mut cmd = tokio::process::Command::new(&program);
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env("QCG_HELPER", socket)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(wd) = &spec.working_directory {
            cmd.current_dir(wd);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Response::error(
                    ErrorKind::Unavailable,
                    format!("cannot start `{}` on node {node}: {e}", program.display()),
                )
            }
        };
        let Some(pid) = child.id() else {
            return Response::error(ErrorKind::Internal, "the process vanished at once");
        };
        lock(&self.running)
            .entry(spec.job.clone())
            .or_default()
            .insert(spec.rank, pid);
        tracing::info!(job = %spec.job, rank = spec.rank, pid, "process started");
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(out) = child.stdout.take() {
            tokio::spawn(read_lines(out, Stream::Stdout, tx.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(read_lines(err, Stream::Stderr, tx.clone()));
        }
        drop(tx);
        let (job, rank, procs) = (spec.job.clone(), spec.rank, self.clone());
        tokio::spawn(async move {
            forward_output(&frontal, &job, rank, rx).await;
            let exit = match child.wait().await {
                Ok(s) => {
                    use std::os::unix::process::ExitStatusExt;
                    ExitReport {
                        code: s.code(),
                        signal: s.signal(),
                        error: None,
                    }
                }
                Err(e) => ExitReport::not_started(format!("could not be waited for: {e}")),
            };
            // The group may hold children the process left behind: they go too.
            kill_group(pid);
            procs.forget(&job, rank);
            tracing::info!(%job, rank, %exit, "process ended");
            let req = Request::ProcessExited { job, rank, exit };
            if let Err(e) = frontal.request(&req).await {
                tracing::warn!(error = %e, "process end not delivered");
            }
        });
        Response::Ok
    }

    fn forget(&self, job: &str, rank: u32) {
        let mut running = lock(&self.running);
        if let Some(r) = running.get_mut(job) {
            r.remove(&rank);
            if r.is_empty() {
                running.remove(job);
            }
        }
    }

    /// Kills every process group of `job` and refuses later launches for it.
    pub fn kill(&self, job: &str) -> usize {
        {
            let mut killed = lock(&self.killed);
            if !killed.iter().any(|j| j == job) {
                killed.push_back(job.to_string());
                if killed.len() > KILLED_MEMORY {
                    killed.pop_front();
                }
            }
        }
        let pids: Vec<u32> = lock(&self.running)
            .get(job)
            .map(|r| r.values().copied().collect())
            .unwrap_or_default();
        for &pid in &pids {
            kill_group(pid);
        }
        tracing::info!(%job, processes = pids.len(), "job killed");
        pids.len()
    }

    /// Kills every process of every job (the helper is stopping).
    pub fn kill_all(&self) {
        let jobs: Vec<String> = lock(&self.running).keys().cloned().collect();
        for j in jobs {
            self.kill(&j);
        }
    }
}

fn kill_group(pid: u32) {
    let Some(pgid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // ESRCH (the group is already gone) is the common, harmless outcome.
    let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
}

async fn read_lines<R: AsyncRead + Unpin>(
    r: R,
    stream: Stream,
    tx: mpsc::UnboundedSender<OutputLine>,
) {
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        if text.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(" [line cut]");
        }
        if tx.send(OutputLine { stream, text }).is_err() {
            return;
        }
    }
}

async fn forward_output(
    frontal: &Upstream,
    job: &str,
    rank: u32,
    mut rx: mpsc::UnboundedReceiver<OutputLine>,
) {
    while let Some(first) = rx.recv().await {
        let mut size = first.text.len();
        let mut lines = vec![first];
        while size < MAX_BATCH {
            match rx.try_recv() {
                Ok(l) => {
                    size += l.text.len();
                    lines.push(l);
                }
                Err(_) => break,
            }
        }
        let req = Request::Output {
            job: job.to_string(),
            rank,
            lines,
        };
        if let Err(e) = frontal.request(&req).await {
            tracing::warn!(%job, rank, error = %e, "output lost");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_against_the_working_directory() {
        let mut spec = LaunchSpec {
            job: "j".into(),
            rank: 0,
            node: "n".into(),
            executable: "bin/app".into(),
            args: vec![],
            env: vec![],
            working_directory: Some("/work".into()),
        };
        assert_eq!(program_path(&spec), Path::new("/work/bin/app"));
        spec.executable = "app".into();
        assert_eq!(program_path(&spec), Path::new("app"));
        spec.executable = "/usr/bin/app".into();
        assert_eq!(program_path(&spec), Path::new("/usr/bin/app"));
    }
}
