//! The broker's dashboard: one HTML page on the HTTPS API (`GET /` or
//! `GET /dashboard`), rendered here on the server for the caller its client
//! certificate names ([`crate::caller`]).
//!
//! What it shows: the clusters with their announced policy and NAT beside what the
//! broker observed of them (inbound dials made and failed, the last active check,
//! a contradiction that makes links into it planned as for a closed cluster); link
//! outcomes by technique, for the jobs still running (live) and since the broker
//! started; the measured resource topology (nodes, slots, links between clusters);
//! and the jobs with their ranks.
//!
//! Who sees what is decided here, before anything is rendered ([`View::gather`]):
//! an `admin` sees every job and the submitters each node runs jobs for; a
//! `client` sees only its own jobs, the live links of those jobs only, and no
//! submitter list. The cluster, link and topology figures are those the plain HTTP
//! API already gives anyone ([`crate::http`]).
//!
//! Why server-side HTML and not a script reading the JSON endpoints: the role
//! filtering and the escaping live in one place, in Rust, tested without a browser,
//! and the page works with scripts off. The page carries no script at all, so its
//! `Content-Security-Policy` forbids every script: a job name that slipped through
//! the escaping still would not run. Every text that comes from a job, a client or
//! a frontal (appIds, owners, cluster and node names, reasons) goes through
//! [`escape`]. The page reloads itself every [`REFRESH_SECS`] seconds (a meta
//! refresh, no script).

use crate::api::{JobView, RankView};
use crate::caller::Caller;
use crate::grid::Ctx;
use crate::jobs::{JobState, RankState};
use crate::registry::{ClusterSummary, LinkCounts};
use axum::extract::{Extension, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use qcg_jobprofile::topology::ResourceTopology;
use std::collections::BTreeMap;
use std::fmt::Write;

/// How often the page reloads itself.
pub const REFRESH_SECS: u32 = 10;
/// Most jobs listed (unfinished ones first); the rest are counted.
pub const MAX_JOBS: usize = 200;
/// Most ranks listed per job; the rest are counted.
pub const MAX_RANKS: usize = 64;

/// The headers every page goes out with: no script, no outside resource, no
/// framing, not cached.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The dashboard's routes (the caller comes as an extension, as on the job API).
pub fn app(ctx: Ctx) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/dashboard", get(page))
        .with_state(ctx)
}

async fn page(State(ctx): State<Ctx>, Extension(caller): Extension<Caller>) -> impl IntoResponse {
    let html = render(&View::gather(&ctx, &caller));
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        html,
    )
}

/// A job as the dashboard lists it.
pub struct JobRow {
    /// The job.
    pub job: JobView,
    /// Its links by technique, while it runs.
    pub links: BTreeMap<&'static str, LinkCounts>,
}

/// What one caller may see, gathered under the locks and filtered for its role.
pub struct View {
    /// Who asks.
    pub caller: Caller,
    /// The clusters (aggregate figures, as on plain HTTP).
    pub clusters: Vec<ClusterSummary>,
    /// Relay proxies alive, and known.
    pub proxies: (usize, usize),
    /// Link outcomes by technique since the broker started (every job's).
    pub links_total: BTreeMap<&'static str, LinkCounts>,
    /// Link outcomes by technique of the running jobs the caller may see.
    pub links_live: BTreeMap<&'static str, LinkCounts>,
    /// The measured topology (without submitters for a client).
    pub topology: ResourceTopology,
    /// Whether each of its links (in order) is an estimate: the two gateways could
    /// not probe each other ([`crate::topology`]).
    pub estimated: Vec<bool>,
    /// The jobs the caller may see, at most [`MAX_JOBS`].
    pub jobs: Vec<JobRow>,
    /// Jobs the caller may see beyond those.
    pub more_jobs: usize,
}

