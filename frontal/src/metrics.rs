//! The frontal's metrics, in Prometheus's text format (names in the README's
//! metrics table): its QUIC connections, its helpers and their processes, the
//! requests it answered, the links its ranks reported and its errors.

use qcg_proto::limits::Caps;
use qcg_proto::metrics::{Answers, Errors, Exposition, Links};
use std::net::IpAddr;

/// The kinds of `qcg_frontal_errors_total`.
pub const ERRORS: &[(&str, &str)] = &[
    (
        "handshake_failed",
        "a QUIC handshake from a helper or a frontal failed",
    ),
    (
        "wrong_role",
        "a peer connected with neither a helper nor a frontal certificate",
    ),
    (
        "broker_unreachable",
        "a report for the broker could not be sent (output and process ends are kept and sent later)",
    ),
    (
        "output_dropped",
        "output lines dropped while the broker was away, over the bound",
    ),
];

/// What the frontal counts.
pub struct Metrics {
    /// Its QUIC listener's caps (shared with the accept loop).
    pub quic: Caps<IpAddr>,
    /// Link outcomes its ranks reported.
    pub links: Links,
    /// Requests from helpers, and error answers.
    pub answers: Answers,
    /// Its own errors.
    pub errors: Errors,
}

impl Metrics {
    /// Counting from zero, with the accept loop's `quic` caps.
    pub fn new(quic: Caps<IpAddr>) -> Metrics {
        Metrics {
            quic,
            links: Links::default(),
            answers: Answers::default(),
            errors: Errors::new(ERRORS),
        }
    }
}

/// Gauges read from the frontal's state at scrape time.
pub struct Now {
    /// Helpers connected (nodes registered).
    pub helpers: usize,
    /// Processes registered through this frontal.
    pub processes: usize,
    /// Lookups received.
    pub lookups: u64,
    /// Lookups answered from the cache.
    pub cache_hits: u64,
}

/// One scrape.
pub fn render(m: &Metrics, now: Now) -> String {
    let mut e = Exposition::default();
    e.connections("qcg_frontal", &[("quic", m.quic.counts())]);
    e.gauge(
        "qcg_frontal_helpers_connected",
        "Helpers connected (one per node).",
    )
    .value(now.helpers);
    e.gauge(
        "qcg_frontal_processes_registered",
        "Processes registered through this frontal.",
    )
    .value(now.processes);
    e.counter(
        "qcg_frontal_lookups_total",
        "Lookups received from helpers.",
    )
    .value(now.lookups);
    e.counter(
        "qcg_frontal_lookup_cache_hits_total",
        "Lookups answered from the frontal's cache of broker answers.",
    )
    .value(now.cache_hits);
    m.answers
        .write(&mut e, "qcg_frontal", "from helpers the frontal");
    m.links.write(&mut e, "qcg_frontal");
    m.errors.write(&mut e, "qcg_frontal");
    e.finish()
}
