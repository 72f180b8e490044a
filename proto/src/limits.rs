//! What a stranger can make a service hold, bounded the same way in every service:
//! the process's descriptor limit raised to its hard limit at start
//! ([`raise_nofile`]), an accept loop that pauses when the process is out of
//! descriptors and says so once per interval, never once per failure
//! ([`AcceptErrors`]), and caps on the connections open per peer (an address, or a
//! uid on a unix socket) and in total ([`Caps`]).
//!
//! Why all three: a listener whose accept fails with `EMFILE` stays readable, so a
//! loop that retries at once spins a core and, logging each failure, fills the disk;
//! and without caps, whoever opens connections fastest takes every descriptor, so
//! the requests of everyone else get no answer. With caps below the descriptor
//! limit, one peer holds at most its share and the accept loop keeps working.
//!
//! ```
//! use qcg_proto::limits::{Caps, Refusal};
//! let caps = Caps::new(2, 3);
//! let a1 = caps.try_open("10.0.0.1").unwrap();
//! let _a2 = caps.try_open("10.0.0.1").unwrap();
//! assert_eq!(caps.try_open("10.0.0.1").err(), Some(Refusal::Peer));
//! let _b = caps.try_open("10.0.0.2").unwrap();
//! assert_eq!(caps.try_open("10.0.0.3").err(), Some(Refusal::Total));
//! drop(a1);
//! assert!(caps.try_open("10.0.0.3").is_ok());
//! ```

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a repeated failure or refusal is summed up in the log.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);
/// How long an accept loop waits after the process ran out of descriptors (or
/// memory) before it tries again.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the soft limit now in
/// force. Logs the figure at debug (a service's one start-up line at info is its
/// "serving" line), and a warning when the limit cannot be raised.
pub fn raise_nofile(service: &str) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let was = getrlimit(Resource::Nofile);
    let mut now = was.current;
    if was.current != was.maximum {
        let want = Rlimit {
            current: was.maximum,
            maximum: was.maximum,
        };
        match setrlimit(Resource::Nofile, want) {
            Ok(()) => now = was.maximum,
            Err(e) => {
                tracing::warn!(service, error = %e, "cannot raise the descriptor limit")
            }
        }
    }
    // `None` is "unlimited", which Linux does not allow for descriptors anyway.
    let figure = now.unwrap_or(u64::from(u32::MAX));
    tracing::debug!(service, descriptors = figure, "descriptor limit");
    figure
}

/// The soft `RLIMIT_NOFILE` in force.
pub fn nofile() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::from(u32::MAX))
}

/// Counts repeated events of one kind and says when to log a summary: the first
/// event after a quiet interval at once, later ones summed up at most once per
/// [`LOG_INTERVAL`]. Pure: time is an argument.
#[derive(Debug, Default)]
pub struct Tally {
    count: u64,
    last: String,
    logged: Option<Instant>,
}

impl Tally {
    /// No events yet (usable in a `static`).
    pub const fn new() -> Tally {
        Tally {
            count: 0,
            last: String::new(),
            logged: None,
        }
    }

    /// Records one event described by `what`; `Some((count, last))` when a line is
    /// due now: the events since the last line and the description of the latest.
    pub fn note(&mut self, what: impl std::fmt::Display, now: Instant) -> Option<(u64, String)> {
        self.count += 1;
        self.last = what.to_string();
        self.due(now)
    }

    /// `Some((count, last))` when events are waiting and the interval has passed
    /// (call it now and then, so that the last events of a burst are told too).
    pub fn due(&mut self, now: Instant) -> Option<(u64, String)> {
        if self.count == 0 {
            return None;
        }
        if self
            .logged
            .is_some_and(|t| now.duration_since(t) < LOG_INTERVAL)
        {
            return None;
        }
        self.logged = Some(now);
        let n = std::mem::take(&mut self.count);
        Some((n, std::mem::take(&mut self.last)))
    }
}

/// An accept loop's failures: how long to pause after each, and one log line per
/// [`LOG_INTERVAL`] at most.
#[derive(Debug)]
pub struct AcceptErrors {
    what: &'static str,
    tally: Tally,
}

impl AcceptErrors {
    /// For the listener described by `what` (e.g. "HTTPS API").
    pub fn new(what: &'static str) -> AcceptErrors {
        AcceptErrors {
            what,
            tally: Tally::default(),
        }
    }

