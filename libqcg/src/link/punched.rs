//! Punched links (TCP simultaneous open): both ends dial each other from their
//! listeners' ports at once, through stateful firewalls and port-keeping NATs. Also
//! the outgoing dial from the listener's own port that Traversing TCP needs.

use super::CONNECT_TIMEOUT;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long the target of a simultaneous open waits before dialling.
pub(crate) const PUNCH_LAG: Duration = Duration::from_millis(30);

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

/// TCP simultaneous open: dial `to` from our listener's port, again and again until
/// the peer's SYN (sent at the same time toward us) lets one through.
pub(crate) fn punch(local: SocketAddr, to: SocketAddr) -> std::result::Result<TcpStream, String> {
    let until = Instant::now() + CONNECT_TIMEOUT;
    let mut last = String::from("no try");
    while Instant::now() < until {
        let left = until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(10));
        match dial_from(local, to, left) {
            Ok(s) => return Ok(s),
            Err(e) => {
                last = e.to_string();
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    Err(format!("simultaneous open failed: {last}"))
}
