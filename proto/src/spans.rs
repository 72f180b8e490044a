//! The spans the services log in. Every accepted connection is handled inside a
//! span naming its peer, every request inside a span naming its kind and the job
//! (and rank) it acts for, and every spawned task inside a span saying what the
//! task is; so every line says what it was about:
//!
//! ```text
//! WARN helper{peer=10.0.0.5:40112 node=a1}:request{kind=register job=j7 rank=0}: qcg_frontal: …
//! ```
//!
//! With `QCG_LOG_FORMAT=json` the same context is in each object's `span` (the
//! innermost) and `spans` (outermost first) fields.
//!
//! **Their level.** These spans are made at the `error` level, whatever they are
//! about: a span is kept only when its level passes the filter, and one at `error`
//! passes every filter that lets any event through, so a warning logged under
//! `RUST_LOG=warn` still names its connection and its request. Their level says
//! when they are kept, not how grave they are; the events in them carry the
//! severity.
//!
//! [`request_span!`](crate::request_span) is a macro so that the span's target is
//! the module that handles the request (a `RUST_LOG=qcg_frontal=debug` filter then
//! keeps it).

#[doc(hidden)]
pub use tracing as __tracing;

/// The span of one request's handling: `request{kind=… job=… rank=…}` (job and
/// rank when the request names them, [`crate::Request::job`]), inside whatever span
/// is current (its connection's). Made at the `error` level ([`crate::spans`]).
///
/// ```
/// use qcg_proto::{ProcName, Request};
/// let req = Request::Unregister { process: ProcName::new("j7", 3) };
/// let span = qcg_proto::request_span!(&req);
/// let _in = span.enter();
/// ```
#[macro_export]
macro_rules! request_span {
    ($req:expr) => {{
        let req: &$crate::Request = $req;
        let kind = req.kind();
        match req.job() {
            ::core::option::Option::Some((job, ::core::option::Option::Some(rank))) => {
                $crate::spans::__tracing::error_span!("request", kind = %kind, %job, rank)
            }
            ::core::option::Option::Some((job, ::core::option::Option::None)) => {
                $crate::spans::__tracing::error_span!("request", kind = %kind, %job)
            }
            ::core::option::Option::None => {
                $crate::spans::__tracing::error_span!("request", kind = %kind)
            }
        }
    }};
}

/// Logs, at `debug`, how a request was answered (`answer=ok`, `answer=plan`,
/// `answer="error: Forbidden: …"`): the line per request, inside its span.
#[macro_export]
macro_rules! answered {
    ($resp:expr) => {
        $crate::spans::__tracing::debug!(answer = %$crate::spans::Answer($resp), "answered")
    };
}

/// A short word for an answer, for the log: its variant, or the error.
pub struct Answer<'a>(pub &'a crate::Response);

impl std::fmt::Display for Answer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::Response as R;
        let word = match self.0 {
            R::Error(e) => return write!(f, "error: {e}"),
            R::Ok => "ok",
            R::Cluster(_) => "cluster",
            R::Node { .. } => "node",
            R::Plan(_) => "plan",
            R::Measured(_) => "measured",
            R::Seen { .. } => "seen",
            R::Listening { .. } => "listening",
            R::Echoed { .. } => "echoed",
            R::Relay { .. } => "relay",
            R::Notice(_) => "notice",
        };
        f.write_str(word)
    }
}

#[cfg(test)]
mod tests {
    use crate::{ErrorKind, ProcName, Request, Response};

    #[test]
    fn answers_are_one_word_or_the_error() {
        assert_eq!(super::Answer(&Response::Ok).to_string(), "ok");
        let e = Response::error(ErrorKind::Forbidden, "not yours");
        assert_eq!(super::Answer(&e).to_string(), "error: Forbidden: not yours");
    }

    #[test]
    fn requests_name_their_job_and_rank() {
        let p = ProcName::new("j7", 3);
        assert_eq!(
            Request::Unregister { process: p.clone() }.job(),
            Some(("j7", Some(3)))
        );
        assert_eq!(Request::Kill { job: "j7".into() }.job(), Some(("j7", None)));
        assert_eq!(Request::ClusterInfo.job(), None);
        // The macro builds in any module, whatever the request.
        for r in [
            Request::Unregister { process: p },
            Request::Kill { job: "j".into() },
            Request::NodeInfo,
        ] {
            let _span = crate::request_span!(&r);
        }
    }
}
