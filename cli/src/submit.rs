//! `qcg submit`, `qcg jobs`, `qcg status`, `qcg output` and `qcg cancel`: a
//! JobProfile to the broker's HTTPS job API, the ranks' output followed as it comes
//! (or later), and the job's outcome as the exit status. Without a broker, `qcg
//! submit` starts an embedded grid shaped for the profile ([`qcg_grid::shape_for`])
//! and submits to it the same way.

use qcg_grid::client::{encode_query, Client};
use qcg_grid::Grid;
use qcg_jobprofile::profile::JobProfile;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Exit status of a job that succeeded.
pub const EXIT_OK: i32 = 0;
/// Exit status of a job that failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit status when the profile is invalid or the job was refused.
pub const EXIT_REFUSED: i32 = 2;
/// Exit status of a cancelled job.
pub const EXIT_CANCELLED: i32 = 3;

/// A failure with the exit status it calls for.
#[derive(Debug)]
pub struct Failure {
    /// Exit status.
    pub code: i32,
    /// What to tell the user.
    pub message: String,
}

impl Failure {
    fn new(code: i32, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// Reads and validates a JobProfile file. The error names the file, line and column.
pub fn check(path: &Path) -> Result<(String, JobProfile), Failure> {
    use std::io::Read;
    let cannot = |e: std::io::Error| {
        Failure::new(
            EXIT_REFUSED,
            format!("{}: cannot read: {e}", path.display()),
        )
    };
    // Read one byte past the limit at most: a huge file is refused by the parser's
    // size check without being read whole.
    let max = qcg_jobprofile::profile::limits::MAX_DOCUMENT_BYTES;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(cannot)?
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() > max {
        return Err(Failure::new(
            EXIT_REFUSED,
            format!(
                "{}: line 1, column 1: too large: the document is over {max} bytes",
                path.display()
            ),
        ));
    }
    let xml = String::from_utf8(bytes).map_err(|e| {
        cannot(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8: {e}"),
        ))
    })?;
    let profile = JobProfile::parse(&xml)
        .map_err(|e| Failure::new(EXIT_REFUSED, format!("{}: {e}", path.display())))?;
    if profile.task.execution.is_none() {
        return Err(Failure::new(
            EXIT_REFUSED,
            format!(
                "{}: the task has no <execution> with an <executable>: nothing to run",
                path.display()
            ),
        ));
    }
    Ok((xml, profile))
}

/// Submits `xml`; returns the job id and the broker's view of the job.
pub async fn submit(
    client: &Client,
    xml: &str,
    workdir: Option<&str>,
) -> Result<(String, serde_json::Value), Failure> {
    let path = match workdir {
        Some(w) => format!("/v1/jobs?workdir={}", encode_query(w)),
        None => "/v1/jobs".to_string(),
    };
    let a = client
        .request("POST", &path, xml.as_bytes().to_vec())
        .await
        .map_err(|e| Failure::new(EXIT_FAILED, e.to_string()))?;
    match a.status {
        201 => {
            let v = a.json();
            let id = v["id"].as_str().unwrap_or_default().to_string();
            Ok((id, v))
        }
        400 | 422 => Err(Failure::new(EXIT_REFUSED, a.error_message())),
        s => Err(Failure::new(
            EXIT_FAILED,
            format!("the broker answered {s}: {}", a.error_message()),
        )),
    }
}

fn placement(job: &serde_json::Value) -> String {
    let mut by: Vec<(String, String, usize)> = Vec::new();
    for r in job["ranks"].as_array().into_iter().flatten() {
        let g = r["group"].as_str().unwrap_or("?").to_string();
        let c = r["cluster"].as_str().unwrap_or("?").to_string();
        match by.iter_mut().find(|(bg, bc, _)| *bg == g && *bc == c) {
            Some(e) => e.2 += 1,
            None => by.push((g, c, 1)),
        }
    }
    by.iter()
        .map(|(g, c, n)| format!("{g}: {n} on {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resolves on the first SIGINT or SIGTERM (never if the handlers cannot be set).
/// The handlers are installed at once, so a signal sent before the first poll is kept.
fn interrupted() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let int = signal(SignalKind::interrupt());
    let term = signal(SignalKind::terminate());
    async move {
        match (int, term) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => std::future::pending().await,
        }
    }
}

/// Prints the job's output as it comes (`[rank] line`, stdout and stderr kept
/// apart, or into `sinks`' files) until it is finished; returns the exit status for
/// its outcome. With `cancel`, Ctrl-C (SIGINT) or SIGTERM cancels the job (its
/// processes are stopped) and following goes on to the end; without, the default
/// action of those signals ends the follower alone (`qcg output --follow`).
pub async fn follow(
    client: &Client,
    id: &str,
    sinks: &mut Sinks,
    cancel: bool,
) -> Result<i32, Failure> {
    let mut from = 0u64;
    let mut cancelled = !cancel;
    let handlers = cancel.then(interrupted);
    let ctrl_c = async {
        match handlers {
            Some(h) => h.await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(ctrl_c);
    let mut errors = 0;
    loop {
        let path = format!("/v1/jobs/{}/output?from={from}&wait=10", encode_query(id));
        let a = tokio::select! {
            a = client.request("GET", &path, Vec::new()) => a,
            _ = &mut ctrl_c, if !cancelled => {
                cancelled = true;
                eprintln!("qcg: cancelling job {id}");
                if let Err(e) = client.request("DELETE", &format!("/v1/jobs/{}", encode_query(id)), Vec::new()).await {
                    eprintln!("qcg: could not cancel job {id}: {e}");
                }
                continue;
            }
        };
        let a = match a {
            Ok(a) if a.status == 200 => {
                errors = 0;
                a
            }
            Ok(a) => {
                return Err(Failure::new(
                    EXIT_FAILED,
                    format!(
                        "following job {id}: the broker answered {}: {}",
                        a.status,
                        a.error_message()
                    ),
                ))
            }
            Err(e) => {
                errors += 1;
                if errors >= 5 {
                    return Err(Failure::new(
                        EXIT_FAILED,
                        format!("following job {id}: {e}"),
                    ));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let page = a.json();
        if let Some(n) = page["skipped"].as_u64().filter(|&n| n > 0) {
            eprintln!(
                "qcg: {n} lines of job {id}'s output were dropped before they could be shown (the broker keeps the newest lines up to its per-job cap; {} lines, {} bytes dropped so far)",
                page["dropped_lines"], page["dropped_bytes"]
            );
        }
        {
            let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
            for l in page["lines"].as_array().into_iter().flatten() {
                let rank = l["rank"].as_u64().unwrap_or(0);
                let text = l["text"].as_str().unwrap_or("");
                let (file, term): (_, &mut dyn Write) = if l["stream"] == "stderr" {
                    (sinks.stderr.as_mut(), &mut err)
                } else {
                    (sinks.stdout.as_mut(), &mut out)
                };
                let _ = match file {
                    Some(f) => writeln!(f, "{text}"),
                    None => writeln!(term, "[{rank}] {text}"),
                };
            }
            let _ = out.flush();
            sinks.flush();
        }
        from = page["next"].as_u64().unwrap_or(from);
        if page["finished"].as_bool() == Some(true) {
            let status = &page["status"];
            return Ok(match status["state"].as_str() {
                Some("succeeded") => EXIT_OK,
                Some("cancelled") => {
                    eprintln!("qcg: job {id} was cancelled; its processes were stopped");
                    EXIT_CANCELLED
                }
                _ => {
                    eprintln!(
                        "qcg: job {id} failed: rank {} {}; the other processes were stopped",
                        status["rank"],
                        status["reason"].as_str().unwrap_or("failed")
                    );
                    EXIT_FAILED
                }
            });
        }
    }
}

/// Submits and follows a job; returns the exit status.
pub async fn submit_and_follow(
    client: &Client,
    xml: &str,
    workdir: Option<&str>,
    sinks: &mut Sinks,
) -> Result<i32, Failure> {
    let (id, job) = submit(client, xml, workdir).await?;
    let state = job["status"]["state"].as_str().unwrap_or("?");
    if state == "queued" {
        eprintln!("qcg: job {id} submitted; waiting for free slots");
    } else {
        eprintln!("qcg: job {id} submitted ({})", placement(&job));
    }
    follow(client, &id, sinks, true).await
}

/// `qcg submit` without a broker: an embedded grid shaped for the profile.
pub async fn run_embedded(
    profile: &JobProfile,
    xml: &str,
    workdir: Option<&str>,
    sinks: &mut Sinks,
) -> Result<i32, Failure> {
    let grid = Grid::builder()
        .shaped(&qcg_grid::shape_for(profile))
        .start()
        .await
        .map_err(|e| Failure::new(EXIT_FAILED, format!("cannot start the local grid: {e}")))?;
    let result = async {
        grid.wait_for_topology(Duration::from_secs(20))
            .await
            .map_err(|e| Failure::new(EXIT_FAILED, e.to_string()))?;
        let client = Client::new(&grid.https_url(), &grid.client)
            .map_err(|e| Failure::new(EXIT_FAILED, e.to_string()))?;
        submit_and_follow(&client, xml, workdir, sinks).await
    }
    .await;
    grid.shutdown().await;
    result
}

/// Prints a job's state; `Ok(false)` when the job is unknown.
pub async fn status(client: &Client, id: &str) -> Result<bool, Failure> {
    on_job(client, "GET", id).await
}

/// Cancels a job; `Ok(false)` when the job is unknown.
pub async fn cancel(client: &Client, id: &str) -> Result<bool, Failure> {
    on_job(client, "DELETE", id).await
}

/// `method /v1/jobs/ID`, and prints the job the broker answers with; `Ok(false)`
/// when the job is unknown.
async fn on_job(client: &Client, method: &str, id: &str) -> Result<bool, Failure> {
    let a = client
        .request(
            method,
            &format!("/v1/jobs/{}", encode_query(id)),
            Vec::new(),
        )
        .await
        .map_err(|e| Failure::new(EXIT_FAILED, e.to_string()))?;
    match a.status {
        200 => {
            print_job(&a.json());
            Ok(true)
        }
        404 => Ok(false),
        s => Err(Failure::new(
            EXIT_FAILED,
            format!("the broker answered {s}: {}", a.error_message()),
        )),
    }
}

/// Where a followed job's output goes: the files the profile's `<stdout>` and
/// `<stderr>` name, else the terminal (`[RANK] ` before each line).
#[derive(Default)]
pub struct Sinks {
    /// The `<stdout>` file.
    pub stdout: Option<std::io::BufWriter<std::fs::File>>,
    /// The `<stderr>` file.
    pub stderr: Option<std::io::BufWriter<std::fs::File>>,
}

impl Sinks {
    /// The files of `profile`'s `<stdout>` and `<stderr>`, created (truncated), a
    /// relative path taken from its `<workingDirectory>` or else from `cwd`. Every
    /// rank's lines go to them, as printed; the same file may be named for both.
    pub fn for_profile(profile: &JobProfile, cwd: &Path) -> Result<Sinks, Failure> {
        let Some(ex) = &profile.task.execution else {
            return Ok(Sinks::default());
        };
        let base = match &ex.working_directory {
            Some(w) => cwd.join(w),
            None => cwd.to_path_buf(),
        };
        let open = |name: &Option<String>, tag: &str| -> Result<_, Failure> {
            let Some(name) = name else { return Ok(None) };
            let path = base.join(name);
            std::fs::File::create(&path)
                .map(|f| Some(std::io::BufWriter::new(f)))
                .map_err(|e| {
                    Failure::new(
                        EXIT_REFUSED,
                        format!(
                            "<{tag}>{name}</{tag}>: cannot create {}: {e}",
                            path.display()
                        ),
                    )
                })
        };
        let stdout = open(&ex.stdout, "stdout")?;
        let stderr = if ex.stderr.is_some() && ex.stderr == ex.stdout {
            // One file for both: a second handle would write over the first.
            stdout
                .as_ref()
                .and_then(|w| w.get_ref().try_clone().ok())
                .map(std::io::BufWriter::new)
        } else {
            open(&ex.stderr, "stderr")?
        };
        Ok(Sinks { stdout, stderr })
    }

    fn flush(&mut self) {
        for w in [&mut self.stdout, &mut self.stderr].into_iter().flatten() {
            let _ = w.flush();
        }
    }
}

/// Jobs asked for per request by `qcg jobs` by default.
pub const JOBS_PAGE: usize = 1000;

/// Prints the caller's jobs (every job for an admin) as squeue does: one line each.
/// They come `page` at a time (`GET /v1/jobs?limit=PAGE&after=LAST`), so that a
/// user with thousands of jobs gets them all without one huge read.
pub async fn jobs(client: &Client, page: usize) -> Result<(), Failure> {
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut path = format!("/v1/jobs?limit={page}");
        if let Some(a) = &after {
            path.push_str(&format!("&after={}", encode_query(a)));
        }
        let a = client
            .request("GET", &path, Vec::new())
            .await
            .map_err(|e| Failure::new(EXIT_FAILED, e.to_string()))?;
        if a.status != 200 {
            return Err(Failure::new(
                EXIT_FAILED,
                format!("the broker answered {}: {}", a.status, a.error_message()),
            ));
        }
        let list = match a.json() {
            serde_json::Value::Array(l) => l,
            other => {
                return Err(Failure::new(
                    EXIT_FAILED,
                    format!("the broker's job list is not a list: {other}"),
                ))
            }
        };
        let n = list.len();
        let last = list
            .last()
            .and_then(|j| j["id"].as_str())
            .map(str::to_string);
        all.extend(list);
        // A short page is the last; a page longer than asked comes from a broker
        // that does not page (it sent every job at once).
        if n != page {
            break;
        }
        match last {
            Some(l) if after.as_ref() != Some(&l) => after = Some(l),
            _ => break,
        }
    }
    print!("{}", jobs_table(&serde_json::Value::Array(all)));
    Ok(())
}

/// squeue's short state codes.
fn state_code(state: &str) -> &'static str {
    match state {
        "queued" => "PD",
        "running" => "R",
        "succeeded" => "CD",
        "failed" => "F",
        "cancelled" => "CA",
        _ => "?",
    }
}

/// A duration as squeue's TIME shows it: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn squeue_time(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h) {
        (0, 0) => format!("{m}:{s:02}"),
        (0, h) => format!("{h}:{m:02}:{s:02}"),
        (d, h) => format!("{d}-{h:02}:{m:02}:{s:02}"),
    }
}

/// The `qcg jobs` table of a `GET /v1/jobs` answer.
pub fn jobs_table(list: &serde_json::Value) -> String {
    let mut out = format!(
        "{:<14} {:<16} {:<10} {:>2} {:>10} {:>5}  {}\n",
        "JOBID", "NAME", "USER", "ST", "TIME", "RANKS", "NODELIST(REASON)"
    );
    for j in list.as_array().into_iter().flatten() {
        let s = &j["status"];
        let state = s["state"].as_str().unwrap_or("?");
        let mut nodes: Vec<String> = Vec::new();
        for r in j["ranks"].as_array().into_iter().flatten() {
            let n = format!(
                "{}/{}",
                r["cluster"].as_str().unwrap_or("?"),
                r["node"].as_str().unwrap_or("?")
            );
            if !nodes.contains(&n) {
                nodes.push(n);
            }
        }
        let where_ = match state {
            "queued" => "(waiting for slots)".to_string(),
            "failed" => format!(
                "{} (rank {} {})",
                nodes.join(","),
                s["rank"],
                s["reason"].as_str().unwrap_or("failed")
            ),
            _ => nodes.join(","),
        };
        // squeue shows 0:00 for a pending job; a job read back from the broker's
        // database has no start to count from.
        let time = match (j["elapsed_secs"].as_u64(), state) {
            (Some(t), _) => squeue_time(t),
            (None, "queued") => squeue_time(0),
            (None, _) => "-".to_string(),
        };
        out.push_str(&format!(
            "{:<14} {:<16} {:<10} {:>2} {:>10} {:>5}  {}\n",
            j["id"].as_str().unwrap_or("?"),
            j["app_id"].as_str().unwrap_or("?"),
            j["owner"].as_str().unwrap_or("?"),
            state_code(state),
            time,
            j["ranks"].as_array().map_or(0, |r| r.len()),
            where_
        ));
    }
    out
}

/// Prints the output a job has printed so far (what the broker still holds), each
/// line `[RANK] ...`; `Ok(false)` when the job is unknown.
pub async fn output(client: &Client, id: &str) -> Result<bool, Failure> {
    let mut from = 0u64;
    loop {
        let path = format!("/v1/jobs/{}/output?from={from}", encode_query(id));
        let a = client
            .request("GET", &path, Vec::new())
            .await
            .map_err(|e| Failure::new(EXIT_FAILED, e.to_string()))?;
        match a.status {
            200 => {}
            404 => return Ok(false),
            s => {
                return Err(Failure::new(
                    EXIT_FAILED,
                    format!("the broker answered {s}: {}", a.error_message()),
                ))
            }
        }
        let page = a.json();
        let lines = page["lines"].as_array().cloned().unwrap_or_default();
        if let Some(n) = page["skipped"].as_u64().filter(|&n| n > 0) {
            eprintln!("qcg: {n} earlier lines of job {id} are no longer kept by the broker");
        }
        {
            let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
            for l in &lines {
                let rank = l["rank"].as_u64().unwrap_or(0);
                let text = l["text"].as_str().unwrap_or("");
                let _ = if l["stream"] == "stderr" {
                    writeln!(err, "[{rank}] {text}")
                } else {
                    writeln!(out, "[{rank}] {text}")
                };
            }
        }
        let next = page["next"].as_u64().unwrap_or(from);
        if lines.is_empty() || next <= from {
            return Ok(true);
        }
        from = next;
    }
}

fn print_job(j: &serde_json::Value) {
    let s = &j["status"];
    let mut state = s["state"].as_str().unwrap_or("?").to_string();
    if state == "failed" {
        state = format!(
            "failed (rank {} {})",
            s["rank"],
            s["reason"].as_str().unwrap_or("")
        );
    }
    let terminal = !(s["state"] == "running" || s["state"] == "queued");
    let finished = if terminal && j["finished"].as_bool() != Some(true) {
        ", processes stopping"
    } else {
        ""
    };
    println!(
        "{} ({}): {state}{finished}",
        j["id"].as_str().unwrap_or("?"),
        j["app_id"].as_str().unwrap_or("?")
    );
    for r in j["ranks"].as_array().into_iter().flatten() {
        let mut st = r["state"].as_str().unwrap_or("?").to_string();
        if let Some(e) = r.get("exit") {
            if let Some(c) = e["code"].as_i64() {
                st = format!("exited {c}");
            } else if let Some(sig) = e["signal"].as_i64() {
                st = format!("killed by signal {sig}");
            } else if let Some(err) = e["error"].as_str() {
                st = format!("not started: {err}");
            }
        }
        println!(
            "  rank {:>3}  {:<16} {}/{}  {st}",
            r["rank"],
            r["group"].as_str().unwrap_or("?"),
            r["cluster"].as_str().unwrap_or("?"),
            r["node"].as_str().unwrap_or("?")
        );
    }
}

/// `qcg backup OUT`: the broker's database, copied by the broker from one read
/// transaction (`GET /v1/admin/backup`, an admin certificate), written to `out`
/// (mode 0600: it holds every job's secret). Returns the bytes written.
///
/// The copy is written beside `out` (`.NAME.partial`, made before the broker is
/// asked, so that a destination that cannot be written fails at once) and renamed
/// into place once complete: a failure, whatever it is, leaves nothing at `out`
/// and no partial file.
pub async fn backup(client: &Client, out: &Path) -> Result<u64, Failure> {
    let cannot = |e: std::io::Error| {
        let folder = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("the folder {} does not exist", folder.display())
            }
            std::io::ErrorKind::PermissionDenied => {
                format!(
                    "the folder {} is not writable by this user ({e})",
                    folder.display()
                )
            }
            _ => e.to_string(),
        };
        Failure::new(
            EXIT_FAILED,
            format!("cannot write the backup to {}: {why}", out.display()),
        )
    };
    if out.is_dir() {
        return Err(Failure::new(
            EXIT_FAILED,
            format!(
                "cannot write the backup to {}: it is a folder; name the file to write",
                out.display()
            ),
        ));
    }
    let Some(name) = out.file_name() else {
        return Err(Failure::new(
            EXIT_FAILED,
            format!(
                "cannot write the backup to {}: name the file to write",
                out.display()
            ),
        ));
    };
    let tmp = out.with_file_name(format!(".{}.partial", name.to_string_lossy()));
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(cannot)?;
    let result = async {
        let a = client
            .request("GET", "/v1/admin/backup", Vec::new())
            .await
            .map_err(|e| Failure::new(EXIT_FAILED, e.to_string()))?;
        if a.status != 200 {
            let hint = match a.status {
                403 => " (a backup needs an admin certificate: `qcg ca issue --role admin`)",
                409 => " (this broker keeps no database: its config has no `database`)",
                _ => "",
            };
            return Err(Failure::new(
                EXIT_FAILED,
                format!(
                    "the broker answered {}: {}{hint}",
                    a.status,
                    a.error_message()
                ),
            ));
        }
        f.write_all(&a.body).map_err(cannot)?;
        f.sync_all().map_err(cannot)?;
        std::fs::rename(&tmp, out).map_err(cannot)?;
        Ok(a.body.len() as u64)
    }
    .await;
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_squeue_prints_them() {
        assert_eq!(squeue_time(0), "0:00");
        assert_eq!(squeue_time(59), "0:59");
        assert_eq!(squeue_time(61), "1:01");
        assert_eq!(squeue_time(3600), "1:00:00");
        assert_eq!(squeue_time(86_399), "23:59:59");
        assert_eq!(squeue_time(86_400 + 3 * 3600 + 62), "1-03:01:02");
    }

    #[test]
    fn the_jobs_table_has_a_time_column() {
        let list = serde_json::json!([
            {"id": "job-1", "app_id": "a", "owner": "alice", "status": {"state": "running"},
             "elapsed_secs": 125, "ranks": [{"cluster": "c", "node": "n"}]},
            {"id": "job-2", "app_id": "b", "owner": "alice", "status": {"state": "queued"},
             "ranks": []},
        ]);
        let t = jobs_table(&list);
        let lines: Vec<&str> = t.lines().collect();
        let col = lines[0].find("TIME").unwrap();
        assert!(lines[0].contains(" ST       TIME RANKS "), "{t}");
        // Right-aligned under its heading, as squeue.
        assert_eq!(&lines[1][col - 6..col + 4], "      2:05", "{t}");
        assert_eq!(&lines[2][col - 6..col + 4], "      0:00", "{t}");
    }
}
