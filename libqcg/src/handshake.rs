//! The handshake at the start of every link: both ends prove they hold the job's
//! secret, without sending it.
//!
//! ```text
//! initiator → acceptor   HELLO   "QCGL" v1 | job len u16 | job | from rank u32 | to rank u32 | nonce_i[32]
//! acceptor  → initiator  PROOF   "QCGL" | nonce_a[32] | HMAC(secret, "accept"   | transcript)
//! initiator → acceptor   PROOF   HMAC(secret, "initiate" | transcript)
//! acceptor  → initiator  1 byte: 1 = link accepted
//! ```
//! The transcript binds the job, both ranks and both nonces, so a proof cannot be
//! replayed on another link. A link is used only after the last byte arrives: a
//! connection whose handshake did not complete is never taken for a link.
//!
//! A connection made by a simultaneous open (punched, traversed) has no caller and
//! no callee: both ends may have dialled, and neither knows whether the other took
//! the initiator's part. Both ends then [`initiate_either`]: each sends its HELLO, and
//! one that reads a HELLO where the PROOF was due has met a role conflict, which the
//! ranks resolve as ICE's tie-breaker does: the lower rank stays the initiator (and
//! skips the other's HELLO), the higher answers that HELLO as the acceptor. Against an
//! acceptor (a listener) it is the initiator's part. A plain [`initiate`] must not
//! meet it: those dial listeners (direct, connect-back) or a relay's callee.

use ring::hmac;
use std::io::{Read, Write};

const MAGIC: &[u8; 4] = b"QCGL";
const VERSION: u8 = 1;
/// Longest job id accepted in a HELLO.
pub const MAX_JOB: usize = 256;

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// Not a qcg link (a stranger, a port scanner, another program).
    #[error("not a qcg link (bad magic or version)")]
    NotQcg,
    /// A peer of another job.
    #[error("peer belongs to job `{0}`")]
    OtherJob(String),
    /// The peer asked for another rank than ours.
    #[error("peer asked for rank {asked}, this is rank {ours}")]
    WrongRank {
        /// Rank asked for.
        asked: u32,
        /// Our rank.
        ours: u32,
    },
    /// A rank outside the job.
    #[error("peer claims rank {0}, outside the job")]
    BadRank(u32),
    /// The proof does not match: the peer does not hold the job's secret.
    #[error("peer failed to prove it holds the job's secret")]
    BadProof,
    /// The acceptor refused.
    #[error("peer refused the link")]
    Refused,
    /// The connection failed or timed out.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn transcript(job: &str, from: u32, to: u32, ni: &[u8; 32], na: &[u8; 32]) -> Vec<u8> {
    let mut t = Vec::with_capacity(job.len() + 80);
    t.extend_from_slice(&(job.len() as u16).to_be_bytes());
    t.extend_from_slice(job.as_bytes());
    t.extend_from_slice(&from.to_be_bytes());
    t.extend_from_slice(&to.to_be_bytes());
    t.extend_from_slice(ni);
    t.extend_from_slice(na);
    t
}

fn proof(secret: &[u8; 32], label: &[u8], t: &[u8]) -> hmac::Tag {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(label);
    ctx.update(t);
    ctx.sign()
}

fn check(secret: &[u8; 32], label: &[u8], t: &[u8], got: &[u8]) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut msg = label.to_vec();
    msg.extend_from_slice(t);
    hmac::verify(&key, &msg, got).is_ok()
}

fn nonce() -> [u8; 32] {
    use ring::rand::SecureRandom;
    let mut n = [0u8; 32];
    // The system RNG failing is not something a process can recover from.
    ring::rand::SystemRandom::new()
        .fill(&mut n)
        .expect("system random number generator");
    n
}

fn hello(job: &str, from: u32, to: u32, ni: &[u8; 32]) -> Vec<u8> {
    let mut hello = Vec::with_capacity(64 + job.len());
    hello.extend_from_slice(MAGIC);
    hello.push(VERSION);
    hello.extend_from_slice(&(job.len() as u16).to_be_bytes());
    hello.extend_from_slice(job.as_bytes());
    hello.extend_from_slice(&from.to_be_bytes());
    hello.extend_from_slice(&to.to_be_bytes());
    hello.extend_from_slice(ni);
    hello
}

