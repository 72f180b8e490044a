//! The broker's job API, served over HTTPS to holders of a `client` or `admin`
//! certificate from the grid CA (the listener requires a client certificate; one of
//! another role gets 403 on every path).
//!
//! A job belongs to the identity of the certificate that submitted it (its subject
//! name, [`crate::caller`]). Only that identity or an `admin` sees it: anyone else gets
//! 404 for it, as for a job that does not exist, and does not find it in the list.
//!
//! | method and path | what |
//! |---|---|
//! | `POST /v1/jobs?workdir=DIR` | body: a JobProfile (XML). 201 with the job; 400 with the parse error (line and column); 422 when the job can never run here (the scheduler's reason; nothing is reserved); 429 when the client has `max_queued_jobs_per_client` jobs waiting, 413 when its stored profiles would pass `max_profile_bytes_per_client` (the message names the limit) |
//! | `GET /v1/jobs?limit=N&after=ID` | the caller's jobs (every job for an admin); with `limit` (a whole number from 1 to 10,000), at most N of them in id order from the first id past ID (the last id of the page before; any text of at most 256 bytes: the page starts past it in byte order): only those are read and built. 400, naming the parameter, for a `limit` out of range or not a number, an `after` too long or without `limit`, a parameter given twice or one of another name |
//! | `GET /v1/jobs/ID` | one job: state, ranks and where they run |
//! | `DELETE /v1/jobs/ID` | cancel: every process of the job is killed |
//! | `GET /v1/jobs/ID/output?from=N&wait=SECS` | output lines from the N-th on; waits up to SECS (at most 30) for one when there is none yet |
//! | `GET /v1/processes` | registered processes with their addresses: the caller's jobs' (every one for an admin) |
//! | `GET /v1/admin/backup` | admin only: a consistent copy of the broker's database taken while it runs (a redb file; start a broker on it to restore, [`crate::store`]); 403 for a client, 409 for a broker without a database |
//!
//! The aggregate views of the plain HTTP API ([`crate::http`]) are served here too,
//! and the dashboard page at `/` and `/dashboard` ([`crate::dashboard`]).

use crate::caller::Caller;
use crate::core::{Answer, Input};
use crate::grid::Ctx;
use crate::jobs::{Job, JobError, JobLine, JobState, RankState};
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use qcg_jobprofile::profile::JobProfile;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Longest wait of a long poll.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// A rank as the API shows it.
#[derive(Debug, Serialize)]
pub struct RankView {
    /// The rank.
    pub rank: u32,
    /// Its group.
    pub group: String,
    /// Its cluster.
    pub cluster: String,
    /// Its node.
    pub node: String,
    /// Its state.
    #[serde(flatten)]
    pub state: RankState,
}

/// A job as the API shows it.
#[derive(Debug, Serialize)]
pub struct JobView {
    /// Id.
    pub id: String,
    /// The profile's `appId`.
    pub app_id: String,
    /// The identity that submitted it.
    pub owner: String,
    /// State.
    pub status: JobState,
    /// Whether nothing of it runs any more (its slots are free).
    pub finished: bool,
    /// Lines of output printed so far (kept or not).
    pub lines: u64,
    /// Of those, lines the broker no longer holds: the oldest, dropped to stay
    /// under the per-job cap, or all of them a while after the job ended.
    pub dropped_lines: u64,
    /// Their bytes.
    pub dropped_bytes: u64,
    /// Seconds it has run: from its start to its outcome, or to now while it
    /// runs (`qcg jobs`' TIME). `None` while queued, and for a job read back from
    /// the database, whose start is not kept.
    pub elapsed_secs: Option<u64>,
    /// Its ranks, once placed.
    pub ranks: Vec<RankView>,
}

impl JobView {
    /// The view of a job now.
    pub fn of(j: &Job) -> JobView {
        JobView::of_at(j, std::time::Instant::now())
    }