impl View {
    /// What `caller` may see of the broker now.
    pub fn gather(ctx: &Ctx, caller: &Caller) -> View {
        let (clusters, proxies, links_total, mut job_links) = {
            let core = ctx.core();
            let r = &core.registry;
            let p = r.proxies();
            (
                r.cluster_summaries(),
                (p.iter().filter(|p| p.alive).count(), p.len()),
                r.links(),
                r.job_links(),
            )
        };
        let mut topology = ctx.topology();
        if !caller.admin {
            // Which clients a node runs jobs for names other clients.
            for n in topology
                .clusters
                .iter_mut()
                .flat_map(|c| c.nodes.iter_mut())
            {
                n.submitters = None;
            }
        }
        let (mut jobs, estimated): (Vec<JobRow>, Vec<bool>) = {
            let book = ctx.book();
            let estimated = topology
                .links
                .iter()
                .map(|l| book.topo.is_estimated(&l.a, &l.b))
                .collect();
            let jobs = book
                .jobs
                .all()
                .filter(|j| caller.may_see(&j.submission.owner))
                .map(|j| JobRow {
                    links: job_links.remove(&j.id).unwrap_or_default(),
                    job: JobView::of(j),
                })
                .collect();
            (jobs, estimated)
        };
        // Running jobs first, then waiting ones, then the finished.
        let order = |r: &JobRow| match r.job.status {
            JobState::Running => 0,
            JobState::Queued => 1,
            _ => 2,
        };
        jobs.sort_by(|a, b| (order(a), &a.job.id).cmp(&(order(b), &b.job.id)));
        let mut links_live: BTreeMap<&'static str, LinkCounts> = BTreeMap::new();
        for (t, c) in jobs.iter().flat_map(|j| j.links.iter()) {
            let s = links_live.entry(t).or_default();
            s.ok += c.ok;
            s.failed += c.failed;
            s.upgraded += c.upgraded;
        }
        let more_jobs = jobs.len().saturating_sub(MAX_JOBS);
        jobs.truncate(MAX_JOBS);
        View {
            caller: caller.clone(),
            clusters,
            proxies,
            links_total,
            links_live,
            topology,
            estimated,
            jobs,
            more_jobs,
        }
    }
}