    /// Records a failed accept; returns how long to wait before the next one. A
    /// connection the peer already reset costs no pause; running out of
    /// descriptors, memory or anything else pauses [`ACCEPT_PAUSE`].
    pub fn failed(&mut self, e: &std::io::Error, now: Instant) -> Duration {
        use std::io::ErrorKind::*;
        if matches!(
            e.kind(),
            ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
        ) {
            return Duration::ZERO;
        }
        if let Some((n, last)) = self.tally.note(e, now) {
            self.log(n, &last);
        }
        ACCEPT_PAUSE
    }

    /// Tells the failures not yet told, once the interval has passed (call it after
    /// a successful accept).
    pub fn flush(&mut self, now: Instant) {
        if let Some((n, last)) = self.tally.due(now) {
            self.log(n, &last);
        }
    }

    fn log(&self, n: u64, last: &str) {
        tracing::warn!(
            listener = self.what,
            failures = n,
            error = %last,
            "{} accept failed {n} times in the last {} s: {last}; pausing {} ms after each",
            self.what,
            LOG_INTERVAL.as_secs(),
            ACCEPT_PAUSE.as_millis()
        );
    }
}

/// Records an event of a kind strangers can repeat at will (a failed handshake, a
/// bad frame) in `tally` and logs `message` with the count and the latest
/// description, at most once per [`LOG_INTERVAL`].
pub fn warn_summed(tally: &Mutex<Tally>, message: &'static str, what: impl std::fmt::Display) {
    if let Some((n, last)) = lock(tally).note(what, Instant::now()) {
        tracing::warn!(count = n, last = %last, "{message}: {n} since the last report; last: {last}");
    }
}

/// Why [`Caps::try_open`] refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// This peer already holds its share.
    Peer,
    /// The service holds as many connections as it takes.
    Total,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Peer => "too many connections from this peer",
            Refusal::Total => "too many connections in total",
        })
    }
}

struct Open<K> {
    per_peer: usize,
    total: usize,
    by_peer: HashMap<K, usize>,
    sum: usize,
    refused: Tally,
    counts: Counts,
}

/// What a [`Caps`] did since it was made, for metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Connections open now.
    pub open: usize,
    /// Connections taken.
    pub accepted: u64,
    /// Connections refused because their peer held its share.
    pub refused_peer: u64,
    /// Connections refused because the service held as many as it takes.
    pub refused_total: u64,
}

/// Caps on the connections open at once, per peer `K` and in total. Cloning shares
/// the count.
pub struct Caps<K: Hash + Eq + Clone> {
    open: Arc<Mutex<Open<K>>>,
}

