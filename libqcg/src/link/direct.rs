//! Direct and port-range links: the target's listener is reachable, so dial it. And
//! the listener every process binds, inside the cluster's open port range when it has
//! one.

use crate::error::{Error, Result};
use qcg_wire::Policy;
use std::net::{IpAddr, SocketAddr, TcpListener};

/// Our listener. It binds without SO_REUSEPORT, so it only gets a port nobody uses
/// (no second listener can share it), and turns SO_REUSEPORT on afterwards so our own
/// outgoing sockets can dial from the same port.
fn listen_on(addr: IpAddr, port: u16) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let a = SocketAddr::new(addr, port);
    let s = Socket::new(Domain::for_address(a), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&a.into())?;
    s.set_reuse_port(true)?;
    s.listen(1024)?;
    Ok(s.into())
}

pub(crate) fn bind(addr: IpAddr, policy: &Policy, rank: u32) -> Result<TcpListener> {
    match *policy {
        Policy::PortRange { lo, hi } => {
            let width = u32::from(hi - lo) + 1;
            // Start at a rank-dependent port so a node's processes do not all race
            // for the first one.
            let start = (rank + std::process::id()) % width;
            for i in 0..width {
                let port = lo + ((start + i) % width) as u16;
                if let Ok(l) = listen_on(addr, port) {
                    return Ok(l);
                }
            }
            Err(Error::Bind {
                addr: format!("{addr}:{lo}-{hi}"),
                message: "every port of the cluster's open range is in use".into(),
            })
        }
        _ => listen_on(addr, 0).map_err(|e| Error::Bind {
            addr: format!("{addr}:0"),
            message: e.to_string(),
        }),
    }
}
