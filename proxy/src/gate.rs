//! The proxy's door: accepting connections and reading their token without letting
//! strangers cost threads, descriptors or log lines.
//!
//! One task accepts; each connection then has [`FIRST_BYTES_DEADLINE`] to send its
//! magic and token, read by a task of the proxy's runtime (its fixed worker
//! threads), never by a thread of its own. At most [`MAX_PENDING`] handshakes wait at
//! once: past that the oldest is dropped to make room, so a flood of idle connections
//! holds a bounded number of descriptors and cannot keep a newer, real one out.
//! Refusals are counted and logged as one summary line per [`LOG_INTERVAL`], not a
//! line per stranger. A connection whose token pairs it is handed to
//! [`Tokens::arrive_with_token`]; relaying itself is unchanged.

use crate::relay::{Tokens, MAGIC, TOKEN_LEN, WHOAMI};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;
use tracing::Instrument;

/// How long a new connection has to send its magic and token.
pub const FIRST_BYTES_DEADLINE: Duration = Duration::from_secs(3);
/// Most handshakes waiting at once; past it the oldest is dropped.
pub const MAX_PENDING: usize = 256;
/// One summary line of refusals per this interval (when there were any).
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// What the door did, since the proxy started.
#[derive(Debug, Default)]
pub struct GateStats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Handshakes that sent no complete header before the deadline.
    pub timed_out: AtomicU64,
    /// Handshakes dropped, oldest first, to make room.
    pub dropped: AtomicU64,
    /// Headers that were not a qcg relay request.
    pub malformed: AtomicU64,
    /// Handshakes waiting now.
    pub pending: AtomicU64,
    /// Pairs that got no relay thread (the system refused one).
    pub thread_failed: AtomicU64,
}

/// Why a handshake failed.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// The first bytes are not `QCGR`.
    NotRelay,
    /// The token is not 64 hex digits.
    BadToken,
}

/// Checks a complete header (magic and token); the token on success.
pub fn parse_header(head: &[u8; 4 + TOKEN_LEN]) -> Result<String, HeaderError> {
    if &head[..4] != MAGIC {
        return Err(HeaderError::NotRelay);
    }
    let token = &head[4..];
    if !token.iter().all(u8::is_ascii_hexdigit) {
        return Err(HeaderError::BadToken);
    }
    // All ASCII: the conversion cannot fail.
    Ok(String::from_utf8_lossy(token).into_owned())
}

/// Accepts on `listener` until the task is aborted.
pub async fn run(listener: TcpListener, tokens: Tokens, stats: Arc<GateStats>) {
    let pending: Arc<Mutex<VecDeque<(u64, AbortHandle)>>> = Default::default();
    let logger = tokio::spawn(summarise(tokens.clone(), stats.clone()).in_current_span());
    let _stop_logger = AbortOnDrop(logger.abort_handle());
    let mut next_id = 0u64;
    let mut errors = qcg_proto::limits::AcceptErrors::new("relay gate");
    loop {
        let (s, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors and the like: wait rather than spin, and say so
                // once per interval.
                tokio::time::sleep(errors.failed(&e, std::time::Instant::now())).await;
                continue;
            }
        };
        errors.flush(std::time::Instant::now());
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        let id = next_id;
        next_id += 1;
        let (p, st, t) = (pending.clone(), stats.clone(), tokens.clone());
        // Listed before the task can end (its `Done` waits for this lock).
        let mut q = lock(&pending);
        let span = tracing::error_span!("conn", %peer);
        let task = tokio::spawn(
            async move {
                let _done = Done(p, st.clone(), id);
                handshake(s, t, &st).await;
            }
            .instrument(span),
        );
        q.push_back((id, task.abort_handle()));
        stats.pending.store(q.len() as u64, Ordering::Relaxed);
        while q.len() > MAX_PENDING {
            if let Some((_, oldest)) = q.pop_front() {
                oldest.abort();
                stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Takes a handshake off the pending list when it ends (done or aborted).
struct Done(
    Arc<Mutex<VecDeque<(u64, AbortHandle)>>>,
    Arc<GateStats>,
    u64,
);

impl Drop for Done {
    fn drop(&mut self) {
        let mut q = lock(&self.0);
        if let Some(i) = q.iter().position(|(id, _)| *id == self.2) {
            q.remove(i);
        }
        self.1.pending.store(q.len() as u64, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn handshake(mut s: TcpStream, tokens: Tokens, stats: &GateStats) {
    let mut head = [0u8; 4 + TOKEN_LEN];
    let read = async {
        s.read_exact(&mut head[..4]).await?;
        if &head[..4] == WHOAMI {
            return Ok(None);
        }
        if &head[..4] != MAGIC {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        s.read_exact(&mut head[4..]).await.map(Some)
    };
    match tokio::time::timeout(FIRST_BYTES_DEADLINE, read).await {
        Ok(Ok(Some(_))) => {}
        Ok(Ok(None)) => {
            // A NAT check: the source address we see, then the end.
            if let Ok(peer) = s.peer_addr() {
                let line = format!("{peer}\n");
                let _ = tokio::time::timeout(
                    FIRST_BYTES_DEADLINE,
                    tokio::io::AsyncWriteExt::write_all(&mut s, line.as_bytes()),
                )
                .await;
            }
            return;
        }
        Ok(Err(_)) => {
            stats.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        Err(_) => {
            stats.timed_out.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    let token = match parse_header(&head) {
        Ok(t) => t,
        Err(_) => {
            stats.malformed.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let Ok(std) = s.into_std() else { return };
    if std.set_nonblocking(false).is_err() {
        return;
    }
    // Checking the token does not block; only a completed pair (two ends holding a
    // token the broker announced) gets a thread, for the life of its relay.
    if let Some((a, b)) = tokens.admit(std, token) {
        let relays = tokens.stats.clone();
        // The pair's span (this connection's, the second of the two): the thread
        // logs in it.
        let span = tracing::Span::current();
        let spawned = std::thread::Builder::new()
            .name("qcg-relay".into())
            .spawn(move || span.in_scope(|| crate::relay::relay(a, b, &relays)));
        if let Err(e) = spawned {
            stats.thread_failed.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "cannot start a relay thread");
        }
    }
}

/// One line per interval with what was refused in it.
async fn summarise(tokens: Tokens, stats: Arc<GateStats>) {
    let mut last = (0, 0, 0, 0);
    let mut tick = tokio::time::interval(LOG_INTERVAL);
    loop {
        tick.tick().await;
        let now = (
            stats.timed_out.load(Ordering::Relaxed),
            stats.dropped.load(Ordering::Relaxed),
            stats.malformed.load(Ordering::Relaxed),
            tokens.refused.load(Ordering::Relaxed),
        );
        if now != last {
            tracing::warn!(
                timed_out = now.0 - last.0,
                dropped_oldest = now.1 - last.1,
                not_relay = now.2 - last.2,
                bad_token = now.3 - last.3,
                interval_secs = LOG_INTERVAL.as_secs(),
                "relay connections refused"
            );
            last = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_checked() {
        let mut h = [b'a'; 4 + TOKEN_LEN];
        h[..4].copy_from_slice(MAGIC);
        assert_eq!(parse_header(&h), Ok("a".repeat(64)));
        h[10] = b'z';
        assert_eq!(parse_header(&h), Err(HeaderError::BadToken));
        h[0] = b'G';
        assert_eq!(parse_header(&h), Err(HeaderError::NotRelay));
    }
}
