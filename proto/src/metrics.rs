//! Prometheus metrics for every service: the text exposition format written by
//! hand ([`Exposition`]), the counters the services share ([`Links`], [`Errors`],
//! and the connection counts of [`crate::limits::Caps`]), and a small plain-HTTP
//! listener that answers `GET /metrics` and nothing else ([`bind`], then
//! [`task`] or [`serve`]).
//!
//! Why not a metrics crate: the format is a few lines of text per family, and
//! the services' figures already live in their own counters; what matters is that
//! the names follow Prometheus's conventions (a `qcg_<service>_` prefix, `_total`
//! on counters, the unit in the name) and that the output parses, which the
//! end-to-end test checks with Prometheus's own `promtool check metrics`.
//!
//! The listener is for a scraper on the host or its management network: it
//! answers only `/metrics`, names no process, address or token, takes a few
//! connections per address and a few dozen in all (the caps of
//! [`crate::limits`]), and gives each request [`HEAD_DEADLINE`] to arrive.
//!
//! ```
//! use qcg_proto::metrics::Exposition;
//! let mut e = Exposition::default();
//! e.counter("qcg_demo_requests_total", "Requests handled, by kind.")
//!     .sample(&[("kind", "lookup")], 3)
//!     .sample(&[("kind", "register")], 1);
//! e.gauge("qcg_demo_connections_open", "Connections open now.").value(2);
//! let text = e.finish();
//! assert!(text.contains("qcg_demo_requests_total{kind=\"lookup\"} 3\n"));
//! assert!(text.contains("# TYPE qcg_demo_connections_open gauge\nqcg_demo_connections_open 2\n"));
//! ```

use crate::limits::{Caps, Counts};
use crate::Technique;
use std::collections::BTreeMap;
use std::fmt::{Display, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::Instrument;

/// How long a scraper has to send its request's head.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// Largest request head read; a longer one is refused.
pub const MAX_HEAD: usize = 8 * 1024;
/// Connections a metrics listener takes per address at once.
pub const PER_ADDRESS: usize = 4;
/// Connections a metrics listener takes in all at once.
pub const TOTAL: usize = 32;

/// The text of one scrape, family after family.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

/// One metric family being written: add its samples.
pub struct Family<'a> {
    out: &'a mut String,
    name: &'a str,
}

impl Exposition {
    /// Starts a counter family (`name` should end in `_total`).
    pub fn counter<'a>(&'a mut self, name: &'a str, help: &str) -> Family<'a> {
        self.family(name, help, "counter")
    }

    /// Starts a gauge family.
    pub fn gauge<'a>(&'a mut self, name: &'a str, help: &str) -> Family<'a> {
        self.family(name, help, "gauge")
    }

    fn family<'a>(&'a mut self, name: &'a str, help: &str, kind: &str) -> Family<'a> {
        debug_assert!(valid_name(name), "bad metric name {name}");
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        Family {
            out: &mut self.out,
            name,
        }
    }

    /// Text already written elsewhere in the same format (appended as it is).
    pub fn raw(&mut self, text: &str) {
        self.out.push_str(text);
    }

    /// The connection counts of one listener's caps, as three families named
    /// `{prefix}_connections_open`, `…_accepted_total` and `…_refused_total`
    /// (`reason` = `peer_cap` or `total_cap`), labelled `listener`.
    pub fn connections(&mut self, prefix: &str, listeners: &[(&str, Counts)]) {
        let open = format!("{prefix}_connections_open");
        let mut f = self.gauge(&open, "Connections open now, by listener.");
        for (l, c) in listeners {
            f.sample(&[("listener", l)], c.open);
        }
        let accepted = format!("{prefix}_connections_accepted_total");
        let mut f = self.counter(&accepted, "Connections taken, by listener.");
        for (l, c) in listeners {
            f.sample(&[("listener", l)], c.accepted);
        }
        let refused = format!("{prefix}_connections_refused_total");
        let mut f = self.counter(
            &refused,
            "Connections refused over the listener's caps, by listener and cap \
             (peer_cap: the peer held its share; total_cap: the listener was full).",
        );
        for (l, c) in listeners {
            f.sample(&[("listener", l), ("reason", "peer_cap")], c.refused_peer);
            f.sample(&[("listener", l), ("reason", "total_cap")], c.refused_total);
        }
    }

    /// The whole text.
    pub fn finish(self) -> String {
        self.out
    }
}

