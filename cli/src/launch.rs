//! Starting a job's processes and collecting what they print.

use qcg_proto::{Request, Response};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

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

/// How a job ended.
#[derive(Debug)]
pub struct Outcome {
    /// Each rank's exit status (`None` when it could not be started).
    pub statuses: Vec<Option<ExitStatus>>,
    /// The first rank that failed, with a description.
    pub failure: Option<(u32, String)>,
}

impl Outcome {
    /// The exit code `qcg run` should return.
    pub fn code(&self) -> i32 {
        if self.failure.is_some() {
            1
        } else {
            0
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
    let n = job.sockets.len();
    let topology = topology(&job.sockets).await?;
    let mut children: Vec<tokio::process::Child> = Vec::with_capacity(n);
    let mut printers = Vec::new();
    for (rank, socket) in job.sockets.iter().enumerate() {
        let mut cmd = Command::new(&job.program);
        cmd.args(&job.args)
            .env("QCG_JOB", &job.id)
            .env("QCG_RANK", rank.to_string())
            .env("QCG_SIZE", n.to_string())
            .env("QCG_HELPER", socket)
            .env("QCG_JOB_SECRET", hex::encode(job.secret))
            // Without a JobProfile every rank is in one group, `all`.
            .env(
                qcg_proto::groups::ENV_GROUPS,
                qcg_proto::groups::encode(&[("all".to_string(), n as u32)]),
            )
            .env("QCG_TOPOLOGY", &topology)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                for c in children.iter_mut() {
                    let _ = c.start_kill();
                }
                anyhow::bail!(
                    "cannot start {} for rank {rank}: {e}",
                    job.program.display()
                );
            }
        };
        if let Some(out) = child.stdout.take() {
            printers.push(tokio::spawn(async move {
                let mut lines = BufReader::new(out).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    println!("[{rank}] {l}");
                }
            }));
        }
        if let Some(err) = child.stderr.take() {
            printers.push(tokio::spawn(async move {
                let mut lines = BufReader::new(err).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    eprintln!("[{rank}] {l}");
                }
            }));
        }
        children.push(child);
    }

    let mut statuses: Vec<Option<ExitStatus>> = vec![None; n];
    let mut failure: Option<(u32, String)> = None;
    let mut waits: tokio::task::JoinSet<(usize, std::io::Result<ExitStatus>)> = Default::default();
    let mut killers = Vec::new();
    for (rank, mut child) in children.into_iter().enumerate() {
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        killers.push(tx);
        waits.spawn(async move {
            tokio::select! {
                s = child.wait() => (rank, s),
                _ = &mut rx => {
                    let _ = child.start_kill();
                    (rank, child.wait().await)
                }
            }
        });
    }
    let mut killers: Vec<Option<_>> = killers.into_iter().map(Some).collect();
    while let Some(done) = waits.join_next().await {
        let Ok((rank, status)) = done else { continue };
        match status {
            Ok(s) => {
                statuses[rank] = Some(s);
                if !s.success() && failure.is_none() {
                    failure = Some((rank as u32, describe(&s)));
                    for k in killers.iter_mut() {
                        if let Some(k) = k.take() {
                            let _ = k.send(());
                        }
                    }
                }
            }
            Err(e) => {
                if failure.is_none() {
                    failure = Some((rank as u32, format!("could not be waited for: {e}")));
                }
            }
        }
        killers[rank] = None;
    }
    for p in printers {
        let _ = p.await;
    }
    Ok(Outcome { statuses, failure })
}

/// Asks a helper which cluster and node it serves.
pub async fn node_info(socket: &Path) -> anyhow::Result<(String, String)> {
    let mut s = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| anyhow::anyhow!("helper at {}: {e}", socket.display()))?;
    qcg_proto::frame::write_frame(&mut s, &Request::NodeInfo).await?;
    match qcg_proto::frame::read_frame::<Response, _>(&mut s).await? {
        Some(Response::Node { cluster, node, .. }) => Ok((cluster.name, node)),
        Some(Response::Error(e)) => anyhow::bail!("helper at {}: {e}", socket.display()),
        other => anyhow::bail!(
            "helper at {}: unexpected answer {other:?}",
            socket.display()
        ),
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