impl<K: Hash + Eq + Clone> Clone for Caps<K> {
    fn clone(&self) -> Self {
        Caps {
            open: self.open.clone(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<K: Hash + Eq + Clone> Caps<K> {
    /// At most `per_peer` connections per peer and `total` in all (each at least 1).
    pub fn new(per_peer: usize, total: usize) -> Caps<K> {
        Caps {
            open: Arc::new(Mutex::new(Open {
                per_peer: per_peer.max(1),
                total: total.max(1),
                by_peer: HashMap::new(),
                sum: 0,
                refused: Tally::default(),
                counts: Counts::default(),
            })),
        }
    }

    /// Caps sized from the descriptor limit `nofile`: `share` of it in total (at
    /// most `ceiling`), a quarter of that per peer. The rest stays free for the
    /// service's own files and its other listeners.
    pub fn sized(nofile: u64, share: f64, ceiling: usize) -> Caps<K> {
        let total = ((nofile as f64 * share) as usize).clamp(4, ceiling.max(4));
        Caps::new(total / 4, total)
    }

    /// A place for one more connection of `peer`, held until the permit is dropped.
    pub fn try_open(&self, peer: K) -> Result<Permit<K>, Refusal> {
        let mut o = lock(&self.open);
        if o.sum >= o.total {
            o.counts.refused_total += 1;
            return Err(Refusal::Total);
        }
        let per_peer = o.per_peer;
        let n = o.by_peer.entry(peer.clone()).or_insert(0);
        if *n >= per_peer {
            o.counts.refused_peer += 1;
            return Err(Refusal::Peer);
        }
        *n += 1;
        o.sum += 1;
        o.counts.accepted += 1;
        Ok(Permit {
            open: self.open.clone(),
            peer: Some(peer),
        })
    }

    /// Records a refusal described by `what`; `Some((count, last))` when a summary
    /// line is due (see [`Tally`]).
    pub fn refused(&self, what: impl std::fmt::Display, now: Instant) -> Option<(u64, String)> {
        lock(&self.open).refused.note(what, now)
    }

    /// (per peer, total) caps.
    pub fn limits(&self) -> (usize, usize) {
        let o = lock(&self.open);
        (o.per_peer, o.total)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        lock(&self.open).sum
    }

    /// Open, taken and refused connections, for metrics.
    pub fn counts(&self) -> Counts {
        let o = lock(&self.open);
        Counts {
            open: o.sum,
            ..o.counts
        }
    }
}

/// One open connection's place in its [`Caps`]; freed on drop.
pub struct Permit<K: Hash + Eq + Clone> {
    open: Arc<Mutex<Open<K>>>,
    peer: Option<K>,
}

impl<K: Hash + Eq + Clone> Drop for Permit<K> {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let mut o = lock(&self.open);
        o.sum = o.sum.saturating_sub(1);
        if let Some(n) = o.by_peer.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                o.by_peer.remove(&peer);
            }
        }
    }
}

/// Admits a connection of `peer` under `caps`, or logs the refusal (summed up per
/// interval) and returns `None`: the caller then drops the connection at once.
pub fn admit<K: Hash + Eq + Clone + std::fmt::Display>(
    caps: &Caps<K>,
    listener: &'static str,
    peer: K,
) -> Option<Permit<K>> {
    match caps.try_open(peer.clone()) {
        Ok(p) => Some(p),
        Err(why) => {
            let (per_peer, total) = caps.limits();
            if let Some((n, last)) = caps.refused(format!("{peer}: {why}"), Instant::now()) {
                tracing::warn!(
                    listener,
                    refused = n,
                    last = %last,
                    per_peer,
                    total,
                    "{listener} refused {n} connections over its caps ({per_peer} per peer, \
                     {total} in all) in the last {} s; last: {last}",
                    LOG_INTERVAL.as_secs()
                );
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_makes_one_line_per_interval() {
        let t0 = Instant::now();
        let mut t = Tally::default();
        assert_eq!(t.note("a", t0), Some((1, "a".into())));
        let mut lines = 0;
        for i in 1..=10_000u64 {
            if t.note("b", t0 + Duration::from_millis(i)).is_some() {
                lines += 1;
            }
        }
        // 10 s of failures, one per millisecond: one more line, at the 10 s mark.
        assert_eq!(lines, 1);
        assert_eq!(t.due(t0 + Duration::from_secs(11)), None);
        t.note("c", t0 + Duration::from_secs(12));
        assert_eq!(t.due(t0 + Duration::from_secs(15)), None);
        assert_eq!(t.due(t0 + Duration::from_secs(21)), Some((1, "c".into())));
    }

    #[test]
    fn out_of_descriptors_pauses_and_a_reset_does_not() {
        let mut a = AcceptErrors::new("test");
        let now = Instant::now();
        let emfile = std::io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        assert_eq!(a.failed(&emfile, now), ACCEPT_PAUSE);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(a.failed(&reset, now), Duration::ZERO);
    }

    #[test]
    fn caps_count_per_peer_and_in_total() {
        let caps: Caps<u32> = Caps::new(2, 3);
        let a = caps.try_open(1).unwrap();
        let b = caps.try_open(1).unwrap();
        assert_eq!(caps.try_open(1).err(), Some(Refusal::Peer));
        let c = caps.try_open(2).unwrap();
        assert_eq!(caps.try_open(3).err(), Some(Refusal::Total));
        assert_eq!(caps.open(), 3);
        drop((a, b, c));
        assert_eq!(caps.open(), 0);
        assert!(lock(&caps.open).by_peer.is_empty());
        let s: Caps<u32> = Caps::sized(512, 0.125, 4096);
        assert_eq!(s.limits(), (16, 64));
        let s: Caps<u32> = Caps::sized(1 << 20, 0.5, 4096);
        assert_eq!(s.limits(), (1024, 4096));
    }
}