/// Runs the initiator's side: we are `from`, dialling rank `to` of `job`. Returns the
/// link's round trip as measured on the way.
pub fn initiate<S: Read + Write>(
    s: &mut S,
    job: &str,
    secret: &[u8; 32],
    from: u32,
    to: u32,
) -> Result<std::time::Duration, HandshakeError> {
    let ni = nonce();
    let t0 = std::time::Instant::now();
    s.write_all(&hello(job, from, to, &ni))?;
    let mut reply = [0u8; 4 + 32 + 32];
    s.read_exact(&mut reply)?;
    finish_initiate(s, secret, job, from, to, &ni, t0, &reply)
}

/// Which part an end of a simultaneous open takes when both sent a HELLO: the lower
/// rank the initiator's, the higher the acceptor's.
pub fn conflict_role(me: u32, peer: u32) -> Part {
    if me < peer {
        Part::Initiator
    } else {
        Part::Acceptor
    }
}

/// A part of the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Sends the HELLO, proves second.
    Initiator,
    /// Answers the HELLO, proves first.
    Acceptor,
}

/// Runs the handshake on a connection both ends may have dialled at once (see the
/// module's docs): we are `me` of a job of `size` ranks, the peer is `peer`. Returns
/// the part we ended up taking, and the link's round trip if we initiated.
///
/// The two ends tell a PROOF from a HELLO by its first bytes (a HELLO has the
/// version, then our job's length, where a PROOF has random bytes): a PROOF taken for
/// a HELLO (one in 2^24) fails this handshake, never a link's data.
pub fn initiate_either<S: Read + Write>(
    s: &mut S,
    job: &str,
    secret: &[u8; 32],
    me: u32,
    peer: u32,
    size: u32,
) -> Result<(Part, Option<std::time::Duration>), HandshakeError> {
    let ni = nonce();
    let t0 = std::time::Instant::now();
    s.write_all(&hello(job, me, peer, &ni))?;
    let mut head = [0u8; 7];
    s.read_exact(&mut head)?;
    if &head[..4] != MAGIC {
        return Err(HandshakeError::NotQcg);
    }
    let their_hello =
        head[4] == VERSION && usize::from(u16::from_be_bytes([head[5], head[6]])) == job.len();
    if !their_hello {
        let mut reply = [0u8; 4 + 32 + 32];
        reply[..7].copy_from_slice(&head);
        s.read_exact(&mut reply[7..])?;
        let rtt = finish_initiate(s, secret, job, me, peer, &ni, t0, &reply)?;
        return Ok((Part::Initiator, Some(rtt)));
    }
    match conflict_role(me, peer) {
        Part::Initiator => {
            // Skip their HELLO: they answer ours.
            let mut skip = vec![0u8; job.len() + 40];
            s.read_exact(&mut skip)?;
            let mut reply = [0u8; 4 + 32 + 32];
            s.read_exact(&mut reply)?;
            let rtt = finish_initiate(s, secret, job, me, peer, &ni, t0, &reply)?;
            Ok((Part::Initiator, Some(rtt)))
        }
        Part::Acceptor => {
            let from = accept_after(s, &head, job, secret, me, size)?;
            if from != peer {
                return Err(HandshakeError::BadRank(from));
            }
            Ok((Part::Acceptor, None))
        }
    }
}

/// The initiator's part after the acceptor's PROOF (`reply`) arrived.
#[allow(clippy::too_many_arguments)]
fn finish_initiate<S: Read + Write>(
    s: &mut S,
    secret: &[u8; 32],
    job: &str,
    from: u32,
    to: u32,
    ni: &[u8; 32],
    t0: std::time::Instant,
    reply: &[u8; 68],
) -> Result<std::time::Duration, HandshakeError> {
    let first = t0.elapsed();
    if &reply[..4] != MAGIC {
        return Err(HandshakeError::NotQcg);
    }
    let mut na = [0u8; 32];
    na.copy_from_slice(&reply[4..36]);
    let t = transcript(job, from, to, ni, &na);
    if !check(secret, b"accept", &t, &reply[36..]) {
        return Err(HandshakeError::BadProof);
    }
    let t1 = std::time::Instant::now();
    s.write_all(proof(secret, b"initiate", &t).as_ref())?;
    let mut ok = [0u8; 1];
    s.read_exact(&mut ok)?;
    if ok[0] != 1 {
        return Err(HandshakeError::Refused);
    }
    // Two round trips; the shorter is the link's (the first may wait for the
    // acceptor's thread to be scheduled).
    Ok(first.min(t1.elapsed()))
}

