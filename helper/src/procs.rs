//! The processes a helper started for jobs: start, stream their output up, report
//! their end, and kill whole process groups.
//!
//! They never outlive the helper unnoticed: a guardian process ([`Guardian`], a
//! small `sh` loop in a process group of its own that ignores SIGINT, SIGTERM and
//! SIGHUP) is told each group as it starts and ends through a pipe; when the helper
//! dies, however it dies (kill -9 included), the pipe closes and the guardian stops
//! every group still listed (SIGTERM, then SIGKILL after [`pgroup::GRACE`]).

use crate::accounts::{self, Accounts};
use crate::pgroup;
use qcg_proto::output::read_lines;
use qcg_proto::quic::Upstream;
use qcg_proto::{ErrorKind, ExitReport, LaunchSpec, OutputLine, Request, Response, Stream};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tracing::Instrument;

/// How long the output of a process that ended is read before its end is reported
/// without the rest (the pipes held open by a process out of its group).
const OUTPUT_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);
/// How many killed jobs are remembered (their late launches are refused).
const KILLED_MEMORY: usize = 4096;

/// Running processes by job and rank (the value is the process group id), and jobs
/// that were killed.
#[derive(Default)]
pub struct Procs {
    running: Mutex<BTreeMap<String, BTreeMap<u32, u32>>>,
    killed: Mutex<VecDeque<String>>,
    guardian: Mutex<Option<Guardian>>,
    accounts: Accounts,
    leases: Mutex<Leases>,
}

/// The pool's uids leased to jobs (see [`accounts::Pool`]).
#[derive(Default)]
struct Leases {
    /// Job → (uid, processes started or starting under it).
    by_job: BTreeMap<String, (u32, usize)>,
    /// Where the next search for a free uid starts: leases go round the range, so a
    /// uid comes back only after every other one was used.
    next: u32,
}

/// The uids (real, effective, saved or filesystem) of the live processes, read from
/// `/proc`.
fn uids_in_use() -> std::collections::BTreeSet<u32> {
    let mut out = std::collections::BTreeSet::new();
    for pid in proc_pids() {
        out.extend(proc_uids(pid));
    }
    out
}

fn proc_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The four uids on the `Uid:` line of `/proc/PID/status`; none for a zombie.
fn proc_uids(pid: u32) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Vec::new();
    };
    if text
        .lines()
        .any(|l| l.starts_with("State:") && (l.contains("Z (") || l.contains("X (")))
    {
        return Vec::new();
    }
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|u| u.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills (SIGKILL) every process running under `uid`, until none is seen; returns
/// how many were killed. What a job left behind outside its process groups (a
/// daemon that called `setsid`) goes this way when its uid is released.
fn kill_uid(uid: u32) -> usize {
    let mut killed = 0;
    for _ in 0..10 {
        let pids: Vec<u32> = proc_pids()
            .into_iter()
            .filter(|&p| proc_uids(p).contains(&uid))
            .collect();
        if pids.is_empty() {
            break;
        }
        for p in pids {
            if let Some(pid) = i32::try_from(p)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                if rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok() {
                    killed += 1;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    killed
}

/// The guardian's program: it keeps the list of live groups (`+PGID`, `-PGID` lines
/// on its stdin) and stops those left when its stdin closes.
const GUARDIAN: &str = r#"trap '' INT TERM HUP
groups=" "
while read -r op g; do
  case "$op" in
    +) groups="$groups$g " ;;
    -) case "$groups" in *" $g "*) groups="${groups%% $g *} ${groups#* $g }" ;; esac ;;
  esac
done
[ "$groups" = " " ] && exit 0
for g in $groups; do kill -TERM "-$g" 2>/dev/null; kill -CONT "-$g" 2>/dev/null; done
sleep 3
for g in $groups; do kill -KILL "-$g" 2>/dev/null; done
exit 0"#;

/// A process that stops the helper's process groups if the helper dies.
pub struct Guardian {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
}

