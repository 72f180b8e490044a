//! Small traffic tools run inside the lab's namespaces (hidden `qcg-lab` subcommands),
//! so `check` and the tests need nothing but `qcg-lab` itself.
//!
//! - `serve`: TCP and UDP on some ports. A TCP client is first told `peer IP:PORT`
//!   (the address the server sees, which shows NAT); whatever it then sends is counted,
//!   and at its end of stream the server answers with the goodput it measured. UDP
//!   datagrams are echoed.
//! - `connect`: one TCP connection (optionally from a fixed port); prints what the
//!   server saw. Exit 0 connected, 3 timed out, 4 refused.
//! - `source`: a bulk TCP transfer for some seconds; prints the server's measure.
//! - `rtt`: UDP echo round trips; prints min, median and max.

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// Exit status of `connect` when the connection timed out.
pub const EXIT_TIMEOUT: i32 = 3;
/// Exit status of `connect` when the connection was refused.
pub const EXIT_REFUSED: i32 = 4;

/// How long after its first byte a bulk transfer starts being measured (slow start).
pub const WARMUP: Duration = Duration::from_millis(700);

/// Serves TCP and UDP on `ports` for `duration`, then exits. Prints `listening` once
/// every socket is bound.
pub fn serve(ports: &[u16], duration: Duration) -> std::io::Result<()> {
    let mut listeners = Vec::new();
    let mut udps = Vec::new();
    for &p in ports {
        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, p));
        listeners.push(TcpListener::bind(addr)?);
        udps.push(UdpSocket::bind(addr)?);
    }
    for l in listeners {
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = serve_tcp(s);
                });
            }
        });
    }
    for u in udps {
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while let Ok((n, from)) = u.recv_from(&mut buf) {
                let _ = u.send_to(&buf[..n], from);
            }
        });
    }
    println!("listening");
    std::io::stdout().flush()?;
    std::thread::sleep(duration);
    Ok(())
}

fn serve_tcp(mut s: TcpStream) -> std::io::Result<()> {
    let peer = s.peer_addr()?;
    s.write_all(format!("peer {peer}\n").as_bytes())?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut buf = vec![0u8; 256 * 1024];
    let (mut total, mut first, mut mark) = (0u64, None::<Instant>, None::<(Instant, u64)>);
    loop {
        let n = s.read(&mut buf)?;
        let now = Instant::now();
        if n == 0 {
            let (t_mark, b_mark) = mark.unwrap_or((first.unwrap_or(now), 0));
            let secs = now.duration_since(t_mark).as_secs_f64();
            let bytes = total - b_mark;
            s.write_all(
                format!("received {total} window_bytes {bytes} window_secs {secs:.6}\n").as_bytes(),
            )?;
            return Ok(());
        }
        total += n as u64;
        let t0 = *first.get_or_insert(now);
        if mark.is_none() && now.duration_since(t0) >= WARMUP {
            mark = Some((now, total));
        }
    }
}

/// How a `connect` ended.
#[derive(Debug)]
pub enum Connect {
    /// Connected; the server saw this address.
    Seen(String),
    /// No answer in time.
    Timeout,
    /// Refused.
    Refused,
}

/// Connects to `to`, from port `from_port` if given, within `timeout`.
pub fn connect(
    to: SocketAddr,
    from_port: Option<u16>,
    timeout: Duration,
) -> std::io::Result<Connect> {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    if let Some(p) = from_port {
        sock.set_reuse_address(true)?;
        sock.bind(&SockAddr::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, p)))?;
    }
    match sock.connect_timeout(&SockAddr::from(to), timeout) {
        Ok(()) => {}
        Err(e)
            if e.kind() == std::io::ErrorKind::TimedOut
                || e.kind() == std::io::ErrorKind::WouldBlock =>
        {
            return Ok(Connect::Timeout)
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(Connect::Refused),
        Err(e) => return Err(e),
    }
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(timeout.max(Duration::from_secs(2))))?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    Ok(Connect::Seen(
        line.trim()
            .strip_prefix("peer ")
            .unwrap_or(line.trim())
            .to_string(),
    ))
}

/// Sends zeros to `to` for `secs`; returns the server's goodput in Mbit/s over the
/// measured window and the bytes sent.
pub fn source(to: SocketAddr, secs: f64) -> std::io::Result<(f64, u64)> {
    let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let buf = vec![0u8; 128 * 1024];
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut sent = 0u64;
    while Instant::now() < end {
        s.write_all(&buf)?;
        sent += buf.len() as u64;
    }
    s.shutdown(std::net::Shutdown::Write)?;
    line.clear();
    r.read_line(&mut line)?;
    let field = |k: &str| -> Option<f64> {
        let mut it = line.split_whitespace();
        while let Some(w) = it.next() {
            if w == k {
                return it.next()?.parse().ok();
            }
        }
        None
    };
    match (field("window_bytes"), field("window_secs")) {
        (Some(b), Some(t)) if t > 0.0 => Ok((b * 8.0 / t / 1e6, sent)),
        _ => Err(std::io::Error::other(format!(
            "the server's answer `{}` has no measure",
            line.trim()
        ))),
    }
}

/// Round-trip times of UDP echoes, in milliseconds: (min, median, max, lost).
pub fn rtt(to: SocketAddr, count: usize, gap: Duration) -> std::io::Result<(f64, f64, f64, usize)> {
    let u = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    u.connect(to)?;
    u.set_read_timeout(Some(Duration::from_secs(1)))?;
    let mut times = Vec::new();
    let mut lost = 0;
    let mut buf = [0u8; 64];
    for seq in 0..count as u32 {
        let t0 = Instant::now();
        u.send(&seq.to_be_bytes())?;
        loop {
            match u.recv(&mut buf) {
                Ok(4) if buf[..4] == seq.to_be_bytes() => {
                    times.push(t0.elapsed().as_secs_f64() * 1e3);
                    break;
                }
                Ok(_) => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    lost += 1;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        std::thread::sleep(gap);
    }
    if times.is_empty() {
        return Err(std::io::Error::other(format!(
            "no echo from {to} in {count} tries"
        )));
    }
    times.sort_by(f64::total_cmp);
    let (min, max) = (times[0], times[times.len() - 1]);
    Ok((min, times[times.len() / 2], max, lost))
}