/// `s` with the characters HTML gives a meaning to replaced by references, fit for
/// text and for quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "
body{font:15px/1.4 system-ui,sans-serif;margin:1.2em 2em;color:#1b1f24;background:#fafbfc}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:2px solid #d0d7de;padding-bottom:.15em}
.who{color:#57606a;margin-bottom:1em}
table{border-collapse:collapse;margin:.3em 0;background:#fff}
th,td{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}.warn{color:#9a6700;font-weight:600}.dim{color:#6e7781}
.job{margin:.8em 0 1.2em;padding:.5em .8em;border:1px solid #d0d7de;border-radius:6px;background:#fff}
.job h3{font-size:1.05em;margin:0 0 .3em}code{font-size:.95em;background:#eef1f4;padding:0 .25em;border-radius:3px}
";

/// The page for `v`.
pub fn render(v: &View) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">\
         <title>qcg broker dashboard</title><style>{STYLE}</style></head><body>\n\
         <h1>qcg broker</h1>\n<div class=\"who\" id=\"who\">Signed in as <b>{}</b> ({}). Reloads every {REFRESH_SECS} s.</div>\n",
        escape(&v.caller.name),
        if v.caller.admin {
            "admin: every job"
        } else {
            "client: your jobs only"
        },
    );
    clusters(&mut h, v);
    links(&mut h, v);
    topology(&mut h, v);
    jobs(&mut h, v);
    h.push_str("</body></html>\n");
    h
}

fn clusters(h: &mut String, v: &View) {
    let _ = write!(
        h,
        "<h2>Clusters</h2>\n<table id=\"clusters\"><tr><th>cluster</th><th>announced policy</th><th>announced NAT</th>\
         <th>observed</th><th>inbound dials made / failed</th><th>processes</th></tr>\n"
    );
    if v.clusters.is_empty() {
        h.push_str("<tr><td colspan=\"6\" class=\"dim\">no cluster registered</td></tr>\n");
    }
    for c in &v.clusters {
        let observed = match (&c.mismatch, &c.checked) {
            (Some(m), _) => format!(
                "<span class=\"bad\">planned as closed</span>: {}",
                escape(m)
            ),
            (None, Some(checked)) => format!(
                "<span class=\"ok\">as announced</span>; {}",
                escape(checked)
            ),
            (None, None) => "<span class=\"ok\">as announced</span>".to_string(),
        };
        let _ = writeln!(
            h,
            "<tr><td><b>{}</b></td><td>{}</td><td>{}</td><td>{observed}</td><td class=\"n\">{} / {}</td><td class=\"n\">{}</td></tr>",
            escape(&c.name),
            escape(&c.policy.to_string()),
            escape(&c.nat.to_string()),
            c.inbound_ok,
            c.inbound_failed,
            c.processes
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<p>Relay proxies alive: <b>{}</b> of {}.</p>",
        v.proxies.0, v.proxies.1
    );
}

fn links(h: &mut String, v: &View) {
    let live_what = if v.caller.admin {
        "running jobs"
    } else {
        "your running jobs"
    };
    let _ = write!(
        h,
        "<h2>Links by technique</h2>\n<table id=\"links\"><tr><th>technique</th>\
         <th>live: made ({live_what})</th><th>live: failed</th>\
         <th>since start: made</th><th>failed</th><th>upgraded from relay</th></tr>\n"
    );
    for (t, total) in &v.links_total {
        let live = v.links_live.get(t).copied().unwrap_or_default();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(t),
            live.ok,
            live.failed,
            total.ok,
            total.failed,
            total.upgraded
        );
    }
    h.push_str("</table>\n");
}

fn topology(h: &mut String, v: &View) {
    let (t, admin) = (&v.topology, v.caller.admin);
    h.push_str("<h2>Measured topology</h2>\n<table id=\"nodes\"><tr><th>cluster</th><th>node</th><th>slots</th><th>memory</th><th>inside the cluster</th>");
    if admin {
        h.push_str("<th>runs jobs of</th>");
    }
    h.push_str("</tr>\n");
    if t.clusters.is_empty() {
        h.push_str("<tr><td colspan=\"6\" class=\"dim\">no node reported</td></tr>\n");
    }
    for c in &t.clusters {
        for n in &c.nodes {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0} MiB</td><td>{}</td>",
                escape(&c.name),
                escape(&n.name),
                n.slots,
                n.memory_mib,
                quality(c.internal.latency_ms, c.internal.bandwidth_mbps),
            );
            if admin {
                let who = match &n.submitters {
                    None => "anyone".to_string(),
                    Some(s) => escape(&s.join(", ")),
                };
                let _ = write!(h, "<td>{who}</td>");
            }
            h.push_str("</tr>\n");
        }
    }
    h.push_str("</table>\n<table id=\"interlinks\"><tr><th>between</th><th>and</th><th>link</th><th>how known</th></tr>\n");
    if t.links.is_empty() {
        h.push_str(
            "<tr><td colspan=\"4\" class=\"dim\">no link measured between clusters</td></tr>\n",
        );
    }
    for (i, l) in t.links.iter().enumerate() {
        let how = if v.estimated.get(i).copied().unwrap_or(false) {
            "<span class=\"warn\">estimated</span>: the gateways cannot probe each other (latency through the broker or from the processes' links)"
        } else {
            "<span class=\"ok\">measured</span> by the gateways' probe"
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{how}</td></tr>",
            escape(&l.a),
            escape(&l.b),
            quality(l.quality.latency_ms, l.quality.bandwidth_mbps)
        );
    }
    h.push_str("</table>\n");
}

fn quality(latency_ms: f64, mbps: f64) -> String {
    format!("{latency_ms:.2} ms, {mbps:.0} Mbit/s")
}

fn job_state(s: &JobState) -> String {
    match s {
        JobState::Queued => "<span class=\"warn\">queued</span>".into(),
        JobState::Running => "<span class=\"ok\">running</span>".into(),
        JobState::Succeeded => "<span class=\"ok\">succeeded</span>".into(),
        JobState::Failed { rank, reason } => format!(
            "<span class=\"bad\">failed</span> (rank {rank}: {})",
            escape(reason)
        ),
        JobState::Cancelled => "<span class=\"dim\">cancelled</span>".into(),
    }
}

fn rank_state(s: &RankState) -> String {
    match s {
        RankState::Pending => "<span class=\"dim\">pending</span>".into(),
        RankState::Starting => "<span class=\"warn\">starting</span>".into(),
        RankState::Running => "<span class=\"ok\">running</span>".into(),
        RankState::Lost => "<span class=\"bad\">lost</span>".into(),
        RankState::Exited { exit } => match (&exit.error, exit.signal, exit.code) {
            (Some(e), _, _) => format!("<span class=\"bad\">not run</span>: {}", escape(e)),
            (None, Some(sig), _) => format!("<span class=\"bad\">killed by signal {sig}</span>"),
            (None, None, Some(0)) => "<span class=\"ok\">exited 0</span>".into(),
            (None, None, Some(c)) => format!("<span class=\"bad\">exited {c}</span>"),
            (None, None, None) => "<span class=\"dim\">ended</span>".into(),
        },
    }
}

fn jobs(h: &mut String, v: &View) {
    let _ = writeln!(
        h,
        "<h2>Jobs</h2>\n<div id=\"jobs\">{}",
        if v.jobs.is_empty() {
            "<p class=\"dim\">no job</p>"
        } else {
            ""
        }
    );
    for r in &v.jobs {
        let j = &r.job;
        let links: Vec<String> = r
            .links
            .iter()
            .map(|(t, c)| {
                let failed = if c.failed > 0 {
                    format!(" ({} failed)", c.failed)
                } else {
                    String::new()
                };
                format!("{} {}{failed}", escape(t), c.ok)
            })
            .collect();
        let _ = writeln!(
            h,
            "<div class=\"job\"><h3><code>{}</code> {} &mdash; {}</h3>\
             <div>owner <b>{}</b>; lines of output: {}; links: {}</div>",
            escape(&j.id),
            escape(&j.app_id),
            job_state(&j.status),
            escape(&j.owner),
            j.lines,
            if links.is_empty() {
                "<span class=\"dim\">none live</span>".to_string()
            } else {
                links.join(", ")
            }
        );
        if !j.ranks.is_empty() {
            h.push_str("<table class=\"ranks\"><tr><th>rank</th><th>group</th><th>cluster</th><th>node</th><th>state</th></tr>\n");
            for RankView {
                rank,
                group,
                cluster,
                node,
                state,
            } in j.ranks.iter().take(MAX_RANKS)
            {
                let _ = writeln!(
                    h,
                    "<tr><td class=\"n\">{rank}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape(group),
                    escape(cluster),
                    escape(node),
                    rank_state(state)
                );
            }
            h.push_str("</table>\n");
            if j.ranks.len() > MAX_RANKS {
                let _ = writeln!(
                    h,
                    "<p class=\"dim\">and {} more ranks</p>",
                    j.ranks.len() - MAX_RANKS
                );
            }
        }
        h.push_str("</div>\n");
    }
    if v.more_jobs > 0 {
        let _ = writeln!(
            h,
            "<p class=\"dim\">and {} more jobs (<code>GET /v1/jobs</code> lists them)</p>",
            v.more_jobs
        );
    }
    h.push_str("</div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::JobRecord;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use std::time::Duration;
    use tower::ServiceExt;

    const EVIL: &str = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>";

    fn record(id: &str, owner: &str, app_id: &str) -> JobRecord {
        let app = app_id
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('"', "&quot;");
        let profile = format!(
            r#"<grmsJob appId="{app}"><task taskId="t"><resourcesDescription><topology>
            <group groupId="g"><processes><processesCount><value>2</value></processesCount></processes></group>
            </topology></resourcesDescription><execution type="x"><executable>/bin/true</executable></execution></task></grmsJob>"#
        );
        JobRecord {
            id: id.into(),
            owner: owner.into(),
            profile_bytes: profile.len(),
            profile,
            app_id: app_id.into(),
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
        }
    }

    fn ctx() -> Ctx {
        let ctx = Ctx::new(Default::default(), Duration::from_secs(60));
        let evil_owner = "<b>mallory</b>\"'&";
        let jobs = vec![
            record("job-alice", "alice", EVIL),
            record("job-mallory", evil_owner, "mallory-secret-app"),
        ];
        assert!(ctx
            .book()
            .jobs
            .restore(jobs, std::time::Instant::now())
            .is_empty());
        ctx
    }

    async fn get(ctx: Ctx, caller: Caller) -> (axum::http::HeaderMap, String) {
        let app = crate::api::app(ctx, caller);
        let resp = app
            .oneshot(
                axum::http::Request::get("/dashboard")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), axum::http::StatusCode::OK);
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (headers, String::from_utf8(body.to_vec()).unwrap())
    }

    fn who(name: &str, admin: bool) -> Caller {
        Caller {
            name: name.into(),
            admin,
        }
    }

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape(EVIL),
            "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
        );
        assert_eq!(escape("a&b \"c\" é"), "a&amp;b &quot;c&quot; é");
    }

    #[tokio::test]
    async fn a_client_sees_its_own_jobs_only_and_nothing_runs_from_a_name() {
        let (headers, page) = get(ctx(), who("alice", false)).await;
        assert!(page.contains("job-alice"), "{page}");
        assert!(!page.contains("job-mallory"), "{page}");
        assert!(!page.contains("mallory"), "{page}");
        assert!(page.contains("client: your jobs only"), "{page}");
        // The appId is shown, as text.
        assert!(page.contains("&lt;script&gt;document.title"), "{page}");
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.starts_with("default-src 'none'"), "{csp}");
        assert!(headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
        // Another client sees neither of alice's.
        let (_, page) = get(ctx(), who("bob", false)).await;
        assert!(
            !page.contains("job-alice") && !page.contains("job-mallory"),
            "{page}"
        );
        assert!(page.contains("no job"), "{page}");
    }

    #[tokio::test]
    async fn an_admin_sees_every_job_with_owners_escaped() {
        let (_, page) = get(ctx(), who("ops", true)).await;
        assert!(
            page.contains("job-alice") && page.contains("job-mallory"),
            "{page}"
        );
        assert!(page.contains("admin: every job"), "{page}");
        assert!(
            page.contains("&lt;b&gt;mallory&lt;/b&gt;&quot;&#39;&amp;"),
            "{page}"
        );
        assert!(!page.contains("<b>mallory"), "{page}");
        assert!(!page.contains("<script"), "{page}");
    }

    #[tokio::test]
    async fn a_stranger_gets_no_dashboard() {
        let why = crate::caller::CallerError::Role.to_string();
        let resp = crate::api::forbidden(why)
            .oneshot(axum::http::Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), axum::http::StatusCode::FORBIDDEN);
    }
}