impl Guardian {
    /// Starts a guardian watching `groups` already.
    fn start(groups: &[u32]) -> std::io::Result<Guardian> {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(GUARDIAN)
            .arg("qcg-guardian")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the helper's group: a Ctrl-C meant for the helper spares it.
            .process_group(0)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("the guardian has no stdin"))?;
        let mut g = Guardian { child, stdin };
        for &pg in groups {
            g.send(&format!("+{pg}"))?;
        }
        Ok(g)
    }

    fn send(&mut self, line: &str) -> std::io::Result<()> {
        use std::io::Write;
        writeln!(self.stdin, "{} {}", &line[..1], &line[1..])?;
        self.stdin.flush()
    }

    /// The guardian's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // The helper stops on purpose: its groups were stopped already; the guardian
        // goes without touching anything.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    /// No process yet; jobs will run as `accounts` say.
    pub fn new(accounts: Accounts) -> Procs {
        Procs {
            accounts,
            ..Procs::default()
        }
    }

    /// Tells the guardian that group `pgid` started (`+`) or is gone (`-`); a guardian
    /// that died is replaced, and told every group that runs.
    fn guard(&self, op: char, pgid: u32) {
        let mut slot = lock(&self.guardian);
        let line = format!("{op}{pgid}");
        if let Some(g) = slot.as_mut() {
            if g.send(&line).is_ok() {
                return;
            }
        }
        let groups: Vec<u32> = lock(&self.running)
            .values()
            .flat_map(|r| r.values().copied())
            .collect();
        match Guardian::start(&groups) {
            Ok(mut g) => {
                if op == '+' && !groups.contains(&pgid) {
                    let _ = g.send(&line);
                }
                *slot = Some(g);
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot start the guardian: job processes would outlive a crash of this helper");
                *slot = None;
            }
        }
    }

    /// The guardian's pid, once a process was started.
    pub fn guardian_pid(&self) -> Option<u32> {
        lock(&self.guardian).as_ref().map(|g| g.pid())
    }

    /// Number of running processes.
    pub fn len(&self) -> usize {
        lock(&self.running).values().map(|r| r.len()).sum()
    }

    /// The processes that run, by job and rank.
    pub fn processes(&self) -> Vec<qcg_proto::ProcName> {
        lock(&self.running)
            .iter()
            .flat_map(|(job, ranks)| ranks.keys().map(|&r| qcg_proto::ProcName::new(job, r)))
            .collect()
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
        let refuse = |e: accounts::AccountError| {
            tracing::warn!(job = %spec.job, rank = spec.rank, owner = ?spec.owner, error = %e, "launch refused");
            Response::error(
                ErrorKind::Forbidden,
                format!(
                    "rank {} of job {} not started on node {node}: {e}",
                    spec.rank, spec.job
                ),
            )
        };
        let helper_uid = rustix::process::getuid().as_raw();
        let workdir = match &spec.working_directory {
            Some(wd) => PathBuf::from(wd),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let pooled = self.accounts.pooled(spec.owner.as_deref());
        let acct = if pooled {
            match self.lease(&spec.job, &workdir, helper_uid) {
                Ok(a) => a,
                Err(e) => return refuse(e),
            }
        } else {
            match self.accounts.resolve(spec.owner.as_deref(), helper_uid) {
                Ok(a) => a,
                Err(e) => return refuse(e),
            }
        };
        // From here, a refusal gives the lease back.
        let refuse = |e: accounts::AccountError| {
            if pooled {
                self.release(&spec.job);
            }
            refuse(e)
        };
        if let Err(e) = accounts::check_dir(&acct, &workdir) {
            return refuse(e);
        }
        let path_var = spec
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("PATH").ok());
        let in_dir = if program.is_relative() && program.to_string_lossy().contains('/') {
            workdir.join(&program)
        } else {
            program.clone()
        };
        if let Err(e) = accounts::check_program(&acct, &in_dir, path_var.as_deref()) {
            return refuse(e);
        }
        let mut cmd = tokio::process::Command::new(&program);
        cmd.env("USER", &acct.name)
            .env("LOGNAME", &acct.name)
            .env("HOME", &acct.home);
        if acct.uid != helper_uid {
            // std sets the gid, drops the supplementary groups, then sets the uid,
            // between fork and exec.
            cmd.uid(acct.uid).gid(acct.gid);
        }
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env(qcg_proto::env::HELPER, socket)
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
                if pooled {
                    self.release(&spec.job);
                }
                return Response::error(
                    ErrorKind::Unavailable,
                    format!("cannot start `{}` on node {node}: {e}", program.display()),
                );
            }
        };
        let Some(pid) = child.id() else {
            if pooled {
                self.release(&spec.job);
            }
            return Response::error(ErrorKind::Internal, "the process vanished at once");
        };
        lock(&self.running)
            .entry(spec.job.clone())
            .or_default()
            .insert(spec.rank, pid);
        self.guard('+', pid);
        tracing::info!(job = %spec.job, rank = spec.rank, pid, user = %acct.name, "process started");
        // The process's tasks outlive the frontal's launch request: a root span each.
        let rank_span =
            || tracing::error_span!(parent: None, "rank", job = %spec.job, rank = spec.rank, pid);
        let (tx, rx) = mpsc::unbounded_channel();
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            let read = read_lines(out, Stream::Stdout, None, tx.clone());
            readers.push(tokio::spawn(read.instrument(rank_span())));
        }
        if let Some(err) = child.stderr.take() {
            let read = read_lines(err, Stream::Stderr, None, tx.clone());
            readers.push(tokio::spawn(read.instrument(rank_span())));
        }
        drop(tx);
        let (job, rank, procs) = (spec.job.clone(), spec.rank, self.clone());
        let span = rank_span();
        tokio::spawn(async move {
            let mut forward = {
                let (frontal, job) = (frontal.clone(), job.clone());
                tokio::spawn(
                    async move { forward_output(&frontal, &job, rank, rx).await }.in_current_span(),
                )
            };
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
            pgroup::kill_groups(&[pid]).await;
            // Its output is forwarded to the end, unless a process out of its group
            // (one that called `setsid`) holds the pipes open: the end is reported
            // anyway, after what was written so far.
            if tokio::time::timeout(OUTPUT_DRAIN, &mut forward)
                .await
                .is_err()
            {
                tracing::warn!(%job, rank, "the process ended but a process out of its group still holds its output open: what it writes from now on is not forwarded");
                for r in &readers {
                    r.abort();
                }
                let _ = forward.await;
            }
            procs.forget(&job, rank);
            procs.guard('-', pid);
            if pooled {
                let procs = procs.clone();
                let job = job.clone();
                // Killing what is left under the uid reads /proc: off the runtime.
                let span = tracing::Span::current();
                let _ = tokio::task::spawn_blocking(move || span.in_scope(|| procs.release(&job)))
                    .await;
            }
            tracing::info!(%job, rank, %exit, "process ended");
            let req = Request::ProcessExited { job, rank, exit };
            if let Err(e) = frontal.request(&req).await {
                tracing::warn!(error = %e, "process end not delivered");
            }
        }.instrument(span));
        Response::Ok
    }

    /// The pool's uid for `job`: the one it holds, else a free one (leased to no job
    /// and used by no process). Each call is one holder, given back by
    /// [`Procs::release`].
    fn lease(
        &self,
        job: &str,
        workdir: &Path,
        helper_uid: u32,
    ) -> Result<accounts::Account, accounts::AccountError> {
        let Some(pool) = &self.accounts.pool else {
            return Err(accounts::AccountError::Unmapped(job.to_string()));
        };
        let mut leases = lock(&self.leases);
        let uid = match leases.by_job.get_mut(job) {
            Some((uid, holders)) => {
                *holders += 1;
                *uid
            }
            None => {
                let account = |uid| format!("uid {uid} of the job pool");
                if helper_uid != 0 {
                    return Err(accounts::AccountError::CannotSwitch {
                        helper: helper_uid,
                        account: account(pool.first),
                        uid: pool.first,
                    });
                }
                let leased: std::collections::BTreeSet<u32> =
                    leases.by_job.values().map(|(u, _)| *u).collect();
                let busy = uids_in_use();
                let start = leases.next;
                let found = (0..pool.count)
                    .map(|i| pool.first + (start + i) % pool.count)
                    .find(|u| !leased.contains(u) && !busy.contains(u));
                let Some(uid) = found else {
                    return Err(accounts::AccountError::PoolFull {
                        first: pool.first,
                        end: pool.first + pool.count,
                    });
                };
                leases.next = (uid - pool.first + 1) % pool.count;
                leases.by_job.insert(job.to_string(), (uid, 1));
                tracing::info!(%job, uid, "uid leased from the job pool");
                uid
            }
        };
        Ok(accounts::Account {
            name: format!("qcg-{uid}"),
            uid,
            gid: pool.gid,
            home: workdir.to_path_buf(),
        })
    }

    /// One holder of `job`'s lease is done; the last one kills whatever still runs
    /// under the uid and gives it back to the pool.
    fn release(&self, job: &str) {
        let uid = {
            let mut leases = lock(&self.leases);
            let Some((uid, holders)) = leases.by_job.get_mut(job) else {
                return;
            };
            *holders -= 1;
            if *holders > 0 {
                return;
            }
            *uid
        };
        // Killed before the lease goes, so the uid is never handed on with a process
        // still under it.
        let killed = kill_uid(uid);
        let mut leases = lock(&self.leases);
        if leases.by_job.get(job).is_some_and(|(_, h)| *h == 0) {
            leases.by_job.remove(job);
            tracing::info!(%job, uid, left_behind = killed, "uid back in the job pool");
        }
    }

    /// The uid `job` holds from the pool, if it holds one.
    pub fn leased_uid(&self, job: &str) -> Option<u32> {
        lock(&self.leases).by_job.get(job).map(|(u, _)| *u)
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
        let count = pids.len();
        tracing::info!(%job, processes = count, "stopping the job's processes");
        if count > 0 {
            // SIGTERM now (a program's `trap TERM` gets to run), SIGKILL after the grace.
            let span = tracing::error_span!(parent: None, "stop", %job);
            tokio::spawn(
                async move {
                    let left = pgroup::stop_groups(&pids, pgroup::GRACE).await;
                    if !left.is_empty() {
                        tracing::error!(groups = ?left, "process groups survived SIGKILL");
                    }
                }
                .instrument(span),
            );
        }
        count
    }

    /// Stops every process of every job and waits until they are gone (the helper
    /// is stopping).
    pub async fn kill_all(&self) {
        let groups: Vec<u32> = {
            let mut killed = lock(&self.killed);
            let running = lock(&self.running);
            for job in running.keys() {
                if !killed.iter().any(|j| j == job) {
                    killed.push_back(job.clone());
                }
            }
            while killed.len() > KILLED_MEMORY {
                killed.pop_front();
            }
            running.values().flat_map(|r| r.values().copied()).collect()
        };
        if !groups.is_empty() {
            tracing::info!(groups = groups.len(), "stopping every job process");
            pgroup::stop_groups(&groups, pgroup::GRACE).await;
        }
    }
}

/// Output batches the frontal did not take, summed up for the log.
static OUTPUT_LOST: std::sync::Mutex<qcg_proto::limits::Tally> =
    std::sync::Mutex::new(qcg_proto::limits::Tally::new());

async fn forward_output(
    frontal: &Upstream,
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
        if let Err(e) = frontal.request(&req).await {
            // While the frontal is away every rank's every batch fails: one line per
            // interval for all of them.
            let due = OUTPUT_LOST.lock().unwrap_or_else(|p| p.into_inner()).note(
                format_args!("job {job} rank {rank}: {e}"),
                std::time::Instant::now(),
            );
            if let Some((n, last)) = due {
                tracing::warn!(batches = n, last = %last, "output lost: {n} batches since the last report; last: {last}");
            }
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
            owner: None,
        };
        assert_eq!(program_path(&spec), Path::new("/work/bin/app"));
        spec.executable = "app".into();
        assert_eq!(program_path(&spec), Path::new("app"));
        spec.executable = "/usr/bin/app".into();
        assert_eq!(program_path(&spec), Path::new("/usr/bin/app"));
    }
}