    /// The view of a job at `now` (a running job's time is counted to it).
    pub fn of_at(j: &Job, now: std::time::Instant) -> JobView {
        let ranks = j
            .mapping
            .as_ref()
            .map(|m| {
                m.ranks
                    .iter()
                    .zip(&j.ranks)
                    .map(|(p, s)| RankView {
                        rank: p.rank as u32,
                        group: p.group.clone(),
                        cluster: p.cluster.clone(),
                        node: p.node.clone(),
                        state: s.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        JobView {
            id: j.id.clone(),
            app_id: j.submission.profile.app_id.clone(),
            owner: j.submission.owner.clone(),
            status: j.state.clone(),
            finished: j.finished(),
            lines: j.lines_printed(),
            dropped_lines: j.dropped_lines,
            dropped_bytes: j.dropped_bytes,
            elapsed_secs: j.started_at.map(|t| {
                j.decided_at
                    .unwrap_or(now)
                    .saturating_duration_since(t)
                    .as_secs()
            }),
            ranks,
        }
    }
}

/// Most bytes of output text in one page.
pub const PAGE_BYTES: usize = 4 << 20;

/// A page of output.
#[derive(Debug, Serialize)]
pub struct OutputPage {
    /// Lines from `from` on (from the oldest kept, if `from` was dropped).
    pub lines: Vec<JobLine>,
    /// Where the next page starts.
    pub next: u64,
    /// Lines from `from` on that were dropped before this reader got them (the
    /// broker keeps the newest lines up to a per-job cap of bytes).
    pub skipped: u64,
    /// Every line of the job dropped so far, and their bytes.
    pub dropped_lines: u64,
    /// The bytes of `dropped_lines`.
    pub dropped_bytes: u64,
    /// Whether the job is finished (no more lines will come).
    pub finished: bool,
    /// The job's state.
    pub status: JobState,
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let message = message.into();
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

fn job_error(e: JobError) -> Response {
    match e {
        JobError::Unknown(_) => error(StatusCode::NOT_FOUND, e.to_string()),
        JobError::Infeasible(_) | JobError::Incomplete(_) => {
            error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
        JobError::Forbidden(_) => error(StatusCode::FORBIDDEN, e.to_string()),
        JobError::TooMany(_) => error(StatusCode::TOO_MANY_REQUESTS, e.to_string()),
        JobError::TooLarge(_) => error(StatusCode::PAYLOAD_TOO_LARGE, e.to_string()),
    }
}

/// Largest submission body read: a JobProfile at its size limit, and room to say
/// by how much a larger one is over (the XML reader refuses past
/// [`qcg_jobprofile::profile::limits::MAX_DOCUMENT_BYTES`], naming it).
const BODY_LIMIT: usize = qcg_jobprofile::profile::limits::MAX_DOCUMENT_BYTES + 4096;

/// The job API and the read-only views, for `caller`.
pub fn app(ctx: Ctx, caller: Caller) -> Router {
    Router::new()
        .route(
            "/v1/jobs",
            get(list)
                .post(submit)
                .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT)),
        )
        .route("/v1/jobs/{id}", get(status).delete(cancel))
        .route("/v1/jobs/{id}/output", get(output))
        .route("/v1/processes", get(processes))
        .route("/v1/admin/backup", get(backup))
        .with_state(ctx.clone())
        .merge(crate::http::app(ctx.clone()))
        .merge(crate::dashboard::app(ctx))
        .layer(Extension(caller))
}

/// A consistent copy of the database, written next to it (the folder is the
/// broker's own, 0700), read back and removed.
async fn backup(State(ctx): State<Ctx>, Extension(caller): Extension<Caller>) -> Response {
    if !caller.admin {
        return error(
            StatusCode::FORBIDDEN,
            "a backup of the broker's database needs an `admin` certificate",
        );
    }
    let store = ctx.store.clone();
    let copy = tokio::task::spawn_blocking(move || {
        let store = store.lock().unwrap_or_else(|p| p.into_inner());
        let store = store.as_ref()?;
        let tmp = store
            .path()
            .with_extension(format!("backup-{}", &crate::new_secret_hex()[..16]));
        let made = store.backup(&tmp).map_err(|e| e.to_string());
        let bytes = made.and_then(|n| {
            let b = std::fs::read(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
            tracing::info!(
                jobs = n.jobs,
                profiles = n.profiles,
                bytes = n.bytes,
                "database backed up"
            );
            Ok(b)
        });
        let _ = std::fs::remove_file(&tmp);
        Some(bytes)
    })
    .await;
    match copy {
        Ok(Some(Ok(bytes))) => (
            [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
            bytes,
        )
            .into_response(),
        Ok(Some(Err(e))) => {
            tracing::error!(error = %e, "database backup failed");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("backup failed: {e}"),
            )
        }
        Ok(None) => error(
            StatusCode::CONFLICT,
            "this broker keeps its jobs in memory only: it has no database to back up",
        ),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("backup failed: {e}"),
        ),
    }
}

/// What a TLS peer that is no caller gets: 403 on every path, saying why.
pub fn forbidden(why: String) -> Router {
    Router::new().fallback(move || {
        let why = why.clone();
        async move { error(StatusCode::FORBIDDEN, why) }
    })
}

/// An answer of the core that is not the one the request wanted (a bug).
fn unexpected(what: &str, answer: Answer) -> Response {
    tracing::error!(?answer, "the core answered a {what} with something else");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the broker could not answer the {what}"),
    )
}

/// Job `id` in memory as `caller` may see it (the core decides).
fn live(ctx: &Ctx, caller: &Caller, id: &str) -> Result<JobView, JobError> {
    match ctx.ask(Input::Status {
        id: id.to_string(),
        caller: caller.clone(),
    }) {
        Answer::Job(r) => r.map(|v| *v),
        other => {
            tracing::error!(answer = ?other, "the core answered a job status with something else");
            Err(JobError::Incomplete(
                "the broker could not answer the job status".into(),
            ))
        }
    }
}

#[derive(Deserialize)]
struct SubmitQuery {
    workdir: Option<String>,
}

async fn submit(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<SubmitQuery>,
    body: Result<String, axum::extract::rejection::StringRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "invalid JobProfile: larger than {} bytes, the most a profile may be",
                    qcg_jobprofile::profile::limits::MAX_DOCUMENT_BYTES
                ),
            )
        }
        Err(e) => return error(e.status(), format!("cannot read the JobProfile: {e}")),
    };
    let profile = match JobProfile::parse(&body) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid JobProfile: {e}")),
    };
    if q.workdir.as_ref().is_some_and(|w| w.len() > 4096) {
        return error(StatusCode::BAD_REQUEST, "workdir is longer than 4096 bytes");
    }
    match ctx.submit(profile, body, q.workdir, caller.name.clone()) {
        Ok(id) => (StatusCode::CREATED, Json(live(&ctx, &caller, &id).ok())).into_response(),
        Err(e) => job_error(e),
    }
}

