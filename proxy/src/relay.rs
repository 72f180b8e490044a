//! Pairing connections that present the same token, and moving their bytes.
//!
//! A process opens a TCP connection to the proxy and sends `QCGR` and its token (64
//! hex digits). The token must have been announced by the broker, unexpired and not
//! used yet; anything else is closed at once. When both ends are there, each gets one
//! byte, `K`, and from then on the proxy moves bytes both ways with splice(2) (through
//! a pipe, without copying them into user space) until each side has closed.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first bytes a relayed connection sends.
pub const MAGIC: &[u8; 4] = b"QCGR";
/// First bytes of a "where do you see me from" request (a NAT check): the proxy
/// answers with the connection's source address as text, then closes.
pub const WHOAMI: &[u8; 4] = b"QCGW";
/// Token length, hex digits.
pub const TOKEN_LEN: usize = 64;

enum Slot {
    /// Announced, nobody arrived yet.
    Empty,
    /// One end is waiting.
    Waiting(TcpStream),
}

struct Expected {
    until: Instant,
    slot: Slot,
}

/// Tokens the broker announced.
#[derive(Clone, Default)]
pub struct Tokens {
    inner: Arc<Mutex<HashMap<String, Expected>>>,
    /// Relays made.
    pub paired: Arc<AtomicU64>,
    /// Connections refused.
    pub refused: Arc<AtomicU64>,
    /// What the relays in progress and past moved.
    pub stats: Arc<RelayStats>,
    /// Sockets of the relays in progress (to cut them when the proxy stops).
    live: Arc<Mutex<Vec<TcpStream>>>,
}

/// What the relays did, for metrics.
#[derive(Debug, Default)]
pub struct RelayStats {
    /// Bytes moved, both directions summed.
    pub bytes: AtomicU64,
    /// Relays in progress.
    pub open: AtomicU64,
    /// Relays that ended on an error (a reset or a failed splice), not a close.
    pub broken: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Tokens {
    /// The broker announces a token valid for `valid`.
    pub fn expect(&self, token: String, valid: Duration) {
        let mut t = lock(&self.inner);
        let now = Instant::now();
        t.retain(|_, e| e.until > now);
        t.insert(
            token,
            Expected {
                until: now + valid,
                slot: Slot::Empty,
            },
        );
    }

    /// Handles one incoming connection: reads its token and pairs it, or refuses it.
    /// (The proxy's door, [`crate::gate`], reads the header itself.)
    pub fn arrive(&self, mut s: TcpStream) {
        let mut head = [0u8; 4 + TOKEN_LEN];
        let read = s
            .set_read_timeout(Some(Duration::from_secs(5)))
            .and_then(|_| s.read_exact(&mut head[..4]))
            .and_then(|_| {
                if &head[..4] == MAGIC {
                    s.read_exact(&mut head[4..])
                } else {
                    Err(std::io::ErrorKind::InvalidData.into())
                }
            });
        match read
            .ok()
            .and_then(|_| crate::gate::parse_header(&head).ok())
        {
            Some(token) => self.arrive_with_token(s, token),
            None => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("relay connection refused: not a qcg relay request");
            }
        }
    }

    /// Pairs a connection that presented `token`, or refuses it (counted in
    /// `refused`; logged at debug level only: strangers get no line each).
    pub fn arrive_with_token(&self, s: TcpStream, token: String) {
        if let Some((a, b)) = self.admit(s, token) {
            relay(a, b, &self.stats);
        }
    }

    /// The pairing step alone, without blocking: a connection that presented
    /// `token` waits for its other end (`None`), is refused (`None`, counted), or
    /// completes a pair, returned to be relayed ([`relay`]).
    pub fn admit(&self, s: TcpStream, token: String) -> Option<(TcpStream, TcpStream)> {
        let refuse = |why: &str| {
            self.refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(why, "relay connection refused");
        };
        let other = {
            let mut t = lock(&self.inner);
            let now = Instant::now();
            match t.get_mut(&token) {
                None => None,
                Some(e) if e.until <= now => {
                    t.remove(&token);
                    None
                }
                Some(e) => match std::mem::replace(&mut e.slot, Slot::Empty) {
                    Slot::Empty => {
                        e.slot = Slot::Waiting(s);
                        return None;
                    }
                    Slot::Waiting(first) => {
                        // Single use: gone once paired.
                        t.remove(&token);
                        Some(first)
                    }
                },
            }
        };
        let Some(first) = other else {
            refuse("unknown, expired or already used token");
            return None;
        };
        self.paired.fetch_add(1, Ordering::Relaxed);
        {
            let mut live = lock(&self.live);
            live.retain(|s| s.peer_addr().is_ok());
            live.extend([first.try_clone(), s.try_clone()].into_iter().flatten());
        }
        Some((first, s))
    }

    /// Tokens announced and not used yet (expired ones included until the next
    /// announcement sweeps them).
    pub fn waiting(&self) -> usize {
        lock(&self.inner).len()
    }

    /// Cuts every relay in progress, as if the proxy had died: both ends of each see
    /// their link break.
    pub fn cut_all(&self) {
        for s in lock(&self.live).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        lock(&self.inner).clear();
    }
}

