//! The one module that handles raw packets (Traversing TCP): capturing a process's
//! outgoing SYN, and injecting a SYN that arrived through the broker into this node's
//! IP stack. Needs root (CAP_NET_RAW). Built on socket2's safe API; no `unsafe` here
//! either.

use qcg_proto::packet;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{self, Read};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Every protocol: only such taps see outgoing packets (a tap bound to IPv4 alone
/// sees incoming ones only).
const ETH_P_ALL: u16 = 0x0003;

/// A socket that sees every packet of every interface of this namespace, outgoing
/// ones included, without link-layer headers (non-IPv4 ones are skipped when read).
pub fn capture_socket() -> io::Result<Socket> {
    Socket::new(
        Domain::PACKET,
        Type::DGRAM,
        Some(Protocol::from(i32::from(ETH_P_ALL.to_be()))),
    )
}

/// Waits until `timeout` for a SYN from `local` to `remote` and returns the packet.
pub fn capture_syn(
    mut sock: Socket,
    local: SocketAddr,
    remote: SocketAddr,
    timeout: Duration,
) -> io::Result<Option<Vec<u8>>> {
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 65536];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        sock.set_read_timeout(Some(left))?;
        let n = match sock.read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let p = &buf[..n];
        if let Some(syn) = packet::parse_syn(p) {
            if syn.dst == remote && syn.src.port() == local.port() {
                return Ok(Some(p.to_vec()));
            }
        }
    }
}

/// Sends an IPv4 packet, headers included, into this namespace's stack, as if it
/// had arrived for its destination.
pub fn inject(p: &[u8]) -> io::Result<()> {
    let syn = packet::parse_syn(p)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IPv4 TCP SYN"))?;
    // A SYN captured on its way out usually carries no TCP checksum yet (the kernel
    // leaves it to the NIC, or to nobody on a veth): compute both checksums, or the
    // target's stack would drop the packet.
    let mut p = p.to_vec();
    packet::fix_checksums(&mut p)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "truncated SYN"))?;
    let p = &p[..];
    let sock = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255)))?;
    sock.send_to(p, &SockAddr::from(syn.dst))?;
    Ok(())
}