/// Finished job `id` from the database (no longer in memory), if `caller` may
/// see it.
fn stored(ctx: &Ctx, caller: &Caller, id: &str) -> Result<Job, JobError> {
    ctx.stored_job(id)
        .filter(|j| caller.may_see(&j.submission.owner))
        .ok_or_else(|| JobError::Unknown(id.to_string()))
}

/// Most jobs one page of `GET /v1/jobs` holds.
pub const MAX_PAGE: usize = 10_000;

/// Longest `after` of `GET /v1/jobs` (the longest name the broker takes).
pub const MAX_AFTER: usize = crate::registry::MAX_NAME;

/// The paging of `GET /v1/jobs`, checked.
#[derive(Debug, Default, PartialEq, Eq)]
struct ListQuery {
    limit: Option<usize>,
    after: Option<String>,
}

impl ListQuery {
    /// Reads the query's `(name, value)` pairs; the error names the parameter.
    fn parse(pairs: &[(String, String)]) -> Result<ListQuery, String> {
        let mut q = ListQuery::default();
        let mut seen = Vec::new();
        for (name, value) in pairs {
            if seen.contains(&name.as_str()) {
                return Err(format!("{name} is given twice"));
            }
            match name.as_str() {
                "limit" => {
                    let n = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=MAX_PAGE).contains(n));
                    let Some(n) = n else {
                        let shown: String = value.chars().take(40).collect();
                        return Err(format!(
                            "limit is `{shown}`: a page holds a whole number of jobs from 1 to {MAX_PAGE}"
                        ));
                    };
                    q.limit = Some(n);
                }
                "after" => {
                    if value.len() > MAX_AFTER {
                        return Err(format!(
                            "after is {} bytes long: it is a job id, at most {MAX_AFTER} bytes",
                            value.len()
                        ));
                    }
                    q.after = (!value.is_empty()).then(|| value.clone());
                }
                other => {
                    let shown: String = other.chars().take(40).collect();
                    return Err(format!(
                        "unknown parameter `{shown}`: GET /v1/jobs takes limit and after"
                    ));
                }
            }
            seen.push(name.as_str());
        }
        if q.after.is_some() && q.limit.is_none() {
            return Err("after pages the list: give limit too".into());
        }
        Ok(q)
    }
}