/// Runs the acceptor's side: we are rank `me` of a job of `size` ranks. Returns the
/// initiator's rank.
pub fn accept<S: Read + Write>(
    s: &mut S,
    job: &str,
    secret: &[u8; 32],
    me: u32,
    size: u32,
) -> Result<u32, HandshakeError> {
    let mut head = [0u8; 7];
    s.read_exact(&mut head)?;
    accept_after(s, &head, job, secret, me, size)
}

/// The acceptor's part once the HELLO's first 7 bytes (`head`) were read.
fn accept_after<S: Read + Write>(
    s: &mut S,
    head: &[u8; 7],
    job: &str,
    secret: &[u8; 32],
    me: u32,
    size: u32,
) -> Result<u32, HandshakeError> {
    if &head[..4] != MAGIC || head[4] != VERSION {
        return Err(HandshakeError::NotQcg);
    }
    let len = u16::from_be_bytes([head[5], head[6]]) as usize;
    if len > MAX_JOB {
        return Err(HandshakeError::NotQcg);
    }
    let mut rest = vec![0u8; len + 4 + 4 + 32];
    s.read_exact(&mut rest)?;
    let their_job = String::from_utf8_lossy(&rest[..len]).into_owned();
    if their_job != job {
        return Err(HandshakeError::OtherJob(their_job));
    }
    let from = u32::from_be_bytes([rest[len], rest[len + 1], rest[len + 2], rest[len + 3]]);
    let to = u32::from_be_bytes([rest[len + 4], rest[len + 5], rest[len + 6], rest[len + 7]]);
    if to != me {
        return Err(HandshakeError::WrongRank {
            asked: to,
            ours: me,
        });
    }
    if from >= size || from == me {
        return Err(HandshakeError::BadRank(from));
    }
    let mut ni = [0u8; 32];
    ni.copy_from_slice(&rest[len + 8..]);
    let na = nonce();
    let t = transcript(job, from, to, &ni, &na);
    let mut reply = Vec::with_capacity(68);
    reply.extend_from_slice(MAGIC);
    reply.extend_from_slice(&na);
    reply.extend_from_slice(proof(secret, b"accept", &t).as_ref());
    s.write_all(&reply)?;
    let mut their = [0u8; 32];
    s.read_exact(&mut their)?;
    if !check(secret, b"initiate", &t, &their) {
        return Err(HandshakeError::BadProof);
    }
    s.write_all(&[1])?;
    Ok(from)
}

/// The acceptor's side as a state machine over bytes, for a listener that serves
/// many connections from one thread: feed it what arrives, send what it answers.
pub struct Acceptor {
    job: String,
    secret: [u8; 32],
    me: u32,
    size: u32,
    buf: Vec<u8>,
    /// After the HELLO: the transcript and the initiator's rank.
    proof: Option<(Vec<u8>, u32)>,
}

/// What an [`Acceptor`] wants next.
#[derive(Debug)]
pub enum Step {
    /// Read this many more bytes and feed them.
    Need(usize),
    /// Send these bytes, then read this many more.
    Reply(Vec<u8>, usize),
    /// Send these bytes: the link with this rank is made.
    Done(Vec<u8>, u32),
}

impl Acceptor {
    /// The acceptor of rank `me` of a job of `size` ranks.
    pub fn new(job: &str, secret: &[u8; 32], me: u32, size: u32) -> Acceptor {
        Acceptor {
            job: job.to_string(),
            secret: *secret,
            me,
            size,
            buf: Vec::new(),
            proof: None,
        }
    }

    /// Bytes to read before the first call of [`Acceptor::feed`].
    pub fn first_need(&self) -> usize {
        7
    }