impl Family<'_> {
    /// One sample with `labels`.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: impl Display) -> &mut Self {
        self.out.push_str(self.name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.out, "{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
        self
    }

    /// The family's one unlabelled sample.
    pub fn value(&mut self, value: impl Display) -> &mut Self {
        self.sample(&[], value)
    }
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`, Prometheus's rule for metric names.
fn valid_name(name: &str) -> bool {
    let mut c = name.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Link outcomes the ranks reported through this service, per technique.
#[derive(Debug, Default)]
pub struct Links {
    by: Mutex<BTreeMap<Technique, [u64; 3]>>,
}

impl Links {
    /// A rank reported an attempt on `technique`: made (`ok`), and if so whether
    /// it took over a relayed link (`upgrade`).
    pub fn note(&self, technique: Technique, ok: bool, upgrade: bool) {
        let mut m = lock(&self.by);
        let c = m.entry(technique).or_default();
        match (ok, upgrade) {
            (true, false) => c[0] += 1,
            (true, true) => {
                c[0] += 1;
                c[2] += 1;
            }
            (false, _) => c[1] += 1,
        }
    }

    /// (made, failed, upgraded) on `technique`.
    pub fn get(&self, technique: Technique) -> (u64, u64, u64) {
        let c = lock(&self.by).get(&technique).copied().unwrap_or_default();
        (c[0], c[1], c[2])
    }

    /// `{prefix}_links_total{technique,outcome}` and
    /// `{prefix}_link_upgrades_total{technique}`, every technique listed.
    pub fn write(&self, e: &mut Exposition, prefix: &str) {
        let links = format!("{prefix}_links_total");
        let mut f = e.counter(
            &links,
            "Link attempts the ranks reported, by technique and outcome (ok: link made; \
             shared-memory: a link between two ranks of one node moved into memory).",
        );
        for t in Technique::ALL {
            let (ok, failed, _) = self.get(t);
            f.sample(&[("technique", t.name()), ("outcome", "ok")], ok);
            f.sample(&[("technique", t.name()), ("outcome", "failed")], failed);
        }
        let up = format!("{prefix}_link_upgrades_total");
        let mut f = e.counter(
            &up,
            "Relayed links moved off the proxy, by the technique that took them over.",
        );
        for t in Technique::ALL {
            f.sample(&[("technique", t.name())], self.get(t).2);
        }
    }
}

/// The name of an error answer's kind, as its `snake_case` wire form.
pub fn error_kind_name(k: crate::ErrorKind) -> &'static str {
    use crate::ErrorKind::*;
    match k {
        Malformed => "malformed",
        TooLarge => "too_large",
        Version => "version",
        UnknownProcess => "unknown_process",
        Left => "left",
        NoRoute => "no_route",
        Forbidden => "forbidden",
        Unavailable => "unavailable",
        Internal => "internal",
    }
}

/// Every error answer kind, for series that exist at 0 from the start.
pub const ERROR_KINDS: [crate::ErrorKind; 9] = {
    use crate::ErrorKind::*;
    [
        Malformed,
        TooLarge,
        Version,
        UnknownProcess,
        Left,
        NoRoute,
        Forbidden,
        Unavailable,
        Internal,
    ]
};

/// Requests a service answered, by kind, and its error answers, by error kind.
#[derive(Debug, Default)]
pub struct Answers {
    requests: Mutex<BTreeMap<&'static str, u64>>,
    errors: Mutex<BTreeMap<&'static str, u64>>,
}

impl Answers {
    /// `request` (its kind, [`crate::Request::kind`]) was answered with `resp`.
    pub fn note(&self, request: &'static str, resp: &crate::Response) {
        *lock(&self.requests).entry(request).or_default() += 1;
        if let crate::Response::Error(e) = resp {
            *lock(&self.errors)
                .entry(error_kind_name(e.kind))
                .or_default() += 1;
        }
    }

    /// Error answers of `kind` so far.
    pub fn errors(&self, kind: crate::ErrorKind) -> u64 {
        lock(&self.errors)
            .get(error_kind_name(kind))
            .copied()
            .unwrap_or(0)
    }

    /// `{prefix}_requests_total{kind}` and `{prefix}_error_answers_total{kind}`.
    pub fn write(&self, e: &mut Exposition, prefix: &str, whose: &str) {
        let name = format!("{prefix}_requests_total");
        let mut f = e.counter(&name, &format!("Requests {whose} answered, by kind."));
        for (k, v) in lock(&self.requests).iter() {
            f.sample(&[("kind", k)], v);
        }
        let name = format!("{prefix}_error_answers_total");
        let mut f = e.counter(
            &name,
            &format!(
                "Requests {whose} answered with an error, by error kind (unavailable: the \
                 next hop did not answer; forbidden: not allowed from that peer; the others \
                 as their names say)."
            ),
        );
        let errors = lock(&self.errors);
        for k in ERROR_KINDS {
            let k = error_kind_name(k);
            f.sample(&[("kind", k)], errors.get(k).copied().unwrap_or(0));
        }
    }
}

/// Errors a service met, by kind; the kinds are fixed when it is made, so that
/// every series exists (at 0) from the start.
#[derive(Debug)]
pub struct Errors {
    kinds: &'static [(&'static str, &'static str)],
    counts: Mutex<BTreeMap<&'static str, u64>>,
}

impl Errors {
    /// Kinds as (label, what it means) pairs.
    pub const fn new(kinds: &'static [(&'static str, &'static str)]) -> Errors {
        Errors {
            kinds,
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    /// One error of `kind` (one of the kinds given to [`Errors::new`]).
    pub fn note(&self, kind: &'static str) {
        self.add(kind, 1);
    }

    /// `n` errors of `kind` at once.
    pub fn add(&self, kind: &'static str, n: u64) {
        debug_assert!(self.kinds.iter().any(|(k, _)| *k == kind), "{kind}");
        *lock(&self.counts).entry(kind).or_default() += n;
    }

    /// Errors of `kind` so far.
    pub fn get(&self, kind: &str) -> u64 {
        lock(&self.counts).get(kind).copied().unwrap_or(0)
    }

    /// `{prefix}_errors_total{kind}`, the kinds explained in the help line.
    pub fn write(&self, e: &mut Exposition, prefix: &str) {
        let name = format!("{prefix}_errors_total");
        let help = self
            .kinds
            .iter()
            .map(|(k, what)| format!("{k}: {what}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut f = e.counter(&name, &format!("Errors by kind ({help})."));
        for (k, _) in self.kinds {
            f.sample(&[("kind", k)], self.get(k));
        }
    }
}

/// The rule every service's `metrics_listen` follows: it may be omitted (no
/// metrics served), and it must be a loopback address unless `metrics_public` is
/// true (the listener has no authentication; the figures are aggregate, but an
/// admin opens them to a network on purpose).
pub fn check_listen(
    path: &std::path::Path,
    text: &str,
    listen: Option<SocketAddr>,
    public: bool,
) -> Result<(), crate::config::ConfigError> {
    match listen {
        Some(a) if !a.ip().is_loopback() && !public => Err(crate::config::ConfigError::field(
            path,
            text,
            "metrics_listen",
            format!(
                "{a} is not a loopback address: the metrics listener has no authentication; \
                 set `metrics_public = true` to serve it there anyway"
            ),
        )),
        _ => Ok(()),
    }
}

/// A metrics listener, bound before its service starts: a service whose
/// `metrics_listen` is taken stops before it says it serves.
#[derive(Debug)]
pub struct Listener {
    tcp: TcpListener,
    addr: SocketAddr,
}

impl Listener {
    /// The address it is bound to (the port chosen, for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// A metrics address that could not be bound: what every service's start says,
/// naming the config field.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics on {addr} (config field `metrics_listen`): {source}")]
pub struct BindError {
    /// The address.
    pub addr: SocketAddr,
    /// Why.
    pub source: std::io::Error,
}

/// Binds a metrics listener on `addr`.
pub async fn bind(addr: SocketAddr) -> Result<Listener, BindError> {
    let bound = async {
        let tcp = TcpListener::bind(addr).await?;
        let at = tcp.local_addr()?;
        Ok(Listener { tcp, addr: at })
    };
    bound.await.map_err(|source| BindError { addr, source })
}

/// A service's metrics task: [`serve`] with `render` on `listener` until `stop`
/// completes (the service's cancellation), inside a `metrics` span of its own
/// (no parent: it lives as long as the service, not as the call that started it)
/// that names the address. Returns the address and the task, for the service to
/// spawn on its tracker.
pub fn task(
    listener: Listener,
    render: impl Fn() -> String + Send + Sync + 'static,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> (
    SocketAddr,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let at = listener.addr();
    let task = async move {
        tokio::select! {
            _ = stop => {}
            _ = serve(listener, Arc::new(render)) => {}
        }
    }
    .instrument(tracing::error_span!(parent: None, "metrics", listen = %at));
    tracing::debug!(%at, "metrics served");
    (at, task)
}

/// Answers `GET /metrics` on `listener` with `render()`'s text until the task is
/// dropped or aborted; anything else gets 404 or 405, a head that does not come
/// within [`HEAD_DEADLINE`] or exceeds [`MAX_HEAD`] is dropped, and connections
/// over [`PER_ADDRESS`] or [`TOTAL`] are closed at once. One request per
/// connection (`Connection: close`).
pub async fn serve(listener: Listener, render: Arc<dyn Fn() -> String + Send + Sync>) {
    let listener = listener.tcp;
    let caps: Caps<IpAddr> = Caps::new(PER_ADDRESS, TOTAL);
    let mut errors = crate::limits::AcceptErrors::new("metrics");
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                tokio::time::sleep(errors.failed(&e, std::time::Instant::now())).await;
                continue;
            }
        };
        errors.flush(std::time::Instant::now());
        let Some(permit) = crate::limits::admit(&caps, "metrics", peer.ip()) else {
            continue;
        };
        let render = render.clone();
        let span = tracing::error_span!("scrape", %peer);
        tokio::spawn(
            async move {
                let _permit = permit;
                if let Err(e) = answer(tcp, render).await {
                    tracing::debug!(error = %e, "metrics request failed");
                }
            }
            .instrument(span),
        );
    }
}

async fn answer(
    mut tcp: TcpStream,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let read = async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            if head.len() > MAX_HEAD {
                return Err(std::io::Error::other("request head too long"));
            }
            let n = tcp.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok(())
    };
    tokio::time::timeout(HEAD_DEADLINE, read)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            render(),
        ),
        (_, "/metrics") => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
        _ => ("404 Not Found", "text/plain", "only /metrics here\n".into()),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::time::timeout(HEAD_DEADLINE, tcp.write_all(reply.as_bytes()))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let _ = tcp.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_help_are_escaped() {
        let mut e = Exposition::default();
        e.counter("qcg_x_total", "a\\b\nc")
            .sample(&[("k", "q\"u\\o\nte")], 1);
        assert_eq!(
            e.finish(),
            "# HELP qcg_x_total a\\\\b\\nc\n# TYPE qcg_x_total counter\nqcg_x_total{k=\"q\\\"u\\\\o\\nte\"} 1\n"
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("qcg_proxy_relayed_bytes_total"));
        assert!(!valid_name("9lives"));
        assert!(!valid_name("qcg-proxy"));
        assert!(!valid_name(""));
    }

    #[test]
    fn links_count_upgrades_among_links_made() {
        let l = Links::default();
        l.note(Technique::Direct, true, false);
        l.note(Technique::Direct, true, true);
        l.note(Technique::Direct, false, false);
        assert_eq!(l.get(Technique::Direct), (2, 1, 1));
        let mut e = Exposition::default();
        l.write(&mut e, "qcg_t");
        let text = e.finish();
        assert!(
            text.contains("qcg_t_links_total{technique=\"direct\",outcome=\"failed\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("qcg_t_link_upgrades_total{technique=\"direct\"} 1\n"),
            "{text}"
        );
        // Every technique has its series from the start, shared memory too.
        assert!(
            text.contains("qcg_t_links_total{technique=\"shared-memory\",outcome=\"ok\"} 0\n"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_task_serves_until_stopped_and_a_taken_address_is_named() {
        let l = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let e = bind(l.addr()).await.unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "cannot serve metrics on {} (config field `metrics_listen`): ",
                l.addr()
            )),
            "{e}"
        );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (at, t) = task(l, || "qcg_up 1\n".into(), async {
            let _ = rx.await;
        });
        let t = tokio::spawn(t);
        let mut s = TcpStream::connect(at).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.ends_with("\r\n\r\nqcg_up 1\n"), "{out}");
        tx.send(()).unwrap();
        t.await.unwrap();
        // Stopped: the listener is closed with the task.
        assert!(TcpStream::connect(at).await.is_err());
    }

    #[tokio::test]
    async fn the_listener_answers_metrics_only() {
        let l = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = l.addr();
        let task = tokio::spawn(serve(l, Arc::new(|| "qcg_up 1\n".to_string())));
        let ask = |req: &'static str| async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        let ok = ask("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nqcg_up 1\n"), "{ok}");
        let nope = ask("GET /v1/processes HTTP/1.1\r\n\r\n").await;
        assert!(nope.starts_with("HTTP/1.1 404"), "{nope}");
        let post = ask("POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        task.abort();
    }
}