async fn list(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match query
        .map_err(|e| format!("the query is not name=value pairs: {e}"))
        .and_then(|Query(pairs)| ListQuery::parse(&pairs))
    {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    if let Some(limit) = q.limit {
        let page = ctx.jobs_page(&caller, q.after.as_deref(), limit);
        return Json(page).into_response();
    }
    // Those only in the database first (they finished longest ago), then memory's.
    let old = ctx.stored_jobs(|owner| caller.may_see(owner));
    let mut jobs: Vec<JobView> = old.iter().map(JobView::of).collect();
    match ctx.ask(Input::List {
        caller,
        after: None,
        limit: None,
    }) {
        Answer::Jobs { views, .. } => jobs.extend(views),
        other => return unexpected("job list", other),
    }
    Json(jobs).into_response()
}

async fn status(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    match live(&ctx, &caller, &id).or_else(|_| stored(&ctx, &caller, &id).map(|j| JobView::of(&j)))
    {
        Ok(v) => Json(v).into_response(),
        Err(e) => job_error(e),
    }
}

async fn cancel(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    match ctx.cancel(&id, &caller) {
        Ok(()) => {}
        Err(JobError::Unknown(_)) => {
            // A job only in the database finished long ago: nothing to cancel.
            return match stored(&ctx, &caller, &id) {
                Ok(j) => Json(JobView::of(&j)).into_response(),
                Err(e) => job_error(e),
            };
        }
        Err(e) => return job_error(e),
    }
    match live(&ctx, &caller, &id) {
        Ok(v) => Json(v).into_response(),
        Err(e) => job_error(e),
    }
}

/// Registered processes (with their addresses) of the jobs the caller may see.
async fn processes(State(ctx): State<Ctx>, Extension(caller): Extension<Caller>) -> Response {
    match ctx.ask(Input::Processes { caller }) {
        Answer::Processes(mine) => Json(mine).into_response(),
        other => unexpected("process list", other),
    }
}

#[derive(Deserialize)]
struct OutputQuery {
    #[serde(default)]
    from: u64,
    #[serde(default)]
    wait: u64,
}

async fn output(
    State(ctx): State<Ctx>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<OutputQuery>,
) -> Response {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(q.wait).min(MAX_WAIT);
    let mut changed = ctx.changed.subscribe();
    let mut first = true;
    loop {
        let page = match ctx.ask(Input::Output {
            id: id.clone(),
            caller: caller.clone(),
            from: q.from,
        }) {
            Answer::Output(Ok(p)) => *p,
            Answer::Output(Err(JobError::Unknown(_))) if first => {
                // Finished long ago, only in the database: its output is gone.
                return match stored(&ctx, &caller, &id) {
                    Ok(j) => Json(page_of(&j, q.from)).into_response(),
                    Err(e) => job_error(e),
                };
            }
            Answer::Output(Err(e)) => return job_error(e),
            other => return unexpected("job output", other),
        };
        first = false;
        if !page.lines.is_empty() || page.skipped > 0 || page.finished {
            return Json(page).into_response();
        }
        let wait = tokio::time::timeout_at(deadline, changed.changed()).await;
        if !matches!(wait, Ok(Ok(()))) {
            return Json(page).into_response();
        }
    }
}

/// The page of `j`'s output from line `from` (counted over every line it printed).
pub(crate) fn page_of(j: &Job, from: u64) -> OutputPage {
    // `from` counts every line the job printed; the kept ones start at
    // `first_line`.
    let from = from.min(j.lines_printed());
    let start = from.max(j.first_line);
    let mut bytes = 0;
    let lines: Vec<JobLine> = j
        .output
        .iter()
        .skip(usize::try_from(start - j.first_line).unwrap_or(usize::MAX))
        .take(10_000)
        .take_while(|l| {
            bytes += l.text.len();
            bytes <= PAGE_BYTES || bytes == l.text.len()
        })
        .cloned()
        .collect();
    OutputPage {
        next: start + lines.len() as u64,
        skipped: start - from,
        lines,
        dropped_lines: j.dropped_lines,
        dropped_bytes: j.dropped_bytes,
        finished: j.finished(),
        status: j.state.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn call(
        app: Router,
        method: &str,
        uri: &str,
        body: &str,
    ) -> (StatusCode, serde_json::Value) {
        let req = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::from(body.to_string()))
            .unwrap();
        let resp = app.oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    fn alice() -> Caller {
        Caller {
            name: "alice".into(),
            admin: false,
        }
    }

    /// Issue 11: a 13 MB profile of a million nested elements got axum's
    /// "Failed to buffer the request body: length limit exceeded".
    #[tokio::test]
    async fn a_profile_past_the_size_limit_is_refused_saying_so() {
        let ctx = Ctx::new(Default::default(), Duration::from_secs(60));
        let levels = 1_000_000;
        let xml = format!(
            "<grmsJob appId=\"deep\">{}{}</grmsJob>",
            "<task>".repeat(levels),
            "</task>".repeat(levels)
        );
        let (s, v) = call(app(ctx, alice()), "POST", "/v1/jobs", &xml).await;
        assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
        let e = v["error"].as_str().unwrap_or_default();
        assert!(e.contains("larger than 1048576 bytes"), "{v}");
    }

    #[tokio::test]
    async fn bad_and_impossible_jobs_are_refused_and_strangers_forbidden() {
        let ctx = Ctx::new(Default::default(), Duration::from_secs(60));
        let app = |ctx: Ctx| app(ctx, alice());
        let (s, v) = call(
            app(ctx.clone()),
            "POST",
            "/v1/jobs",
            "<grmsJob appId=\"x\">\n<oops/></grmsJob>",
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(
            v["error"].as_str().unwrap().contains("line 2, column 1"),
            "{v}"
        );
        let ok = r#"<grmsJob appId="x"><task taskId="t"><resourcesDescription><topology>
            <group groupId="g"><processes><processesCount><value>2</value></processesCount></processes></group>
            </topology></resourcesDescription><execution type="x"><executable>/bin/true</executable></execution></task></grmsJob>"#;
        // No cluster has reported nodes: the job can never run.
        let (s, v) = call(app(ctx.clone()), "POST", "/v1/jobs", ok).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("cannot run on this grid"),
            "{v}"
        );
        let (s, v) = call(app(ctx.clone()), "GET", "/v1/jobs", "").await;
        assert_eq!((s, v), (StatusCode::OK, serde_json::json!([])));
        let (s, _) = call(app(ctx.clone()), "GET", "/v1/jobs/job-x", "").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (s, _) = call(app(ctx.clone()), "DELETE", "/v1/jobs/job-x", "").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let why = crate::caller::CallerError::Role.to_string();
        let (s, v) = call(forbidden(why), "POST", "/v1/jobs", ok).await;
        assert_eq!(s, StatusCode::FORBIDDEN);
        assert!(
            v["error"].as_str().unwrap().contains("client certificate"),
            "{v}"
        );
    }

    /// Issue 21: per-client limits answer 429 and 413, naming the config field.
    #[tokio::test]
    async fn a_client_past_its_limits_gets_429_or_413_naming_the_field() {
        let ctx = Ctx::new(Default::default(), Duration::from_secs(60));
        let ok = r#"<grmsJob appId="x"><task taskId="t"><resourcesDescription><topology>
            <group groupId="g"><processes><processesCount><value>2</value></processesCount></processes></group>
            </topology></resourcesDescription><execution type="x"><executable>/bin/true</executable></execution></task></grmsJob>"#;
        ctx.book().jobs.set_limits(crate::jobs::JobLimits {
            queued_per_client: 1,
            profile_bytes_per_client: ok.len() + 10,
            ..Default::default()
        });
        // One of alice's jobs waits (taken back from a database).
        let waiting = crate::jobs::JobRecord {
            id: "job-w".into(),
            owner: "alice".into(),
            profile: ok.into(),
            app_id: "x".into(),
            profile_bytes: ok.len(),
            decided_unix_ms: None,
            secret_hex: "00".repeat(32),
            workdir: None,
            state: JobState::Queued,
            ranks: vec![RankState::Pending; 2],
            mapping: None,
            released: false,
            lines_printed: 0,
            dropped_bytes: 0,
            seq: 0,
        };
        let now = std::time::Instant::now();
        assert!(ctx.book().jobs.restore(vec![waiting], now).is_empty());
        let (s, v) = call(app(ctx.clone(), alice()), "POST", "/v1/jobs", ok).await;
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("max_queued_jobs_per_client = 1"),
            "{v}"
        );
        ctx.book().jobs.set_limits(crate::jobs::JobLimits {
            profile_bytes_per_client: ok.len() + 10,
            ..Default::default()
        });
        let (s, v) = call(app(ctx.clone(), alice()), "POST", "/v1/jobs", ok).await;
        assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("max_profile_bytes_per_client"),
            "{v}"
        );
        // Bob is not held back by alice's.
        let bob = Caller {
            name: "bob".into(),
            admin: false,
        };
        let (s, v) = call(app(ctx.clone(), bob), "POST", "/v1/jobs", ok).await;
        assert_eq!(
            s,
            StatusCode::UNPROCESSABLE_ENTITY,
            "no grid, but no limit: {v}"
        );
    }

    #[tokio::test]
    async fn the_job_list_comes_a_page_at_a_time() {
        let ctx = Ctx::new(Default::default(), Duration::from_secs(60));
        let ok = r#"<grmsJob appId="x"><task taskId="t"><resourcesDescription><topology>
            <group groupId="g"><processes><processesCount><value>1</value></processesCount></processes></group>
            </topology></resourcesDescription><execution type="x"><executable>/bin/true</executable></execution></task></grmsJob>"#;
        let rec = |id: &str, owner: &str| crate::jobs::JobRecord {
            id: id.into(),
            owner: owner.into(),
            profile: ok.into(),
            app_id: "x".into(),
            profile_bytes: ok.len(),
            decided_unix_ms: None,
            secret_hex: "00".repeat(32),
            workdir: None,
            state: JobState::Queued,
            ranks: vec![RankState::Pending; 1],
            mapping: None,
            released: false,
            lines_printed: 0,
            dropped_bytes: 0,
            seq: 0,
        };
        let records = vec![
            rec("job-c", "alice"),
            rec("job-a", "alice"),
            rec("job-b", "bob"),
            rec("job-d", "alice"),
        ];
        let now = std::time::Instant::now();
        assert!(ctx.book().jobs.restore(records, now).is_empty());
        let page = |uri: &'static str| {
            let ctx = ctx.clone();
            async move {
                let (s, v) = call(app(ctx, alice()), "GET", uri, "").await;
                assert_eq!(s, StatusCode::OK, "{v}");
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|j| j["id"].as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(page("/v1/jobs?limit=2").await, ["job-a", "job-c"]);
        assert_eq!(page("/v1/jobs?limit=2&after=job-c").await, ["job-d"]);
        assert!(page("/v1/jobs?limit=2&after=job-d").await.is_empty());
        assert_eq!(page("/v1/jobs").await.len(), 3);
        // Garbage after: the page starts past it in byte order.
        assert_eq!(
            page("/v1/jobs?limit=2&after=%00%FF%20x").await,
            ["job-a", "job-c"]
        );
        assert!(page("/v1/jobs?limit=2&after=zzz").await.is_empty());
        assert_eq!(page("/v1/jobs?limit=2&after=").await, ["job-a", "job-c"]);

        // The worst inputs: a clear 400 naming the parameter.
        let long = format!("/v1/jobs?limit=2&after={}", "a".repeat(MAX_AFTER + 1));
        for (uri, says) in [
            (
                "/v1/jobs?limit=0",
                "limit is `0`: a page holds a whole number of jobs from 1 to 10000",
            ),
            ("/v1/jobs?limit=-1", "limit is `-1`"),
            ("/v1/jobs?limit=10001", "limit is `10001`"),
            (
                "/v1/jobs?limit=99999999999999999999",
                "limit is `99999999999999999999`",
            ),
            ("/v1/jobs?limit=abc", "limit is `abc`"),
            ("/v1/jobs?limit=", "limit is ``"),
            ("/v1/jobs?limit=2.5", "limit is `2.5`"),
            ("/v1/jobs?limit=1&limit=2", "limit is given twice"),
            (
                "/v1/jobs?after=job-a",
                "after pages the list: give limit too",
            ),
            ("/v1/jobs?limt=2", "unknown parameter `limt`"),
            (long.as_str(), "after is 257 bytes long"),
        ] {
            let (s, v) = call(app(ctx.clone(), alice()), "GET", uri, "").await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {v}");
            let e = v["error"].as_str().unwrap_or_default();
            assert!(e.contains(says), "{uri}: {e}");
        }
    }
}
