//! Fuzzing the proxy's token handshake: arbitrary and mutated headers to the
//! header check, and the regression corpus in `fuzz/corpus/proxy/` sent to a running
//! proxy's door, which refuses each and still pairs a real token afterwards.
//!
//! More cases: `PROPTEST_CASES=100000 cargo test -p qcg-proxy --test fuzz_door`.

use anyhow::{ensure, Result};
use proptest::prelude::*;
use qcg_proto::tls::{Ca, Role};
use qcg_proxy::gate::parse_header;
use qcg_proxy::relay::{MAGIC, TOKEN_LEN};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

proptest! {
    #[test]
    fn arbitrary_headers_are_checked_without_panic(bytes in prop::array::uniform32(any::<u8>()), rest in prop::collection::vec(any::<u8>(), 36)) {
        let mut head = [0u8; 4 + TOKEN_LEN];
        head[..32].copy_from_slice(&bytes);
        head[32..].copy_from_slice(&rest);
        let r = parse_header(&head);
        prop_assert_eq!(r.is_ok(), &head[..4] == MAGIC && head[4..].iter().all(u8::is_ascii_hexdigit));
    }

    #[test]
    fn mutated_good_headers_are_checked_without_panic(i in 0usize..(4 + TOKEN_LEN), b in any::<u8>()) {
        let mut head = [b'a'; 4 + TOKEN_LEN];
        head[..4].copy_from_slice(MAGIC);
        head[i] = b;
        let ok = parse_header(&head).is_ok();
        prop_assert_eq!(ok, if i < 4 { b == MAGIC[i] } else { b.is_ascii_hexdigit() });
    }
}

/// A proxy on loopback whose broker is not there (its door works without one).
fn start_proxy(rt: &tokio::runtime::Runtime) -> Result<qcg_proxy::Proxy> {
    let ca = Ca::generate()?;
    Ok(rt.block_on(qcg_proxy::Proxy::start(
        ca.identity(Role::Proxy, "p")?,
        "127.0.0.1:0".parse()?,
        None,
        "127.0.0.1:9".parse()?,
    ))?)
}

#[test]
fn the_corpus_is_refused_by_a_running_proxy_which_keeps_pairing() -> Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    let proxy = start_proxy(&rt)?;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/proxy");
    let mut n = 0;
    for e in std::fs::read_dir(&dir)? {
        let bytes = std::fs::read(e?.path())?;
        let mut s = TcpStream::connect(proxy.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut k = [0u8; 1];
        // Closed without the pairing byte.
        ensure!(!matches!(s.read(&mut k), Ok(1)), "corpus input was paired");
        n += 1;
    }
    ensure!(n >= 3, "corpus has {n} files");
    let token = "0f".repeat(32);
    proxy.tokens.expect(token.clone(), Duration::from_secs(60));
    let mut ends = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(proxy.addr)?;
        s.write_all(MAGIC)?;
        s.write_all(token.as_bytes())?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        ends.push(s);
    }
    for s in &mut ends {
        let mut k = [0u8; 1];
        s.read_exact(&mut k)?;
        ensure!(&k == b"K");
    }
    proxy.kill();
    Ok(())
}

/// A NAT check (`QCGW`): the proxy says from which address it sees the connection,
/// and nothing more; a stranger learns only its own address.
#[test]
fn the_door_tells_a_nat_check_where_it_comes_from() -> Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    let proxy = start_proxy(&rt)?;
    let mut s = TcpStream::connect(proxy.addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(qcg_proxy::relay::WHOAMI)?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    ensure!(
        answer == format!("{}\n", s.local_addr()?),
        "answered {answer:?}"
    );
    Ok(())
}
