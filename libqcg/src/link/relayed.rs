//! Relayed links: both ends meet at a proxy the broker paired them on.

use super::{CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// Meets the peer at a relay proxy: presents the token and waits for the pairing.
pub(crate) fn meet(proxy: SocketAddr, token: &str) -> std::result::Result<TcpStream, String> {
    let mut s = TcpStream::connect_timeout(&proxy, CONNECT_TIMEOUT)
        .map_err(|e| format!("proxy {proxy}: {e}"))?;
    s.write_all(b"QCGR")
        .and_then(|_| s.write_all(token.as_bytes()))
        .map_err(|e| format!("proxy {proxy}: {e}"))?;
    s.set_read_timeout(Some(CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut k = [0u8; 1];
    match s.read(&mut k) {
        Ok(1) if k[0] == b'K' => Ok(s),
        Ok(_) => Err(format!("proxy {proxy} refused the token")),
        Err(e) => Err(format!(
            "proxy {proxy}: no pairing: {}",
            super::io_error(
                &e,
                "waiting for the peer",
                CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT
            )
        )),
    }
}
