//! The handshake at the start of every link: both ends prove they hold the job's
//! secret, without sending it.
//!
//! ```text
//! initiator → acceptor   HELLO   "QCGL" v2 | job len u16 | job | from rank u32 | to rank u32
//!                                 | nonce_i[32] | seal_i u8 | x25519_i[32]
//! acceptor  → initiator  PROOF   "QCGL" | nonce_a[32] | seal_a u8 | x25519_a[32]
//!                                 | HMAC(secret, "accept"   | transcript)
//! initiator → acceptor   PROOF   HMAC(secret, "initiate" | transcript)
//! acceptor  → initiator  1 byte: 1 = link accepted
//! ```
//! The transcript binds the job, both ranks, both nonces, both ends' wishes and
//! both X25519 public keys, so a proof cannot be replayed on another link and a man
//! in the middle cannot substitute a key or strip the wish to seal. If either end
//! asked (`seal_* = 1`), every byte after the handshake is sealed with keys from the
//! exchange ([`crate::seal`]). A link is used only after the last byte arrives: a
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

use crate::seal::{Exchange, Keys};
use ring::hmac;
use std::io::{Read, Write};

const MAGIC: &[u8; 4] = b"QCGL";
const VERSION: u8 = 2;
/// A HELLO's bytes after the job id.
const HELLO_TAIL: usize = 4 + 4 + 32 + 1 + 32;
/// The acceptor's PROOF.
const REPLY: usize = 4 + 32 + 1 + 32 + 32;
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
    /// The peer's key exchange value is unusable.
    #[error("peer sent an unusable key exchange value")]
    BadKey,
    /// The acceptor refused.
    #[error("peer refused the link")]
    Refused,
    /// The connection failed or timed out.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What one end of a handshake offers: its nonce, whether it wants the link
/// sealed, its X25519 public key.
struct Offer {
    nonce: [u8; 32],
    seal: bool,
    public: [u8; 32],
}

impl Offer {
    fn put(&self, t: &mut Vec<u8>) {
        t.extend_from_slice(&self.nonce);
        t.push(u8::from(self.seal));
        t.extend_from_slice(&self.public);
    }

    /// Reads an offer from its 65 bytes.
    fn parse(b: &[u8]) -> Result<Offer, HandshakeError> {
        let mut nonce = [0u8; 32];
        nonce.copy_from_slice(&b[..32]);
        let seal = match b[32] {
            0 => false,
            1 => true,
            _ => return Err(HandshakeError::NotQcg),
        };
        let mut public = [0u8; 32];
        public.copy_from_slice(&b[33..65]);
        Ok(Offer {
            nonce,
            seal,
            public,
        })
    }
}

fn transcript(job: &str, from: u32, to: u32, i: &Offer, a: &Offer) -> Vec<u8> {
    let mut t = Vec::with_capacity(job.len() + 140);
    t.extend_from_slice(&(job.len() as u16).to_be_bytes());
    t.extend_from_slice(job.as_bytes());
    t.extend_from_slice(&from.to_be_bytes());
    t.extend_from_slice(&to.to_be_bytes());
    i.put(&mut t);
    a.put(&mut t);
    t
}

/// The link's keys if either end asked to seal it.
fn keys(
    ours: Exchange,
    i: &Offer,
    a: &Offer,
    secret: &[u8; 32],
    t: &[u8],
    initiator: bool,
) -> Result<Option<Keys>, HandshakeError> {
    if !(i.seal || a.seal) {
        return Ok(None);
    }
    let theirs = if initiator { &a.public } else { &i.public };
    ours.keys(theirs, secret, t, initiator)
        .map(Some)
        .ok_or(HandshakeError::BadKey)
}