    /// Takes bytes that arrived (never more than asked for).
    pub fn feed(&mut self, data: &[u8]) -> Result<Step, HandshakeError> {
        self.buf.extend_from_slice(data);
        if let Some((t, from)) = &self.proof {
            if self.buf.len() < 32 {
                return Ok(Step::Need(32 - self.buf.len()));
            }
            if !check(&self.secret, b"initiate", t, &self.buf[..32]) {
                return Err(HandshakeError::BadProof);
            }
            return Ok(Step::Done(vec![1], *from));
        }
        if self.buf.len() < 7 {
            return Ok(Step::Need(7 - self.buf.len()));
        }
        if &self.buf[..4] != MAGIC || self.buf[4] != VERSION {
            return Err(HandshakeError::NotQcg);
        }
        let len = u16::from_be_bytes([self.buf[5], self.buf[6]]) as usize;
        if len > MAX_JOB {
            return Err(HandshakeError::NotQcg);
        }
        let total = 7 + len + 40;
        if self.buf.len() < total {
            return Ok(Step::Need(total - self.buf.len()));
        }
        let rest = &self.buf[7..total];
        let their_job = String::from_utf8_lossy(&rest[..len]).into_owned();
        if their_job != self.job {
            return Err(HandshakeError::OtherJob(their_job));
        }
        let u32_at =
            |i: usize| u32::from_be_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
        let (from, to) = (u32_at(len), u32_at(len + 4));
        if to != self.me {
            return Err(HandshakeError::WrongRank {
                asked: to,
                ours: self.me,
            });
        }
        if from >= self.size || from == self.me {
            return Err(HandshakeError::BadRank(from));
        }
        let mut ni = [0u8; 32];
        ni.copy_from_slice(&rest[len + 8..len + 40]);
        let na = nonce();
        let t = transcript(&self.job, from, to, &ni, &na);
        let mut reply = Vec::with_capacity(68);
        reply.extend_from_slice(MAGIC);
        reply.extend_from_slice(&na);
        reply.extend_from_slice(proof(&self.secret, b"accept", &t).as_ref());
        self.proof = Some((t, from));
        self.buf.clear();
        Ok(Step::Reply(reply, 32))
    }
}

/// The initiator's side (and a simultaneous open's, [`initiate_either`]) as a state
/// machine over bytes, for the engine's loop: send the HELLO [`Initiator::new`] gives, then feed
/// it what arrives and send what it answers, as with an [`Acceptor`].
pub struct Initiator {
    job: String,
    secret: [u8; 32],
    me: u32,
    peer: u32,
    either: bool,
    ni: [u8; 32],
    t0: std::time::Instant,
    buf: Vec<u8>,
    stage: Stage,
    /// After a role conflict that made us the acceptor.
    acceptor: Option<Acceptor>,
    first: std::time::Duration,
    t1: Option<std::time::Instant>,
    rtt: Option<std::time::Duration>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Head,
    SkipHello,
    Proof,
    Accepted,
}

impl Initiator {
    /// We are `me`, dialling `peer`; `either`: the connection came from a
    /// simultaneous open. Returns the machine and the HELLO to send; then read
    /// [`Initiator::first_need`] bytes.
    pub fn new(
        job: &str,
        secret: &[u8; 32],
        me: u32,
        peer: u32,
        either: bool,
    ) -> (Initiator, Vec<u8>) {
        let ni = nonce();
        let h = hello(job, me, peer, &ni);
        let i = Initiator {
            job: job.to_string(),
            secret: *secret,
            me,
            peer,
            either,
            ni,
            t0: std::time::Instant::now(),
            buf: Vec::new(),
            stage: Stage::Head,
            acceptor: None,
            first: std::time::Duration::ZERO,
            t1: None,
            rtt: None,
        };
        (i, h)
    }

    /// Bytes to read before the first call of [`Initiator::feed`].
    pub fn first_need(&self) -> usize {
        7
    }

    /// The link's round trip, once done as the initiator.
    pub fn rtt(&self) -> Option<std::time::Duration> {
        self.rtt
    }