/// Relays between two paired connections until both have closed (blocks; the
/// caller gives it a thread of its own), counting in `stats`.
pub fn relay(a: TcpStream, b: TcpStream, stats: &Arc<RelayStats>) {
    stats.open.fetch_add(1, Ordering::Relaxed);
    pair(a, b, stats);
    stats.open.fetch_sub(1, Ordering::Relaxed);
}

fn pair(mut a: TcpStream, mut b: TcpStream, stats: &Arc<RelayStats>) {
    // No Nagle: the ends send small messages and wait for answers.
    let ok = a
        .set_read_timeout(None)
        .and_then(|_| b.set_read_timeout(None))
        .and_then(|_| a.set_nodelay(true))
        .and_then(|_| b.set_nodelay(true))
        .and_then(|_| a.write_all(b"K"))
        .and_then(|_| b.write_all(b"K"));
    if ok.is_err() {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
        return;
    }
    let (a2, b2) = match (a.try_clone(), b.try_clone()) {
        (Ok(x), Ok(y)) => (x, y),
        _ => return,
    };
    let s2 = stats.clone();
    // The other direction, in the same span.
    let span = tracing::Span::current();
    let t = std::thread::spawn(move || span.in_scope(|| pump(a2, b2, &s2)));
    pump(b, a, stats);
    let _ = t.join();
}

/// Moves bytes from `src` to `dst` until `src` ends, then half-closes `dst`. On an
/// error both sockets are shut down, so that both processes see the link break
/// rather than wait or take a short stream for a complete one.
fn pump(src: TcpStream, dst: TcpStream, stats: &RelayStats) {
    match splice_all(&src, &dst, &stats.bytes) {
        Ok(()) => {
            let _ = dst.shutdown(Shutdown::Write);
        }
        Err(e) => {
            tracing::debug!(error = %e, "relay broke");
            stats.broken.fetch_add(1, Ordering::Relaxed);
            let _ = src.shutdown(Shutdown::Both);
            let _ = dst.shutdown(Shutdown::Both);
        }
    }
}

fn splice_all(src: &TcpStream, dst: &TcpStream, moved: &AtomicU64) -> nix::Result<()> {
    use nix::fcntl::{splice, SpliceFFlags};
    let (pr, pw) = nix::unistd::pipe()?;
    // Not SPLICE_F_MORE: it corks the outgoing socket, holding a small message back
    // for up to 200 ms in the hope of more.
    let flags = SpliceFFlags::SPLICE_F_MOVE;
    loop {
        let n = splice(src.as_fd(), None, pw.as_fd(), None, 1 << 20, flags)?;
        if n == 0 {
            return Ok(());
        }
        let mut left = n;
        while left > 0 {
            let m = splice(pr.as_fd(), None, dst.as_fd(), None, left, flags)?;
            if m == 0 {
                return Err(nix::errno::Errno::EPIPE);
            }
            left -= m;
            moved.fetch_add(m as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn proxy() -> (Tokens, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = Tokens::default();
        let t2 = t.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let t = t2.clone();
                std::thread::spawn(move || t.arrive(s));
            }
        });
        (t, addr)
    }

    fn present(addr: std::net::SocketAddr, token: &str) -> TcpStream {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(MAGIC).unwrap();
        s.write_all(token.as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    fn answered(s: &mut TcpStream) -> bool {
        let mut k = [0u8; 1];
        matches!(s.read(&mut k), Ok(1)) && k[0] == b'K'
    }

    #[test]
    fn pairs_once_and_moves_bytes_both_ways() {
        let (t, addr) = proxy();
        let tok = "a".repeat(64);
        t.expect(tok.clone(), Duration::from_secs(10));
        let mut a = present(addr, &tok);
        let mut b = present(addr, &tok);
        assert!(answered(&mut a) && answered(&mut b));
        let big: Vec<u8> = (0..5_000_000u32).map(|i| i as u8).collect();
        let big2 = big.clone();
        let mut a2 = a.try_clone().unwrap();
        let w = std::thread::spawn(move || {
            a2.write_all(&big2).unwrap();
            a2.shutdown(Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        w.join().unwrap();
        assert!(got == big);
        // The end of the stream came after the last splice was counted.
        assert_eq!(t.stats.bytes.load(Ordering::Relaxed), big.len() as u64);
        assert_eq!(t.stats.open.load(Ordering::Relaxed), 1);
        b.write_all(b"back").unwrap();
        let mut back = [0u8; 4];
        a.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"back");
        // Reused: refused (closed without the K).
        let mut c = present(addr, &tok);
        assert!(!answered(&mut c));
    }

    #[test]
    fn forged_and_expired_tokens_are_refused() {
        let (t, addr) = proxy();
        let mut f = present(addr, &"f".repeat(64));
        assert!(!answered(&mut f));
        let tok = "e".repeat(64);
        t.expect(tok.clone(), Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(20));
        let mut e = present(addr, &tok);
        assert!(!answered(&mut e));
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        junk.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(!answered(&mut junk));
        assert!(t.refused.load(Ordering::Relaxed) >= 3);
    }
}
