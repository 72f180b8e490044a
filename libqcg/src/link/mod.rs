//! How links come to exist. The [`dialer`] decides (a pure state machine: which
//! attempt of the broker's plan starts when, which one made the link, what timed out;
//! the techniques are named in `broker/src/plan.rs`); its [`shell`] does the I/O inside
//! the engine's readiness loop: direct and port-range dials (the listener is
//! [`direct`]'s), reversed (a rendezvous, then the engine's listener accepts the
//! peer), [`punched`] and traversed (dials from our listener's port), relayed (a
//! rendezvous, then both ends meet at a proxy). Each hands the engine a connected
//! socket on which the job handshake ([`crate::handshake`]) completed. No thread is
//! made per attempt or per notice.

pub(crate) mod dialer;
pub(crate) mod direct;
pub(crate) mod punched;
pub(crate) mod race;
pub(crate) mod shell;

use crate::comm::{Comm, Inner};
use crate::control::Control;
use crate::error::{Error, Result};
use qcg_wire::{ProcName, Request, Response};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Time allowed for one TCP connect of a plan's attempt.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed for the job handshake on a new connection.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Says what an I/O error of a step means, naming a time-out as one.
pub(crate) fn io_error(e: &std::io::Error, what: &str, limit: Duration) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("{what} timed out after {:.0} s", limit.as_secs_f64())
        }
        _ => format!("{what}: {e}"),
    }
}

impl Comm {
    /// Makes the link to `dest` (see [`dialer`]): the first attempt of its plan to
    /// complete the job handshake is the link. When that is the relay, the direct
    /// attempts still running go on, and the first of them to complete moves the
    /// link off the proxy (the engine switches without reordering, see
    /// `Core::add_conn`).
    pub(crate) fn link(&self, dest: u32) -> Result<()> {
        self.inner
            .engine
            .link_to(dest)
            .map_err(|attempts| Error::NoLink {
                rank: dest,
                attempts,
            })
    }
}

/// A thread with its own line to the helper that sends link reports, so that a new
/// link's first message does not wait for the broker to note the outcome.
pub(crate) struct Reporter {
    pub(crate) tx: std::sync::mpsc::Sender<Request>,
    pub(crate) thread: std::thread::JoinHandle<()>,
}

pub(crate) fn reporter(helper: &std::path::Path) -> Option<Reporter> {
    let control = Control::connect(helper).ok()?;
    let (tx, rx) = std::sync::mpsc::channel::<Request>();
    let thread = std::thread::Builder::new()
        .name("qcg-report".into())
        .spawn(move || {
            for req in rx {
                if let Err(e) = control.request(&req) {
                    tracing::debug!(error = %e, "link report not delivered");
                }
            }
        })
        .ok()?;
    Some(Reporter { tx, thread })
}

/// Reads notices from the helper until it hangs up; the engine's loop takes our part
/// of each (no thread per notice).
pub(crate) fn notice_loop(
    inner: std::sync::Weak<Inner>,
    mut stream: std::os::unix::net::UnixStream,
) {
    loop {
        let n = match qcg_wire::frame::read_frame_sync::<Response, _>(&mut stream) {
            Ok(Some(Response::Notice(n))) => n,
            Ok(Some(_)) => continue,
            _ => return,
        };
        let Some(inner) = inner.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        inner.engine.notice(n);
    }
}

/// Subscribes to the grid's notices for `process` on a line of its own.
pub(crate) fn subscribe(
    helper: &std::path::Path,
    process: ProcName,
) -> Result<std::os::unix::net::UnixStream> {
    std::os::unix::net::UnixStream::connect(helper)
        .and_then(|mut s| {
            qcg_wire::frame::write_frame_sync(&mut s, &Request::Subscribe { process })
                .map_err(std::io::Error::other)?;
            match qcg_wire::frame::read_frame_sync::<Response, _>(&mut s) {
                Ok(Some(Response::Ok)) => Ok(s),
                other => Err(std::io::Error::other(format!("subscribe: {other:?}"))),
            }
        })
        .map_err(|e| Error::Helper {
            socket: helper.to_path_buf(),
            message: format!("cannot subscribe to notices: {e}"),
        })
}
