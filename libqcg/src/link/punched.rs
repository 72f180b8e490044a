//! Punched links (TCP simultaneous open): both ends dial each other from their
//! listeners' ports at once, through stateful firewalls and port-keeping NATs. Also
//! the outgoing dial from the listener's own port that Traversing TCP needs. The
//! dials themselves are non-blocking sockets of [`super::shell`]; here are their rules.
//!
//! Two ranks may dial each other at once, each running its own punch and the punch
//! the other's rendezvous asked of it: four sockets for one 4-tuple. On each side only
//! one of them can hold the tuple (the other's connect fails with "Cannot assign
//! requested address"), so a dial here waits while the tuple is taken and ends as soon
//! as a direct link to the peer exists, whichever socket made it. The connection the
//! two sides' sockets make has no caller and no callee: its handshake resolves the
//! roles by rank ([`crate::handshake::initiate_either`]).

use super::CONNECT_TIMEOUT;
use std::time::Duration;

/// How long the target of a simultaneous open waits before dialling.
pub(crate) const PUNCH_LAG: Duration = Duration::from_millis(30);

/// How long a punch's first SYN waits for an answer before a new one is sent. A SYN
/// that reached the other side's stateful firewall before the other side's SYN had
/// left is dropped; the kernel would send it again only after its initial RTO (1 s),
/// long after the relay started (a stagger, 250 ms). Each next try waits twice as
/// long, so a WAN slower than this still answers a later try.
pub(crate) const FIRST_TRY: Duration = Duration::from_millis(100);

/// How long try `n` (from 0) of a punch waits for its SYN's answer.
pub(crate) fn try_time(first: Duration, n: u32) -> Duration {
    first.saturating_mul(1u32 << n.min(16)).min(CONNECT_TIMEOUT)
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
}
