//! The helper's metrics, in Prometheus's text format (names in the README's
//! metrics table): its socket's connections, the job processes it runs, the
//! requests local processes made, the links they reported and its errors.

use qcg_proto::limits::Caps;
use qcg_proto::metrics::{Answers, Errors, Exposition, Links};

/// The kinds of `qcg_helper_errors_total`.
pub const ERRORS: &[(&str, &str)] = &[
    (
        "bad_frame",
        "a local process sent a frame that could not be read",
    ),
    (
        "no_credentials",
        "a connection on the socket gave no peer credentials",
    ),
    (
        "syn_not_delivered",
        "a SYN captured for a traversal did not reach the frontal, or none was seen",
    ),
];

/// What the helper counts.
pub struct Metrics {
    /// Its socket's caps, per uid (shared with the accept loop).
    pub socket: Caps<u32>,
    /// Link outcomes its processes reported.
    pub links: Links,
    /// Requests from local processes, and error answers.
    pub answers: Answers,
    /// Its own errors.
    pub errors: Errors,
}

impl Metrics {
    /// Counting from zero, with the accept loop's `socket` caps.
    pub fn new(socket: Caps<u32>) -> Metrics {
        Metrics {
            socket,
            links: Links::default(),
            answers: Answers::default(),
            errors: Errors::new(ERRORS),
        }
    }
}

/// One scrape; `running` is the number of job processes running now.
pub fn render(m: &Metrics, running: usize) -> String {
    let mut e = Exposition::default();
    e.connections("qcg_helper", &[("socket", m.socket.counts())]);
    e.gauge(
        "qcg_helper_processes_running",
        "Job processes this helper started that are still running.",
    )
    .value(running);
    m.answers
        .write(&mut e, "qcg_helper", "from local processes the helper");
    m.links.write(&mut e, "qcg_helper");
    m.errors.write(&mut e, "qcg_helper");
    e.finish()
}
