//! Punched links (TCP simultaneous open): both ends dial each other from their
//! listeners' ports at once, through stateful firewalls and port-keeping NATs. Also
//! the outgoing dial from the listener's own port that Traversing TCP needs.
//!
//! Two ranks may dial each other at once, each running its own punch and the punch
//! the other's rendezvous asked of it: four sockets for one 4-tuple. On each side only
//! one of them can hold the tuple (the other's connect fails with "Cannot assign
//! requested address"), so a dial here waits while the tuple is taken and ends as soon
//! as a direct link to the peer exists, whichever socket made it. The connection the
//! two sides' sockets make has no caller and no callee: its handshake resolves the
//! roles by rank ([`crate::handshake::initiate_either`]).

use super::CONNECT_TIMEOUT;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long the target of a simultaneous open waits before dialling.
pub(crate) const PUNCH_LAG: Duration = Duration::from_millis(30);

/// How long a punch's first SYN waits for an answer before a new one is sent. A SYN
/// that reached the other side's stateful firewall before the other side's SYN had
/// left is dropped; the kernel would send it again only after its initial RTO (1 s),
/// long after the relay started (a stagger, 250 ms). Each next try waits twice as
/// long, so a WAN slower than this still answers a later try.
pub(crate) const FIRST_TRY: Duration = Duration::from_millis(100);

/// Pause before dialling again after a refusal or while the 4-tuple is taken.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// How long try `n` (from 0) of a punch waits for its SYN's answer.
pub(crate) fn try_time(first: Duration, n: u32) -> Duration {
    first.saturating_mul(1u32 << n.min(16)).min(CONNECT_TIMEOUT)
}

/// A socket with SO_REUSEADDR and SO_REUSEPORT, so that punching and traversal can
/// dial out from the listener's own port.
fn reusable(addr: SocketAddr) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&addr.into())?;
    Ok(s)
}

/// Dials `to` from our listener's address and port.
pub(crate) fn dial_from(
    local: SocketAddr,
    to: SocketAddr,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let s = reusable(local)?;
    s.connect_timeout(&to.into(), timeout)?;
    Ok(s.into())
}

/// How a dial from our port ended.
pub(crate) enum FromOurPort {
    /// Our socket connected.
    Connected(TcpStream),
    /// `done` said to stop: a link to the peer exists (another of our sockets on the
    /// same 4-tuple made it), or nobody needs one any more.
    Done,
}

/// What a dial from our port is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dial {
    /// A simultaneous open: new SYNs until one passes, again after a refusal (the
    /// other side's firewall or NAT may not be open for us yet).
    Punch,
    /// Traversing TCP: one SYN, captured and injected at the target, waits for its
    /// answer; a refusal ends it.
    Traverse,
}

/// Dials `to` from our listener's port until it connects, `done` says to stop, or
/// [`CONNECT_TIMEOUT`] passes: tries of [`try_time`] (from [`FIRST_TRY`] for a punch,
/// each sending a new SYN; one for a traversal), and again while the 4-tuple is
/// taken by another of our sockets (it is the one that will make the link).
pub(crate) fn from_our_port(
    local: SocketAddr,
    to: SocketAddr,
    dial: Dial,
    done: &dyn Fn() -> bool,
) -> std::result::Result<FromOurPort, String> {
    let first = match dial {
        Dial::Punch => FIRST_TRY,
        Dial::Traverse => CONNECT_TIMEOUT,
    };
    let until = Instant::now() + CONNECT_TIMEOUT;
    let mut last = String::from("no try");
    let mut n = 0;
    while Instant::now() < until {
        if done() {
            return Ok(FromOurPort::Done);
        }
        let left = until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(10));
        match dial_from(local, to, try_time(first, n).min(left)) {
            Ok(s) => return Ok(FromOurPort::Connected(s)),
            Err(e) => {
                last = super::io_error(&e, "connect", try_time(first, n).min(left));
                match e.kind() {
                    // Unanswered: send a new SYN at once.
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => n += 1,
                    // Our other socket holds the 4-tuple.
                    std::io::ErrorKind::AddrNotAvailable => std::thread::sleep(RETRY_PAUSE),
                    _ if dial == Dial::Punch => std::thread::sleep(RETRY_PAUSE),
                    _ => return Err(last),
                }
            }
        }
    }
    if done() {
        return Ok(FromOurPort::Done);
    }
    Err(format!("simultaneous open failed: {last}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_try_waits_twice_the_last_up_to_the_connect_time_out() {
        let ms = |n| try_time(FIRST_TRY, n).as_millis();
        assert_eq!([ms(0), ms(1), ms(2), ms(3)], [100, 200, 400, 800]);
        assert_eq!(try_time(FIRST_TRY, 40), CONNECT_TIMEOUT);
        // A traversal's single SYN: one try for the whole time.
        assert_eq!(try_time(CONNECT_TIMEOUT, 0), CONNECT_TIMEOUT);
    }

    #[test]
    fn a_punch_stops_when_told_even_while_refused_and_a_refused_traversal_ends() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        drop(l);
        let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
        // Told at once: no dial at all.
        assert!(matches!(
            from_our_port(local, to, Dial::Punch, &|| true),
            Ok(FromOurPort::Done)
        ));
        // Refused: it dials again until told to stop.
        let calls = std::cell::Cell::new(0);
        let stop = || {
            calls.set(calls.get() + 1);
            calls.get() > 5
        };
        assert!(matches!(
            from_our_port(local, to, Dial::Punch, &stop),
            Ok(FromOurPort::Done)
        ));
        assert!(calls.get() > 5);
        // A traversal refused ends at once, naming the refusal.
        match from_our_port(local, to, Dial::Traverse, &|| false) {
            Err(e) => assert!(e.contains("refused"), "{e}"),
            Ok(_) => panic!("a refused traversal connected"),
        }
    }
}