    /// Takes bytes that arrived (never more than asked for).
    pub fn feed(&mut self, data: &[u8]) -> Result<Step, HandshakeError> {
        if let Some(a) = &mut self.acceptor {
            return match a.feed(data)? {
                Step::Done(r, from) if from != self.peer => {
                    let _ = r;
                    Err(HandshakeError::BadRank(from))
                }
                step => Ok(step),
            };
        }
        self.buf.extend_from_slice(data);
        match self.stage {
            Stage::Head => {
                if self.buf.len() < 7 {
                    return Ok(Step::Need(7 - self.buf.len()));
                }
                if &self.buf[..4] != MAGIC {
                    return Err(HandshakeError::NotQcg);
                }
                let their_hello = self.buf[4] == VERSION
                    && usize::from(u16::from_be_bytes([self.buf[5], self.buf[6]]))
                        == self.job.len();
                if !(self.either && their_hello) {
                    self.stage = Stage::Proof;
                    return Ok(Step::Need(68 - self.buf.len()));
                }
                match conflict_role(self.me, self.peer) {
                    Part::Initiator => {
                        self.stage = Stage::SkipHello;
                        Ok(Step::Need(self.job.len() + 40))
                    }
                    Part::Acceptor => {
                        // The size only bounds the rank the HELLO claims, which must
                        // be the peer's anyway.
                        let size = self.peer.max(self.me) + 1;
                        let mut a = Acceptor::new(&self.job, &self.secret, self.me, size);
                        let head = std::mem::take(&mut self.buf);
                        let step = a.feed(&head)?;
                        self.acceptor = Some(a);
                        Ok(step)
                    }
                }
            }
            Stage::SkipHello => {
                let skip = self.job.len() + 40 + 7;
                if self.buf.len() < skip {
                    return Ok(Step::Need(skip - self.buf.len()));
                }
                self.buf.clear();
                self.stage = Stage::Proof;
                Ok(Step::Need(68))
            }
            Stage::Proof => {
                if self.buf.len() < 68 {
                    return Ok(Step::Need(68 - self.buf.len()));
                }
                self.first = self.t0.elapsed();
                if &self.buf[..4] != MAGIC {
                    return Err(HandshakeError::NotQcg);
                }
                let mut na = [0u8; 32];
                na.copy_from_slice(&self.buf[4..36]);
                let t = transcript(&self.job, self.me, self.peer, &self.ni, &na);
                if !check(&self.secret, b"accept", &t, &self.buf[36..68]) {
                    return Err(HandshakeError::BadProof);
                }
                self.buf.clear();
                self.stage = Stage::Accepted;
                self.t1 = Some(std::time::Instant::now());
                Ok(Step::Reply(
                    proof(&self.secret, b"initiate", &t).as_ref().to_vec(),
                    1,
                ))
            }
            Stage::Accepted => {
                if self.buf.first() != Some(&1) {
                    return Err(HandshakeError::Refused);
                }
                self.rtt = self.t1.map(|t1| self.first.min(t1.elapsed()));
                Ok(Step::Done(Vec::new(), self.peer))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    fn run(
        job_i: &'static str,
        secret_i: [u8; 32],
        to: u32,
    ) -> (Result<(), HandshakeError>, Result<u32, HandshakeError>) {
        let (mut a, mut b) = pair();
        let t = std::thread::spawn(move || accept(&mut b, "job", &[7; 32], 1, 4));
        let r = initiate(&mut a, job_i, &secret_i, 0, to).map(|_| ());
        drop(a);
        (r, t.join().unwrap())
    }

    #[test]
    fn same_job_same_secret_links() {
        let (i, a) = run("job", [7; 32], 1);
        i.unwrap();
        assert_eq!(a.unwrap(), 0);
    }

    #[test]
    fn wrong_secret_fails_on_both_sides() {
        let (i, a) = run("job", [8; 32], 1);
        assert!(matches!(i, Err(HandshakeError::BadProof)), "{i:?}");
        assert!(a.is_err());
    }

    #[test]
    fn other_job_and_wrong_rank_are_refused() {
        let (_, a) = run("other", [7; 32], 1);
        assert!(matches!(a, Err(HandshakeError::OtherJob(j)) if j == "other"));
        let (_, a) = run("job", [7; 32], 2);
        assert!(matches!(
            a,
            Err(HandshakeError::WrongRank { asked: 2, ours: 1 })
        ));
    }

    #[test]
    fn the_state_machine_acceptor_links_with_a_blocking_initiator() {
        let (mut a, mut b) = pair();
        let t = std::thread::spawn(move || initiate(&mut a, "job", &[7; 32], 2, 1).map(|_| ()));
        let mut acc = Acceptor::new("job", &[7; 32], 1, 4);
        let mut need = acc.first_need();
        let from = loop {
            let mut buf = vec![0u8; need];
            b.read_exact(&mut buf).unwrap();
            match acc.feed(&buf).unwrap() {
                Step::Need(n) => need = n,
                Step::Reply(r, n) => {
                    b.write_all(&r).unwrap();
                    need = n;
                }
                Step::Done(r, from) => {
                    b.write_all(&r).unwrap();
                    break from;
                }
            }
        };
        assert_eq!(from, 2);
        t.join().unwrap().unwrap();
        let mut acc = Acceptor::new("job", &[7; 32], 1, 4);
        assert!(matches!(acc.feed(b"GET / H"), Err(HandshakeError::NotQcg)));
    }

    #[test]
    fn two_ends_of_a_simultaneous_open_take_complementary_parts() {
        // Ranks 3 and 1 both send a HELLO: the lower initiates, the higher accepts,
        // whichever end is which side of the connection.
        for (x, y) in [(3, 1), (1, 3)] {
            let (mut a, mut b) = pair();
            let t = std::thread::spawn(move || {
                initiate_either(&mut b, "job", &[7; 32], y, x, 4).map(|(p, _)| p)
            });
            let (part, rtt) = initiate_either(&mut a, "job", &[7; 32], x, y, 4).unwrap();
            let theirs = t.join().unwrap().unwrap();
            assert_eq!(part, conflict_role(x, y));
            assert_eq!(theirs, conflict_role(y, x));
            assert_ne!(part, theirs);
            assert_eq!(rtt.is_some(), part == Part::Initiator);
        }
    }

    #[test]
    fn either_end_meets_a_plain_acceptor() {
        // Against an acceptor (a listener): the initiator's part, whatever the ranks.
        let (mut a, mut b) = pair();
        let t = std::thread::spawn(move || accept(&mut b, "job", &[7; 32], 0, 4));
        let (part, _) = initiate_either(&mut a, "job", &[7; 32], 2, 0, 4).unwrap();
        assert_eq!(part, Part::Initiator);
        assert_eq!(t.join().unwrap().unwrap(), 2);
        // A wrong secret still fails both ends.
        let (mut a, mut b) = pair();
        let t = std::thread::spawn(move || {
            initiate_either(&mut b, "job", &[8; 32], 1, 0, 4).map(|(p, _)| p)
        });
        let r = initiate_either(&mut a, "job", &[7; 32], 0, 1, 4);
        assert!(r.is_err(), "{r:?}");
        drop(a);
        assert!(t.join().unwrap().is_err());
    }

    #[test]
    fn a_stranger_is_not_qcg() {
        let (mut a, mut b) = pair();
        a.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let r = accept(&mut b, "job", &[7; 32], 1, 4);
        assert!(matches!(r, Err(HandshakeError::NotQcg)), "{r:?}");
    }
    /// Pumps an [`Initiator`] over a blocking stream.
    fn pump(
        mut s: TcpStream,
        mut i: Initiator,
        hello: Vec<u8>,
    ) -> Result<(u32, Option<std::time::Duration>), HandshakeError> {
        s.write_all(&hello)?;
        let mut need = i.first_need();
        loop {
            let mut buf = vec![0u8; need];
            s.read_exact(&mut buf)?;
            match i.feed(&buf)? {
                Step::Need(n) => need = n,
                Step::Reply(r, n) => {
                    s.write_all(&r)?;
                    need = n;
                }
                Step::Done(r, from) => {
                    s.write_all(&r)?;
                    return Ok((from, i.rtt()));
                }
            }
        }
    }

    #[test]
    fn the_state_machine_initiator_links_with_an_acceptor_and_with_itself() {
        // Against a blocking acceptor.
        let (a, mut b) = pair();
        let t = std::thread::spawn(move || accept(&mut b, "job", &[7; 32], 1, 4));
        let (i, h) = Initiator::new("job", &[7; 32], 2, 1, false);
        let (peer, rtt) = pump(a, i, h).unwrap();
        assert_eq!((peer, rtt.is_some()), (1, true));
        assert_eq!(t.join().unwrap().unwrap(), 2);
        // A simultaneous open's two ends, and one against a blocking initiate_either.
        for (x, y) in [(3, 1), (1, 3)] {
            let (a, b) = pair();
            let (ib, hb) = Initiator::new("job", &[7; 32], y, x, true);
            let t = std::thread::spawn(move || pump(b, ib, hb));
            let (ia, ha) = Initiator::new("job", &[7; 32], x, y, true);
            let (peer, rtt) = pump(a, ia, ha).unwrap();
            let (theirs, their_rtt) = t.join().unwrap().unwrap();
            assert_eq!((peer, theirs), (y, x));
            assert_eq!(rtt.is_some(), x < y);
            assert_eq!(their_rtt.is_some(), y < x);
            let (a, mut b) = pair();
            let t = std::thread::spawn(move || initiate_either(&mut b, "job", &[7; 32], y, x, 4));
            let (ia, ha) = Initiator::new("job", &[7; 32], x, y, true);
            pump(a, ia, ha).unwrap();
            assert_eq!(t.join().unwrap().unwrap().0, conflict_role(y, x));
        }
        // A wrong secret fails.
        let (a, mut b) = pair();
        let t = std::thread::spawn(move || accept(&mut b, "job", &[8; 32], 1, 4));
        let (i, h) = Initiator::new("job", &[7; 32], 2, 1, false);
        assert!(matches!(pump(a, i, h), Err(HandshakeError::BadProof)));
        assert!(t.join().unwrap().is_err());
    }
}