/// A handshake that succeeded.
#[derive(Debug)]
pub struct Linked {
    /// The peer's rank.
    pub peer: u32,
    /// The part we took.
    pub part: Part,
    /// The link's round trip, measured on the way (initiator only).
    pub rtt: Option<std::time::Duration>,
    /// The keys to seal the link with (`None`: plaintext).
    pub keys: Option<Keys>,
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

fn hello(job: &str, from: u32, to: u32, offer: &Offer) -> Vec<u8> {
    let mut hello = Vec::with_capacity(7 + HELLO_TAIL + job.len());
    hello.extend_from_slice(MAGIC);
    hello.push(VERSION);
    hello.extend_from_slice(&(job.len() as u16).to_be_bytes());
    hello.extend_from_slice(job.as_bytes());
    hello.extend_from_slice(&from.to_be_bytes());
    hello.extend_from_slice(&to.to_be_bytes());
    offer.put(&mut hello);
    hello
}

/// Our offer and the exchange behind it.
fn offer(seal: bool) -> (Offer, Exchange) {
    let x = Exchange::new();
    (
        Offer {
            nonce: nonce(),
            seal,
            public: x.public,
        },
        x,
    )
}

/// Runs the initiator's side: we are `from`, dialling rank `to` of `job`; `seal`:
/// we want the link sealed. The result has the link's round trip as measured on the
/// way.
pub fn initiate<S: Read + Write>(
    s: &mut S,
    job: &str,
    secret: &[u8; 32],
    from: u32,
    to: u32,
    seal: bool,
) -> Result<Linked, HandshakeError> {
    let (ours, x) = offer(seal);
    let t0 = std::time::Instant::now();
    s.write_all(&hello(job, from, to, &ours))?;
    let mut reply = [0u8; REPLY];
    s.read_exact(&mut reply)?;
    finish_initiate(s, secret, job, from, to, (ours, x), t0, &reply)
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
/// module's docs): we are `me` of a job of `size` ranks, the peer is `peer`; `seal`:
/// we want the link sealed. The result says the part we ended up taking.
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
    seal: bool,
) -> Result<Linked, HandshakeError> {
    let (ours, x) = offer(seal);
    let t0 = std::time::Instant::now();
    s.write_all(&hello(job, me, peer, &ours))?;
    let mut head = [0u8; 7];
    s.read_exact(&mut head)?;
    if &head[..4] != MAGIC {
        return Err(HandshakeError::NotQcg);
    }
    let their_hello =
        head[4] == VERSION && usize::from(u16::from_be_bytes([head[5], head[6]])) == job.len();
    if !their_hello {
        let mut reply = [0u8; REPLY];
        reply[..7].copy_from_slice(&head);
        s.read_exact(&mut reply[7..])?;
        return finish_initiate(s, secret, job, me, peer, (ours, x), t0, &reply);
    }
    match conflict_role(me, peer) {
        Part::Initiator => {
            // Skip their HELLO: they answer ours (and, acceptor now, seal if either
            // of us asked).
            let mut skip = vec![0u8; job.len() + HELLO_TAIL];
            s.read_exact(&mut skip)?;
            let mut reply = [0u8; REPLY];
            s.read_exact(&mut reply)?;
            finish_initiate(s, secret, job, me, peer, (ours, x), t0, &reply)
        }
        Part::Acceptor => {
            // Our own HELLO is dropped: what we wished goes in our PROOF.
            let linked = accept_after(s, &head, job, secret, me, size, seal)?;
            if linked.peer != peer {
                return Err(HandshakeError::BadRank(linked.peer));
            }
            Ok(linked)
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
    (ours, x): (Offer, Exchange),
    t0: std::time::Instant,
    reply: &[u8; REPLY],
) -> Result<Linked, HandshakeError> {
    let first = t0.elapsed();
    if &reply[..4] != MAGIC {
        return Err(HandshakeError::NotQcg);
    }
    let theirs = Offer::parse(&reply[4..69])?;
    let t = transcript(job, from, to, &ours, &theirs);
    if !check(secret, b"accept", &t, &reply[69..]) {
        return Err(HandshakeError::BadProof);
    }
    let keys = keys(x, &ours, &theirs, secret, &t, true)?;
    let t1 = std::time::Instant::now();
    s.write_all(proof(secret, b"initiate", &t).as_ref())?;
    let mut ok = [0u8; 1];
    s.read_exact(&mut ok)?;
    if ok[0] != 1 {
        return Err(HandshakeError::Refused);
    }
    // Two round trips; the shorter is the link's (the first may wait for the
    // acceptor's thread to be scheduled).
    Ok(Linked {
        peer: to,
        part: Part::Initiator,
        rtt: Some(first.min(t1.elapsed())),
        keys,
    })
}

/// Runs the acceptor's side: we are rank `me` of a job of `size` ranks; `seal`: we
/// want the link sealed whatever the initiator asks. The result names the
/// initiator's rank.
pub fn accept<S: Read + Write>(
    s: &mut S,
    job: &str,
    secret: &[u8; 32],
    me: u32,
    size: u32,
    seal: bool,
) -> Result<Linked, HandshakeError> {
    let mut head = [0u8; 7];
    s.read_exact(&mut head)?;
    accept_after(s, &head, job, secret, me, size, seal)
}

/// The acceptor's part once the HELLO's first 7 bytes (`head`) were read.
fn accept_after<S: Read + Write>(
    s: &mut S,
    head: &[u8; 7],
    job: &str,
    secret: &[u8; 32],
    me: u32,
    size: u32,
    seal: bool,
) -> Result<Linked, HandshakeError> {
    let mut acc = Acceptor::new(job, secret, me, size, std::sync::Arc::new(move |_| seal));
    let mut buf = head.to_vec();
    loop {
        match acc.feed(&buf)? {
            Step::Need(n) => {
                buf = vec![0u8; n];
                s.read_exact(&mut buf)?;
            }
            Step::Reply(r, n) => {
                s.write_all(&r)?;
                buf = vec![0u8; n];
                s.read_exact(&mut buf)?;
            }
            Step::Done(r, linked) => {
                s.write_all(&r)?;
                return Ok(linked);
            }
        }
    }
}

/// The acceptor's side as a state machine over bytes, for a listener that serves
/// many connections from one thread: feed it what arrives, send what it answers.
pub struct Acceptor {
    job: String,
    secret: [u8; 32],
    me: u32,
    size: u32,
    /// Whether we want a link with a rank sealed, whatever the initiator asks.
    seal: Wish,
    buf: Vec<u8>,
    /// After the HELLO: the transcript, the initiator's rank and the keys.
    proof: Option<(Vec<u8>, u32, Option<Keys>)>,
}

/// Whether an acceptor wants its link with a rank sealed.
pub type Wish = std::sync::Arc<dyn Fn(u32) -> bool + Send + Sync>;

/// What an [`Acceptor`] wants next.
#[derive(Debug)]
pub enum Step {
    /// Read this many more bytes and feed them.
    Need(usize),
    /// Send these bytes, then read this many more.
    Reply(Vec<u8>, usize),
    /// Send these bytes: the link is made.
    Done(Vec<u8>, Linked),
}

impl Acceptor {
    /// The acceptor of rank `me` of a job of `size` ranks; `seal` says, for the
    /// initiator's rank, whether we want the link sealed whatever it asks.
    pub fn new(job: &str, secret: &[u8; 32], me: u32, size: u32, seal: Wish) -> Acceptor {
        Acceptor {
            job: job.to_string(),
            secret: *secret,
            me,
            size,
            seal,
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
        if let Some((t, _, _)) = &self.proof {
            if self.buf.len() < 32 {
                return Ok(Step::Need(32 - self.buf.len()));
            }
            if !check(&self.secret, b"initiate", t, &self.buf[..32]) {
                return Err(HandshakeError::BadProof);
            }
            let Some((_, peer, keys)) = self.proof.take() else {
                unreachable!("checked above")
            };
            return Ok(Step::Done(
                vec![1],
                Linked {
                    peer,
                    part: Part::Acceptor,
                    rtt: None,
                    keys,
                },
            ));
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
        let total = 7 + len + HELLO_TAIL;
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
        let theirs = Offer::parse(&rest[len + 8..len + HELLO_TAIL])?;
        let (ours, x) = offer((self.seal)(from));
        let t = transcript(&self.job, from, to, &theirs, &ours);
        let keys = keys(x, &theirs, &ours, &self.secret, &t, false)?;
        let mut reply = Vec::with_capacity(REPLY);
        reply.extend_from_slice(MAGIC);
        ours.put(&mut reply);
        reply.extend_from_slice(proof(&self.secret, b"accept", &t).as_ref());
        self.proof = Some((t, from, keys));
        self.buf.clear();
        Ok(Step::Reply(reply, 32))
    }
}

/// The initiator's side (and a simultaneous open's, [`initiate_either`]) as a state
/// machine over bytes, for the engine's loop: send the HELLO [`Initiator::new`]
/// gives, then feed it what arrives and send what it answers, as with an
/// [`Acceptor`]. It takes the same steps as [`initiate`] and [`initiate_either`].
pub struct Initiator {
    job: String,
    secret: [u8; 32],
    me: u32,
    peer: u32,
    either: bool,
    /// Our wish to seal the link (also the acceptor's, after a role conflict).
    seal: bool,
    ours: Offer,
    /// Our half of the key exchange, until the PROOF arrives.
    exchange: Option<Exchange>,
    t0: std::time::Instant,
    buf: Vec<u8>,
    stage: Stage,
    /// After a role conflict that made us the acceptor.
    acceptor: Option<Acceptor>,
    first: std::time::Duration,
    t1: Option<std::time::Instant>,
    keys: Option<Keys>,
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
    /// simultaneous open; `seal`: we want the link sealed. Returns the machine and
    /// the HELLO to send; then read [`Initiator::first_need`] bytes.
    pub fn new(
        job: &str,
        secret: &[u8; 32],
        me: u32,
        peer: u32,
        either: bool,
        seal: bool,
    ) -> (Initiator, Vec<u8>) {
        let (ours, x) = offer(seal);
        let h = hello(job, me, peer, &ours);
        let i = Initiator {
            job: job.to_string(),
            secret: *secret,
            me,
            peer,
            either,
            seal,
            ours,
            exchange: Some(x),
            t0: std::time::Instant::now(),
            buf: Vec::new(),
            stage: Stage::Head,
            acceptor: None,
            first: std::time::Duration::ZERO,
            t1: None,
            keys: None,
        };
        (i, h)
    }

    /// Bytes to read before the first call of [`Initiator::feed`].
    pub fn first_need(&self) -> usize {
        7
    }

    /// Takes bytes that arrived (never more than asked for).
    pub fn feed(&mut self, data: &[u8]) -> Result<Step, HandshakeError> {
        if let Some(a) = &mut self.acceptor {
            return match a.feed(data)? {
                Step::Done(_, linked) if linked.peer != self.peer => {
                    Err(HandshakeError::BadRank(linked.peer))
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
                    return Ok(Step::Need(REPLY - self.buf.len()));
                }
                match conflict_role(self.me, self.peer) {
                    Part::Initiator => {
                        // Skip their HELLO: they answer ours (and, acceptor now, seal
                        // if either of us asked).
                        self.stage = Stage::SkipHello;
                        Ok(Step::Need(self.job.len() + HELLO_TAIL))
                    }
                    Part::Acceptor => {
                        // Our own HELLO is dropped: what we wished goes in our PROOF.
                        // The size only bounds the rank the HELLO claims, which must
                        // be the peer's anyway.
                        let size = self.peer.max(self.me) + 1;
                        let seal = self.seal;
                        let wish: Wish = std::sync::Arc::new(move |_| seal);
                        let mut a = Acceptor::new(&self.job, &self.secret, self.me, size, wish);
                        let head = std::mem::take(&mut self.buf);
                        let step = a.feed(&head)?;
                        self.acceptor = Some(a);
                        Ok(step)
                    }
                }
            }
            Stage::SkipHello => {
                let skip = 7 + self.job.len() + HELLO_TAIL;
                if self.buf.len() < skip {
                    return Ok(Step::Need(skip - self.buf.len()));
                }
                self.buf.clear();
                self.stage = Stage::Proof;
                Ok(Step::Need(REPLY))
            }
            Stage::Proof => {
                if self.buf.len() < REPLY {
                    return Ok(Step::Need(REPLY - self.buf.len()));
                }
                self.first = self.t0.elapsed();
                if &self.buf[..4] != MAGIC {
                    return Err(HandshakeError::NotQcg);
                }
                let theirs = Offer::parse(&self.buf[4..69])?;
                let t = transcript(&self.job, self.me, self.peer, &self.ours, &theirs);
                if !check(&self.secret, b"accept", &t, &self.buf[69..REPLY]) {
                    return Err(HandshakeError::BadProof);
                }
                let x = self.exchange.take().ok_or(HandshakeError::BadKey)?;
                self.keys = keys(x, &self.ours, &theirs, &self.secret, &t, true)?;
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
                // Two round trips; the shorter is the link's (the first may wait for
                // the acceptor's thread to be scheduled).
                let rtt = self.t1.map(|t1| self.first.min(t1.elapsed()));
                Ok(Step::Done(
                    Vec::new(),
                    Linked {
                        peer: self.peer,
                        part: Part::Initiator,
                        rtt,
                        keys: self.keys.take(),
                    },
                ))
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
        let t = std::thread::spawn(move || {
            accept(&mut b, "job", &[7; 32], 1, 4, false).map(|l| l.peer)
        });
        let r = initiate(&mut a, job_i, &secret_i, 0, to, false).map(|_| ());
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
        let t =
            std::thread::spawn(move || initiate(&mut a, "job", &[7; 32], 2, 1, false).map(|_| ()));
        let mut acc = Acceptor::new("job", &[7; 32], 1, 4, std::sync::Arc::new(|_| false));
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
                Step::Done(r, linked) => {
                    b.write_all(&r).unwrap();
                    assert!(linked.keys.is_none());
                    break linked.peer;
                }
            }
        };
        assert_eq!(from, 2);
        t.join().unwrap().unwrap();
        let mut acc = Acceptor::new("job", &[7; 32], 1, 4, std::sync::Arc::new(|_| false));
        assert!(matches!(acc.feed(b"GET / H"), Err(HandshakeError::NotQcg)));
    }

    #[test]
    fn two_ends_of_a_simultaneous_open_take_complementary_parts() {
        // Ranks 3 and 1 both send a HELLO: the lower initiates, the higher accepts,
        // whichever end is which side of the connection.
        for (x, y) in [(3, 1), (1, 3)] {
            let (mut a, mut b) = pair();
            let t = std::thread::spawn(move || {
                initiate_either(&mut b, "job", &[7; 32], y, x, 4, false).map(|l| l.part)
            });
            let l = initiate_either(&mut a, "job", &[7; 32], x, y, 4, false).unwrap();
            let (part, rtt) = (l.part, l.rtt);
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
        let t = std::thread::spawn(move || accept(&mut b, "job", &[7; 32], 0, 4, false));
        let l = initiate_either(&mut a, "job", &[7; 32], 2, 0, 4, false).unwrap();
        assert_eq!(l.part, Part::Initiator);
        assert_eq!(t.join().unwrap().unwrap().peer, 2);
        // A wrong secret still fails both ends.
        let (mut a, mut b) = pair();
        let t = std::thread::spawn(move || {
            initiate_either(&mut b, "job", &[8; 32], 1, 0, 4, false).map(|l| l.part)
        });
        let r = initiate_either(&mut a, "job", &[7; 32], 0, 1, 4, false);
        assert!(r.is_err(), "{r:?}");
        drop(a);
        assert!(t.join().unwrap().is_err());
    }

    #[test]
    fn a_stranger_is_not_qcg() {
        let (mut a, mut b) = pair();
        a.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let r = accept(&mut b, "job", &[7; 32], 1, 4, false);
        assert!(matches!(r, Err(HandshakeError::NotQcg)), "{r:?}");
    }

    /// Both ends' results of a handshake where the initiator wishes `si` and the
    /// acceptor `sa`.
    fn sealed(si: bool, sa: bool) -> (Linked, Linked, TcpStream, TcpStream) {
        let (mut a, mut b) = pair();
        let t = std::thread::spawn(move || {
            let l = accept(&mut b, "job", &[7; 32], 1, 4, sa).unwrap();
            (l, b)
        });
        let li = initiate(&mut a, "job", &[7; 32], 0, 1, si).unwrap();
        let (la, b) = t.join().unwrap();
        (li, la, a, b)
    }

    #[test]
    fn either_wish_seals_the_link_with_matching_keys() {
        use crate::seal::Sealed;
        for (si, sa) in [(false, false), (true, false), (false, true), (true, true)] {
            let (li, la, a, b) = sealed(si, sa);
            assert_eq!(li.keys.is_some(), si || sa);
            assert_eq!(la.keys.is_some(), si || sa);
            let (Some(ki), Some(ka)) = (li.keys, la.keys) else {
                continue;
            };
            // What one end seals, the other opens, both ways; the wire shows no
            // plaintext.
            let mut x = Sealed::new(a, ki, "rank 1".into());
            let mut y = Sealed::new(b, ka, "rank 0".into());
            x.write_all(b"from rank 0 to rank 1").unwrap();
            y.write_all(b"and back").unwrap();
            let mut buf = [0u8; 21];
            y.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"from rank 0 to rank 1");
            let mut buf = [0u8; 8];
            x.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"and back");
        }
    }

    #[test]
    fn a_man_in_the_middle_cannot_swap_keys_or_strip_the_wish() {
        // A relay that rewrites the initiator's HELLO: its key (the last 32 bytes),
        // or its wish to seal (the byte before): the acceptor's proof no longer
        // matches what the initiator sent, so the initiator refuses.
        for at in [1usize, 33] {
            let (mut a, mut m_in) = pair();
            let (mut m_out, mut b) = pair();
            let acc = std::thread::spawn(move || accept(&mut b, "job", &[7; 32], 1, 4, false));
            let mitm = std::thread::spawn(move || {
                let mut hello = vec![0u8; 7 + 3 + HELLO_TAIL];
                m_in.read_exact(&mut hello).unwrap();
                let n = hello.len();
                if at == 33 {
                    hello[n - 33] = 0;
                } else {
                    hello[n - at] ^= 0xff;
                }
                m_out.write_all(&hello).unwrap();
                let mut reply = [0u8; REPLY];
                if m_out.read_exact(&mut reply).is_ok() {
                    let _ = m_in.write_all(&reply);
                }
            });
            let r = initiate(&mut a, "job", &[7; 32], 0, 1, true);
            assert!(matches!(r, Err(HandshakeError::BadProof)), "{r:?}");
            drop(a);
            mitm.join().unwrap();
            assert!(acc.join().unwrap().is_err());
        }
    }

    /// Pumps an [`Initiator`] over a blocking stream.
    fn pump(mut s: TcpStream, mut i: Initiator, hello: Vec<u8>) -> Result<Linked, HandshakeError> {
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
                Step::Done(r, linked) => {
                    s.write_all(&r)?;
                    return Ok(linked);
                }
            }
        }
    }

    #[test]
    fn the_state_machine_initiator_links_with_an_acceptor_and_with_itself() {
        // Against a blocking acceptor.
        let (a, mut b) = pair();
        let t = std::thread::spawn(move || accept(&mut b, "job", &[7; 32], 1, 4, false));
        let (i, h) = Initiator::new("job", &[7; 32], 2, 1, false, false);
        let l = pump(a, i, h).unwrap();
        assert_eq!(
            (l.peer, l.part, l.rtt.is_some()),
            (1, Part::Initiator, true)
        );
        assert!(l.keys.is_none());
        assert_eq!(t.join().unwrap().unwrap().peer, 2);
        // A simultaneous open's two ends, and one against a blocking initiate_either.
        for (x, y) in [(3, 1), (1, 3)] {
            let (a, b) = pair();
            let (ib, hb) = Initiator::new("job", &[7; 32], y, x, true, false);
            let t = std::thread::spawn(move || pump(b, ib, hb));
            let (ia, ha) = Initiator::new("job", &[7; 32], x, y, true, false);
            let ours = pump(a, ia, ha).unwrap();
            let theirs = t.join().unwrap().unwrap();
            assert_eq!((ours.peer, theirs.peer), (y, x));
            assert_eq!(ours.part, conflict_role(x, y));
            assert_eq!(theirs.part, conflict_role(y, x));
            assert_eq!(ours.rtt.is_some(), x < y);
            assert_eq!(theirs.rtt.is_some(), y < x);
            let (a, mut b) = pair();
            let t = std::thread::spawn(move || {
                initiate_either(&mut b, "job", &[7; 32], y, x, 4, false)
            });
            let (ia, ha) = Initiator::new("job", &[7; 32], x, y, true, false);
            pump(a, ia, ha).unwrap();
            assert_eq!(t.join().unwrap().unwrap().part, conflict_role(y, x));
        }
        // A wrong secret fails.
        let (a, mut b) = pair();
        let t = std::thread::spawn(move || accept(&mut b, "job", &[8; 32], 1, 4, false));
        let (i, h) = Initiator::new("job", &[7; 32], 2, 1, false, false);
        assert!(matches!(pump(a, i, h), Err(HandshakeError::BadProof)));
        assert!(t.join().unwrap().is_err());
    }

    #[test]
    fn the_state_machine_initiator_seals_as_either_end_wishes() {
        use crate::seal::Sealed;
        // Against a blocking acceptor, each pair of wishes; then a simultaneous open
        // whose ends are both state machines (the wish of either end, whichever part
        // it ends up taking, seals the link).
        for (si, sa) in [(false, false), (true, false), (false, true), (true, true)] {
            let (a, mut b) = pair();
            let t = std::thread::spawn(move || {
                let l = accept(&mut b, "job", &[7; 32], 1, 4, sa).unwrap();
                (l, b)
            });
            let (i, h) = Initiator::new("job", &[7; 32], 0, 1, false, si);
            let li = pump(a.try_clone().unwrap(), i, h).unwrap();
            let (la, b) = t.join().unwrap();
            assert_eq!(li.keys.is_some(), si || sa);
            assert_eq!(la.keys.is_some(), si || sa);
            if let (Some(ki), Some(ka)) = (li.keys, la.keys) {
                let mut x = Sealed::new(a, ki, "rank 1".into());
                let mut y = Sealed::new(b, ka, "rank 0".into());
                x.write_all(b"from rank 0").unwrap();
                let mut buf = [0u8; 11];
                y.read_exact(&mut buf).unwrap();
                assert_eq!(&buf, b"from rank 0");
                y.write_all(b"back").unwrap();
                let mut buf = [0u8; 4];
                x.read_exact(&mut buf).unwrap();
                assert_eq!(&buf, b"back");
            }
            for (x, y) in [(3, 1), (1, 3)] {
                let (a, b) = pair();
                let (ib, hb) = Initiator::new("job", &[7; 32], y, x, true, sa);
                let t = std::thread::spawn(move || {
                    let l = pump(b.try_clone().unwrap(), ib, hb).unwrap();
                    (l, b)
                });
                let (ia, ha) = Initiator::new("job", &[7; 32], x, y, true, si);
                let lx = pump(a.try_clone().unwrap(), ia, ha).unwrap();
                let (ly, b) = t.join().unwrap();
                assert_eq!(lx.keys.is_some(), si || sa, "{x}<->{y} {si} {sa}");
                assert_eq!(ly.keys.is_some(), si || sa, "{x}<->{y} {si} {sa}");
                if let (Some(kx), Some(ky)) = (lx.keys, ly.keys) {
                    let mut p = Sealed::new(a, kx, format!("rank {y}"));
                    let mut q = Sealed::new(b, ky, format!("rank {x}"));
                    p.write_all(b"ping").unwrap();
                    let mut buf = [0u8; 4];
                    q.read_exact(&mut buf).unwrap();
                    assert_eq!(&buf, b"ping");
                }
            }
        }
    }

    #[test]
    fn the_state_machine_initiator_refuses_a_stripped_wish() {
        // A relay that clears the initiator's wish to seal in its HELLO: the
        // acceptor's proof covers what it read, so the initiator refuses.
        let (a, mut m_in) = pair();
        let (mut m_out, mut b) = pair();
        let acc = std::thread::spawn(move || accept(&mut b, "job", &[7; 32], 1, 4, false));
        let (i, h) = Initiator::new("job", &[7; 32], 0, 1, false, true);
        let mitm = std::thread::spawn(move || {
            let mut hello = vec![0u8; 7 + 3 + HELLO_TAIL];
            m_in.read_exact(&mut hello).unwrap();
            let n = hello.len();
            hello[n - 33] = 0;
            m_out.write_all(&hello).unwrap();
            let mut reply = [0u8; REPLY];
            if m_out.read_exact(&mut reply).is_ok() {
                let _ = m_in.write_all(&reply);
            }
        });
        let r = pump(a.try_clone().unwrap(), i, h);
        assert!(matches!(r, Err(HandshakeError::BadProof)), "{r:?}");
        let _ = a.shutdown(std::net::Shutdown::Both);
        mitm.join().unwrap();
        assert!(acc.join().unwrap().is_err());
    }
}
