//! Encrypted, authenticated links: which links are sealed ([`Policy`]), their keys
//! ([`Exchange`], run inside the job handshake) and the record layer ([`Sealed`]).
//!
//! ## Keys
//! Each end of every TCP link makes a fresh X25519 key pair for the handshake and
//! sends its public half in its HELLO or PROOF; the transcript the job secret's
//! HMACs cover holds both halves, so a man in the middle without the secret cannot
//! substitute his own. The two directions' keys are
//! `HKDF-SHA256(salt = job secret, ikm = X25519 shared secret)` expanded with a label
//! per direction and the whole transcript: a process of another job, or one that saw
//! the link's bytes, cannot derive them, and one link's keys say nothing of another's.
//!
//! ## Records
//! ```text
//! kind u8 (0 data, 1 close) | length u24 (≤ 64 KiB) | AES-256-GCM(payload) | tag[16]
//! ```
//! The nonce is the record's sequence number in its direction, the 4-byte head is
//! the associated data: an altered, replayed, reordered or dropped record fails the
//! tag check, and a stream that ends without its close record was cut. Either fails
//! the link with an error naming the peer; no byte of a record that failed reaches
//! the program. AES-GCM is `ring`'s (AES-NI and PCLMULQDQ, or VAES, where the CPU
//! has them).
//!
//! ## Opening in place
//! A reader that hands [`Sealed::read_in_place`] the buffer a message's bytes go to
//! (the engine's posted receive buffer) gets each large record read straight into
//! it, after the head read alone, and opened there: no copy through the reader's own
//! buffer. Its tag and the next record's head come in the same `readv`. Smaller
//! records, and those that do not fit, go through the reader's buffer.
//!
//! The kernel's TLS record layer (kTLS) would save the user-space pass; this layer
//! checks at run time whether the kernel offers the `tls` upper layer and says so in
//! the log ([`ktls_offered`]), but its records are its own.

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use ring::agreement::{self, EphemeralPrivateKey, UnparsedPublicKey, X25519};
use ring::hkdf;
use std::io::{self, Read, Write};

/// Largest payload of one record.
pub const RECORD_MAX: usize = 64 * 1024;
/// Bytes a record adds to its payload: the head and the tag.
pub const OVERHEAD: usize = HEAD + TAG;
const HEAD: usize = 4;
const TAG: usize = 16;
const DATA: u8 = 0;
const CLOSE: u8 = 1;
/// Records read from the socket at once, at most (fewer system calls per byte).
const READ_RECORDS: usize = 4;
/// Records this long or longer are opened where the reader wants their bytes
/// ([`Sealed::read_in_place`]) when they fit there; a writer starts and ends a
/// record at a buffer of this size or more, so that a large message's records hold
/// its bytes alone.
pub const IN_PLACE_MIN: usize = 16 * 1024;

/// Which links are sealed (`encrypt` in the broker's config, `QCG_ENCRYPT` for a job).
pub use qcg_wire::Encrypt as Mode;

/// A process's encryption policy: the mode and, for `wan`, the site of every rank.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// The mode.
    pub mode: Mode,
    /// Each rank's site (`None`: unknown, every rank taken as in ours).
    pub sites: Option<Vec<String>>,
    /// The mode was forced for this job (`QCG_ENCRYPT`): it wins over the plan's.
    pub forced: bool,
}

impl Policy {
    /// The policy from `QCG_ENCRYPT` and the sites of `QCG_TOPOLOGY` (first level).
    pub fn from_env(size: u32) -> Result<Policy, String> {
        let var = qcg_wire::env::ENCRYPT;
        let (mode, forced) = match std::env::var(var).ok().filter(|v| !v.is_empty()) {
            None => (Mode::Wan, false),
            Some(v) => (v.parse().map_err(|e| format!("{var}={e}"))?, true),
        };
        let sites = std::env::var(qcg_wire::env::TOPOLOGY)
            .ok()
            .and_then(|t| sites(&t, size));
        Ok(Policy {
            mode,
            sites,
            forced,
        })
    }

    /// Whether a link between ranks `a` and `b` is sealed.
    pub fn wants(&self, a: u32, b: u32) -> bool {
        match (&self.sites, self.mode) {
            (Some(s), Mode::Wan) => s.get(a as usize) != s.get(b as usize),
            // Sites unknown: as if in one (the broker's plan knows better).
            (None, Mode::Wan) => false,
            (_, Mode::All) => true,
            (_, Mode::None) => false,
        }
    }

    /// What we want for a link with `peer` that the broker's plan says `plan` about
    /// (`None`: no plan, we did not dial it): the plan, unless the mode was forced.
    pub fn ask(&self, me: u32, peer: u32, plan: Option<bool>) -> bool {
        match plan {
            Some(p) if !self.forced => p,
            _ => self.wants(me, peer),
        }
    }
}

/// The site (first path level) of each rank of a `QCG_TOPOLOGY` value.
fn sites(topology: &str, size: u32) -> Option<Vec<String>> {
    let s: Vec<String> = topology
        .split(';')
        .map(|p| p.split('/').next().unwrap_or("").to_string())
        .collect();
    (s.len() == size as usize).then_some(s)
}

/// One end's part of the key exchange of a handshake.
pub struct Exchange {
    private: EphemeralPrivateKey,
    /// Our public key, sent in the handshake.
    pub public: [u8; 32],
}

impl Exchange {
    /// A fresh key pair.
    pub fn new() -> Exchange {
        let rng = ring::rand::SystemRandom::new();
        // The system RNG failing is not something a process can recover from.
        let private = EphemeralPrivateKey::generate(&X25519, &rng).expect("X25519 key generation");
        let mut public = [0u8; 32];
        public.copy_from_slice(
            private
                .compute_public_key()
                .expect("X25519 public key")
                .as_ref(),
        );
        Exchange { private, public }
    }

    /// The link's keys from the peer's public key, the job secret and the handshake's
    /// transcript; `initiator`: our part. `None` if the peer's key is unusable.
    pub fn keys(
        self,
        theirs: &[u8; 32],
        secret: &[u8; 32],
        transcript: &[u8],
        initiator: bool,
    ) -> Option<Keys> {
        let peer = UnparsedPublicKey::new(&X25519, theirs);
        agreement::agree_ephemeral(self.private, &peer, |shared| {
            let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, secret).extract(shared);
            let key = |label: &[u8]| -> Option<Box<LessSafeKey>> {
                let info = [label, transcript];
                let okm = prk.expand(&info, &AES_256_GCM).ok()?;
                Some(Box::new(LessSafeKey::new(UnboundKey::from(okm))))
            };
            let (i2a, a2i) = (key(b"qcg link i->a")?, key(b"qcg link a->i")?);
            Some(if initiator {
                Keys {
                    send: i2a,
                    recv: a2i,
                }
            } else {
                Keys {
                    send: a2i,
                    recv: i2a,
                }
            })
        })
        .ok()
        .flatten()
    }
}

impl Default for Exchange {
    fn default() -> Self {
        Exchange::new()
    }
}

/// A link's two directional keys.
pub struct Keys {
    // Boxed: an expanded AES key is large, and keys travel in handshake results.
    send: Box<LessSafeKey>,
    recv: Box<LessSafeKey>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(<hidden>)")
    }
}

fn nonce(seq: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&seq.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

fn head(kind: u8, len: usize) -> [u8; HEAD] {
    let l = (len as u32).to_be_bytes();
    [kind, l[1], l[2], l[3]]
}

/// Why a sealed stream failed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// A record's tag did not match: altered, replayed, reordered or forged data.
    #[error("record {seq} from {peer} failed authentication (altered, replayed, reordered or forged data)")]
    Forged {
        /// The peer.
        peer: String,
        /// The record's number in the stream.
        seq: u64,
    },
    /// A record head no sealer writes.
    #[error("record {seq} from {peer} has a bad head (kind {kind}, length {len})")]
    BadHead {
        /// The peer.
        peer: String,
        /// The record's number in the stream.
        seq: u64,
        /// Its kind byte.
        kind: u8,
        /// Its length.
        len: usize,
    },
    /// The stream ended without the close record.
    #[error("the encrypted stream from {peer} was cut after {seq} records (no close record)")]
    Truncated {
        /// The peer.
        peer: String,
        /// Records read.
        seq: u64,
    },
}

fn invalid(e: SealError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// A stream whose every byte is sealed in records (see the module's docs). Reads
/// and writes keep the inner stream's non-blocking behaviour: a write takes up to a
/// record's worth of bytes and keeps what the socket did not take, which
/// [`Write::flush`] (or the next write) pushes on.
pub struct Sealed<S: Read + Write> {
    io: S,
    /// Who the peer is, for errors (`rank 3 (10.1.0.2:4242)`).
    peer: String,
    send: Box<LessSafeKey>,
    send_seq: u64,
    out: Vec<u8>,
    out_at: usize,
    recv: Box<LessSafeKey>,
    recv_seq: u64,
    buf: Vec<u8>,
    /// Unread ciphertext: `buf[start..end]`.
    start: usize,
    end: usize,
    /// Opened plaintext not yet read: `buf[plain.0..plain.1]`.
    plain: (usize, usize),
    /// The peer's close record arrived.
    closed: bool,
    /// Ours is queued.
    close_sent: bool,
    /// Why the stream failed (every later read says it again).
    broken: Option<String>,
    /// The record being read into the caller's buffer, if one is.
    in_place: Option<InPlace>,
    /// Records opened in place so far.
    opened_in_place: u64,
}

/// A record being read into the buffer of [`Sealed::read_in_place`]'s caller.
struct InPlace {
    /// Where its first byte goes (the caller must come back with this address).
    addr: usize,
    head: [u8; HEAD],
    len: usize,
    got: usize,
    tag: [u8; TAG],
    tag_got: usize,
}

impl<S: Read + Write> std::fmt::Debug for Sealed<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealed")
            .field("peer", &self.peer)
            .field("sent", &self.send_seq)
            .field("received", &self.recv_seq)
            .finish()
    }
}

impl<S: Read + Write> Sealed<S> {
    /// Seals `io` with `keys`; `peer` names the other end in errors.
    pub fn new(io: S, keys: Keys, peer: String) -> Sealed<S> {
        Sealed {
            io,
            peer,
            send: keys.send,
            send_seq: 0,
            out: Vec::with_capacity(RECORD_MAX + OVERHEAD),
            out_at: 0,
            recv: keys.recv,
            recv_seq: 0,
            buf: vec![0u8; READ_RECORDS * (RECORD_MAX + OVERHEAD)],
            start: 0,
            end: 0,
            plain: (0, 0),
            closed: false,
            close_sent: false,
            broken: None,
            in_place: None,
            opened_in_place: 0,
        }
    }

    /// Records opened in the caller's buffer (no copy) so far.
    pub fn opened_in_place(&self) -> u64 {
        self.opened_in_place
    }

    /// The inner stream.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// The inner stream.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.io
    }

    /// Records sent and received so far.
    pub fn records(&self) -> (u64, u64) {
        (self.send_seq, self.recv_seq)
    }

    /// Whether sealed bytes wait for room in the inner stream.
    pub fn pending(&self) -> bool {
        self.out_at < self.out.len()
    }

    /// Pushes pending sealed bytes; `WouldBlock` if some remain.
    fn push(&mut self) -> io::Result<()> {
        while self.out_at < self.out.len() {
            match self.io.write(&self.out[self.out_at..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out_at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.out_at = 0;
        Ok(())
    }

    /// Seals what `fill` writes after a record head into `out`.
    fn seal(&mut self, kind: u8, fill: impl FnOnce(&mut Vec<u8>)) {
        self.out.clear();
        self.out_at = 0;
        self.out.extend_from_slice(&[0; HEAD]);
        fill(&mut self.out);
        let len = self.out.len() - HEAD;
        let h = head(kind, len);
        self.out[..HEAD].copy_from_slice(&h);
        let tag = self
            .send
            .seal_in_place_separate_tag(nonce(self.send_seq), Aad::from(h), &mut self.out[HEAD..])
            .expect("a record within AES-GCM's limits");
        self.send_seq += 1;
        self.out.extend_from_slice(tag.as_ref());
    }

    /// Queues the close record (the stream's authenticated end) and pushes what it
    /// can; [`Write::flush`] pushes the rest.
    pub fn close(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.close_sent, true) {
            return match self.push() {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
                _ => Ok(()),
            };
        }
        match self.push() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Append after what is pending.
                let mut rest = self.out.split_off(self.out_at);
                self.seal(CLOSE, |_| {});
                rest.append(&mut self.out);
                self.out = rest;
                self.out_at = 0;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        self.seal(CLOSE, |_| {});
        match self.push() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(()),
        }
    }

    /// The head at `buf[start..]`, checked, with its kind and length; `None` if
    /// not all there.
    fn next_head(&self) -> io::Result<Option<([u8; HEAD], u8, usize)>> {
        if self.end - self.start < HEAD {
            return Ok(None);
        }
        let mut h = [0u8; HEAD];
        h.copy_from_slice(&self.buf[self.start..self.start + HEAD]);
        let len = u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize;
        let kind = h[0];
        if len > RECORD_MAX || kind > CLOSE || (kind == CLOSE && len != 0) || self.closed {
            return Err(invalid(SealError::BadHead {
                peer: self.peer.clone(),
                seq: self.recv_seq,
                kind,
                len,
            }));
        }
        Ok(Some((h, kind, len)))
    }

    /// Opens the record at `buf[start..]` if it is whole; `Ok(false)` if more bytes
    /// are needed.
    fn open_next(&mut self) -> io::Result<bool> {
        let have = self.end - self.start;
        let Some((h, kind, len)) = self.next_head()? else {
            return Ok(false);
        };
        if have < HEAD + len + TAG {
            return Ok(false);
        }
        let body = self.start + HEAD;
        let (text, tag) = self.buf[body..body + len + TAG].split_at_mut(len);
        let tag = aead::Tag::try_from(&*tag).map_err(|_| io::ErrorKind::InvalidData)?;
        self.recv
            .open_in_place_separate_tag(nonce(self.recv_seq), Aad::from(h), tag, text, 0..)
            .map_err(|_| {
                invalid(SealError::Forged {
                    peer: self.peer.clone(),
                    seq: self.recv_seq,
                })
            })?;
        self.recv_seq += 1;
        self.plain = (body, body + len);
        self.start = body + len + TAG;
        if kind == CLOSE {
            self.closed = true;
        }
        Ok(true)
    }
}

impl<S: Read + Write> Drop for Sealed<S> {
    /// A link dropped (moved off, or the process leaving) ends with its close
    /// record, as far as the socket takes it at once.
    fn drop(&mut self) {
        let _ = self.close();
        tracing::debug!(
            peer = %self.peer,
            sent = self.send_seq,
            received = self.recv_seq,
            opened_in_place = self.opened_in_place,
            "sealed link closed"
        );
    }
}

impl<S: Read + Write> Sealed<S> {
    /// Opens the next record, reading the inner stream for it: `Ok(false)` at the
    /// authenticated end. It reads no more than the record's rest or, if more, up to
    /// `limit` unread bytes (what the caller can take: records past it stay in the
    /// socket, for [`Sealed::read_in_place`] to read where they go).
    fn fill(&mut self, limit: usize) -> io::Result<bool> {
        loop {
            if self.open_next()? {
                return Ok(true);
            }
            if self.closed {
                return Ok(false);
            }
            let have = self.end - self.start;
            let rest = match self.next_head()? {
                Some((_, _, len)) => HEAD + len + TAG - have,
                None => HEAD - have,
            };
            self.read_more(rest.max(limit.saturating_sub(have)))?;
        }
    }

    /// One read of the inner stream into the buffer, `limit` bytes at most.
    fn read_more(&mut self, limit: usize) -> io::Result<()> {
        // Room for a whole record after what is unread.
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.start < RECORD_MAX + OVERHEAD {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let end = self.end;
        let to = self.buf.len().min(end + limit.max(1));
        loop {
            match self.io.read(&mut self.buf[end..to]) {
                Ok(0) => {
                    return Err(invalid(SealError::Truncated {
                        peer: self.peer.clone(),
                        seq: self.recv_seq,
                    }))
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl<S: Read + Write> Sealed<S> {
    /// Fails if the stream failed before, or if a record is being opened in place
    /// and `at` (the caller's buffer) is not where it lies.
    fn check(&mut self, at: Option<(usize, usize)>) -> io::Result<()> {
        if let (Some(p), None) = (&self.in_place, &self.broken) {
            if at.is_none_or(|(addr, room)| addr != p.addr || room < p.len) {
                self.broken = Some(format!(
                    "the encrypted stream from {}: record {} was being opened in a buffer its \
                     reader left",
                    self.peer, self.recv_seq
                ));
            }
        }
        match &self.broken {
            Some(why) => Err(io::Error::new(io::ErrorKind::InvalidData, why.clone())),
            None => Ok(()),
        }
    }

    /// Copies opened plaintext into `dst`; how much.
    fn take_plain(&mut self, dst: &mut [u8]) -> usize {
        let k = dst.len().min(self.plain.1 - self.plain.0);
        dst[..k].copy_from_slice(&self.buf[self.plain.0..self.plain.0 + k]);
        self.plain.0 += k;
        k
    }

    /// Reads as [`Read::read`] does, but opens each record of [`IN_PLACE_MIN`] bytes
    /// or more that fits in `dst` right there, read straight into it from the socket,
    /// without passing through this stream's buffer.
    ///
    /// After a call that returns `n` (or `WouldBlock`), `dst[n..]` may hold part of a
    /// record not yet authenticated: the next read must be a `read_in_place` into
    /// the same memory from `dst[n]` on, at least as long (the engine's direct
    /// receive does so: it comes back with the rest of the posted buffer). Any other
    /// read fails the stream (`InvalidData`) rather than lose those bytes. A record
    /// that fails its check leaves unspecified bytes in `dst`, and the error.
    pub fn read_in_place(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        self.check(Some((dst.as_ptr() as usize, dst.len())))?;
        let mut n = 0;
        let r = loop {
            n += self.take_plain(&mut dst[n..]);
            if n == dst.len() {
                break Ok(());
            }
            if self.in_place.is_some() {
                match self.read_record_in_place(&mut dst[n..]) {
                    Ok(Some(len)) => n += len,
                    Ok(None) => {}
                    Err(e) => break Err(e),
                }
                continue;
            }
            match self.open_next() {
                Ok(true) => continue,
                Ok(false) if self.closed => break Ok(()),
                Ok(false) => {}
                Err(e) => break Err(e),
            }
            // Only a head in the buffer: its record may go in place.
            if self.end - self.start == HEAD {
                match self.next_head() {
                    Ok(Some((head, DATA, len))) if len >= IN_PLACE_MIN && len <= dst.len() - n => {
                        self.in_place = Some(InPlace {
                            addr: dst[n..].as_ptr() as usize,
                            head,
                            len,
                            got: 0,
                            tag: [0; TAG],
                            tag_got: 0,
                        });
                        self.start = 0;
                        self.end = 0;
                        continue;
                    }
                    Err(e) => break Err(e),
                    _ => {}
                }
            }
            // Read the head alone, or the rest of a record that stays in the buffer.
            let need = match self.next_head() {
                Ok(None) => HEAD - (self.end - self.start),
                Ok(Some((_, _, len))) => HEAD + len + TAG - (self.end - self.start),
                Err(e) => break Err(e),
            };
            if let Err(e) = self.read_more(need) {
                break Err(e);
            }
        };
        match r {
            Ok(()) => Ok(n),
            Err(e) if n > 0 && e.kind() == io::ErrorKind::WouldBlock => Ok(n),
            Err(e) => {
                if e.kind() == io::ErrorKind::InvalidData {
                    self.broken = Some(e.to_string());
                }
                if n > 0 {
                    Ok(n)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Reads on the record being opened at `dst[0..]` (with its tag, and the next
    /// head into the buffer) and opens it when whole: `Some(its length)` then.
    fn read_record_in_place(&mut self, dst: &mut [u8]) -> io::Result<Option<usize>> {
        let Some(p) = self.in_place.as_mut() else {
            return Ok(None);
        };
        // The buffer is empty (taken when the record started): the next head goes
        // at its start.
        let got = {
            let mut iov = [
                io::IoSliceMut::new(&mut dst[p.got..p.len]),
                io::IoSliceMut::new(&mut p.tag[p.tag_got..]),
                io::IoSliceMut::new(&mut self.buf[self.end..HEAD]),
            ];
            match self.io.read_vectored(&mut iov) {
                Ok(0) => {
                    return Err(invalid(SealError::Truncated {
                        peer: self.peer.clone(),
                        seq: self.recv_seq,
                    }))
                }
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(None),
                Err(e) => return Err(e),
            }
        };
        let body = got.min(p.len - p.got);
        p.got += body;
        let tag = (got - body).min(TAG - p.tag_got);
        p.tag_got += tag;
        self.end += got - body - tag;
        if p.got < p.len || p.tag_got < TAG {
            return Ok(None);
        }
        let (head, len, tag) = (p.head, p.len, p.tag);
        self.in_place = None;
        let tag = aead::Tag::try_from(&tag[..]).map_err(|_| io::ErrorKind::InvalidData)?;
        self.recv
            .open_in_place_separate_tag(
                nonce(self.recv_seq),
                Aad::from(head),
                tag,
                &mut dst[..len],
                0..,
            )
            .map_err(|_| {
                invalid(SealError::Forged {
                    peer: self.peer.clone(),
                    seq: self.recv_seq,
                })
            })?;
        self.recv_seq += 1;
        self.opened_in_place += 1;
        Ok(Some(len))
    }
}

impl<S: Read + Write> Read for Sealed<S> {
    /// Fills `dst` as far as the inner stream allows: as with a socket, a short read
    /// means it would block now (the engine relies on it with edge-triggered
    /// readiness). A failure after some good bytes is returned by the next call.
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        self.check(None)?;
        let mut n = 0;
        loop {
            n += self.take_plain(&mut dst[n..]);
            if n == dst.len() {
                return Ok(n);
            }
            match self.fill(dst.len() - n + OVERHEAD) {
                Ok(true) => {}
                Ok(false) => return Ok(n),
                Err(e) if n > 0 && e.kind() == io::ErrorKind::WouldBlock => return Ok(n),
                Err(e) => {
                    if e.kind() == io::ErrorKind::InvalidData {
                        self.broken = Some(e.to_string());
                    }
                    return if n > 0 { Ok(n) } else { Err(e) };
                }
            }
        }
    }
}

impl<S: Read + Write> Write for Sealed<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.push()?;
        let mut taken = 0;
        self.seal(DATA, |out| {
            for b in bufs.iter().filter(|b| !b.is_empty()) {
                // A large buffer starts a record and ends one: its records hold its
                // bytes alone, for the reader to open them in place.
                let large = b.len() >= IN_PLACE_MIN;
                if large && taken > 0 {
                    break;
                }
                let k = b.len().min(RECORD_MAX - taken);
                out.extend_from_slice(&b[..k]);
                taken += k;
                if taken == RECORD_MAX || large {
                    break;
                }
            }
        });
        if taken == 0 {
            // Nothing to send: no empty record.
            self.send_seq -= 1;
            self.out.clear();
            return Ok(0);
        }
        // The bytes are ours now: what the socket does not take waits in `out`.
        match self.push() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(taken),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.push()?;
        self.io.flush()
    }
}

/// Whether the kernel offers the `tls` upper layer protocol (kTLS) on this TCP
/// socket: asked once per process; the answer is logged.
pub fn ktls_offered(socket: &impl std::os::fd::AsRawFd) -> bool {
    static OFFERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OFFERED.get_or_init(|| {
        // Attaching the upper layer alone changes nothing on the socket: without
        // TLS_TX/TLS_RX keys it passes bytes through.
        let r = set_ulp(socket.as_raw_fd(), b"tls");
        match &r {
            Ok(()) => tracing::info!(
                "the kernel offers kTLS (TCP_ULP tls); links are sealed in user space \
                 (ring AES-256-GCM) all the same"
            ),
            Err(e) => tracing::info!(
                error = %e,
                "the kernel does not offer kTLS (TCP_ULP tls); links are sealed in user \
                 space (ring AES-256-GCM)"
            ),
        }
        r.is_ok()
    })
}

#[allow(unsafe_code)]
fn set_ulp(fd: std::os::fd::RawFd, name: &[u8]) -> io::Result<()> {
    // SAFETY: `fd` is an open socket owned by the caller for the call's duration;
    // `name` is a valid buffer of the length given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Both ends' keys from one exchange, as the handshake makes them.
    pub(crate) fn pair_keys() -> (Keys, Keys) {
        let (a, b) = (Exchange::new(), Exchange::new());
        let (pa, pb) = (a.public, b.public);
        let t = b"transcript";
        (
            a.keys(&pb, &[7; 32], t, true).unwrap(),
            b.keys(&pa, &[7; 32], t, false).unwrap(),
        )
    }

    /// A stream over one shared byte queue (what one end writes, the other reads).
    #[derive(Default)]
    struct Pipe {
        bytes: Vec<u8>,
        at: usize,
        /// Bytes a write takes at most (then `WouldBlock`), to test partial writes.
        room: Option<usize>,
    }

    impl Read for Pipe {
        fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
            let n = dst.len().min(self.bytes.len() - self.at);
            if n == 0 && self.room.is_some() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            dst[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let n = match self.room.as_mut() {
                Some(0) => return Err(io::ErrorKind::WouldBlock.into()),
                Some(r) => {
                    let n = (*r).min(b.len());
                    *r -= n;
                    n
                }
                None => b.len(),
            };
            self.bytes.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn sealed_pair() -> (Sealed<Pipe>, Keys) {
        let (ki, ka) = pair_keys();
        (Sealed::new(Pipe::default(), ki, "rank 1".into()), ka)
    }

    /// Reads everything `bytes` holds through a sealed reader with keys `k`.
    fn read_all(bytes: Vec<u8>, k: Keys) -> io::Result<Vec<u8>> {
        let mut r = Sealed::new(
            Pipe {
                bytes,
                ..Pipe::default()
            },
            k,
            "rank 0 (10.0.0.1:4000)".into(),
        );
        let mut got = Vec::new();
        let mut b = vec![0u8; 1000];
        loop {
            let n = r.read(&mut b)?;
            if n == 0 {
                return Ok(got);
            }
            got.extend_from_slice(&b[..n]);
        }
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn bytes_cross_sealed_and_ciphertext_hides_them() {
        let (mut w, k) = sealed_pair();
        let msg = pattern(200_000);
        let mut at = 0;
        while at < msg.len() {
            at += w
                .write_vectored(&[
                    io::IoSlice::new(&msg[at..at + 10.min(msg.len() - at)]),
                    io::IoSlice::new(&msg[(at + 10).min(msg.len())..(at + 9000).min(msg.len())]),
                    io::IoSlice::new(&msg[(at + 9000).min(msg.len())..(at + 9100).min(msg.len())]),
                ])
                .unwrap();
        }
        w.close().unwrap();
        let wire = std::mem::take(&mut w.get_mut().bytes);
        // Records of 9,100 bytes (small buffers share one), the close record.
        assert_eq!(wire.len(), msg.len() + 23 * OVERHEAD);
        let needle = &msg[1000..1032];
        assert!(!wire.windows(32).any(|x| x == needle));
        assert_eq!(read_all(wire, k).unwrap(), msg);
    }

    /// The payload lengths of the records on `wire`.
    fn record_lengths(wire: &[u8]) -> Vec<usize> {
        let mut v = Vec::new();
        let mut at = 0;
        while at < wire.len() {
            let len = u32::from_be_bytes([0, wire[at + 1], wire[at + 2], wire[at + 3]]) as usize;
            v.push(len);
            at += HEAD + len + TAG;
        }
        v
    }

    #[test]
    fn a_large_buffer_starts_and_ends_its_records() {
        let (mut w, _) = sealed_pair();
        let (head, body, next, small) = ([1u8; 24], pattern(100 * 1024), [2u8; 24], [3u8; 100]);
        let bufs = [&head[..], &body, &next, &small];
        let (mut i, mut off) = (0, 0);
        while i < bufs.len() {
            let iov: Vec<io::IoSlice> = std::iter::once(&bufs[i][off..])
                .chain(bufs[i + 1..].iter().map(|b| &b[..]))
                .map(io::IoSlice::new)
                .collect();
            let mut n = w.write_vectored(&iov).unwrap();
            while i < bufs.len() && n >= bufs[i].len() - off {
                n -= bufs[i].len() - off;
                (i, off) = (i + 1, 0);
            }
            off += n;
        }
        let wire = std::mem::take(&mut w.get_mut().bytes);
        assert_eq!(
            record_lengths(&wire),
            vec![24, 65536, 100 * 1024 - 65536, 124]
        );
    }

    /// A stream that hands out at most `step` bytes a read, and `WouldBlock` every
    /// other call, as a socket on a slow path does.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        step: usize,
        block: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
            self.block = !self.block;
            if self.block && self.at < self.bytes.len() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = dst.len().min(self.step).min(self.bytes.len() - self.at);
            dst[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }

        fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
            // As readv: across the buffers.
            let mut n = 0;
            for b in bufs.iter_mut().filter(|b| !b.is_empty()) {
                let k = match self.read(b) {
                    Ok(k) => k,
                    Err(e) if n == 0 => return Err(e),
                    Err(_) => return Ok(n),
                };
                n += k;
                self.block = false;
                if k < b.len() {
                    break;
                }
            }
            Ok(n)
        }
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Sealed wire bytes of messages `sizes` long: each a 24-byte head and a body,
    /// written as the engine does (head and body in one vectored write).
    fn messages(sizes: &[usize]) -> (Vec<u8>, Vec<Vec<u8>>, Keys) {
        let (mut w, k) = sealed_pair();
        let bodies: Vec<Vec<u8>> = sizes
            .iter()
            .map(|&n| pattern(n + 3)[3..].to_vec())
            .collect();
        for b in &bodies {
            let head = [9u8; 24];
            let mut at = 0;
            while at < 24 + b.len() {
                let iov = if at < 24 {
                    vec![io::IoSlice::new(&head[at..]), io::IoSlice::new(b)]
                } else {
                    vec![io::IoSlice::new(&b[at - 24..])]
                };
                at += w.write_vectored(&iov).unwrap();
            }
        }
        w.close().unwrap();
        (std::mem::take(&mut w.get_mut().bytes), bodies, k)
    }

    /// Reads `sizes` messages as the engine does: each head through `read`, each
    /// body by `read_in_place` into a buffer of its own, again and again as the
    /// stream would block. The bodies, and the records opened in place.
    fn engine_reads(
        wire: Vec<u8>,
        k: Keys,
        sizes: &[usize],
        step: usize,
    ) -> io::Result<(Vec<Vec<u8>>, u64)> {
        let io = Trickle {
            bytes: wire,
            at: 0,
            step,
            block: false,
        };
        let mut r = Sealed::new(io, k, "rank 0 (10.0.0.1:4000)".into());
        let mut got = Vec::new();
        for &n in sizes {
            let mut head = [0u8; 24];
            let mut h = 0;
            while h < 24 {
                match r.read(&mut head[h..]) {
                    Ok(k) => h += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            assert_eq!(head, [9; 24]);
            let mut body = vec![0u8; n];
            let mut have = 0;
            while have < n {
                match r.read_in_place(&mut body[have..]) {
                    Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                    Ok(k) => have += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            got.push(body);
        }
        Ok((got, r.opened_in_place()))
    }

    #[test]
    fn large_records_open_in_the_readers_buffer_and_arrive_intact() {
        let sizes = [200_000, 10, 65536, 1 << 20, 20_000, 3];
        for step in [1000, 70_000, usize::MAX] {
            let (wire, bodies, k) = messages(&sizes);
            let (got, in_place) = engine_reads(wire, k, &sizes, step).unwrap();
            assert!(got == bodies, "step {step}: the bodies differ");
            // 200,000: three of 64 KiB (the last 3,392 through the buffer); 65,536:
            // one; 1 MiB: sixteen; 20,000: one.
            assert_eq!(in_place, 3 + 1 + 16 + 1, "step {step}");
        }
    }

    #[test]
    fn records_opened_in_place_fail_when_altered_replayed_reordered_or_cut() {
        let sizes = [300_000];
        let (wire, _, _) = messages(&sizes);
        let recs = record_lengths(&wire);
        // The second record (the first 64 KiB of the body) starts here.
        let r2 = HEAD + recs[0] + TAG;
        let rec = HEAD + 65536 + TAG;
        type Edit = Box<dyn Fn(Vec<u8>) -> Vec<u8>>;
        let cases: Vec<(&str, Edit)> = vec![
            (
                "flipped body",
                Box::new(move |mut w| {
                    w[r2 + rec + 1000] ^= 1;
                    w
                }),
            ),
            (
                "flipped tag",
                Box::new(move |mut w| {
                    w[r2 + 2 * rec - 1] ^= 1;
                    w
                }),
            ),
            (
                "replayed",
                Box::new(move |w| [&w[..r2 + rec], &w[r2..]].concat()),
            ),
            (
                "reordered",
                Box::new(move |w| {
                    [
                        &w[..r2],
                        &w[r2 + rec..r2 + 2 * rec],
                        &w[r2..r2 + rec],
                        &w[r2 + 2 * rec..],
                    ]
                    .concat()
                }),
            ),
            ("cut", Box::new(move |w| w[..r2 + rec + 5000].to_vec())),
        ];
        for (what, edit) in cases {
            // Replays and reorders must fail on their keys: use the same pair.
            let (wire, _, k) = messages(&sizes);
            let e = engine_reads(edit(wire), k, &sizes, 40_000).expect_err(what);
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{what}: {e}");
            let e = e.to_string();
            assert!(e.contains("rank 0 (10.0.0.1:4000)"), "{what}: {e}");
            let want = if what == "cut" {
                "was cut"
            } else {
                "failed authentication"
            };
            assert!(e.contains(want), "{what}: {e}");
        }
    }

    #[test]
    fn a_record_left_half_read_in_place_fails_the_stream() {
        let (wire, _, k) = messages(&[200_000]);
        let io = Trickle {
            bytes: wire,
            at: 0,
            step: 30_000,
            block: false,
        };
        let mut r = Sealed::new(io, k, "rank 0".into());
        let mut head = [0u8; 24];
        let mut h = 0;
        while h < 24 {
            h += r.read(&mut head[h..]).unwrap_or(0);
        }
        let mut body = vec![0u8; 200_000];
        // Part of the first record lands in `body`, then the stream would block.
        while r.in_place.as_ref().is_none_or(|p| p.got == 0) {
            let _ = r.read_in_place(&mut body);
        }
        let e = r.read(&mut [0u8; 100]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("a buffer its reader left"), "{e}");
        // And from then on.
        assert!(r.read_in_place(&mut body).is_err());
    }

    fn three_records() -> (Vec<u8>, Keys) {
        let (mut w, k) = sealed_pair();
        for i in 0..3u8 {
            w.write_all(&[i; 100]).unwrap();
        }
        w.close().unwrap();
        (std::mem::take(&mut w.get_mut().bytes), k)
    }

    fn err_of(r: io::Result<Vec<u8>>) -> String {
        let e = r.expect_err("the stream must fail");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        e.to_string()
    }

    #[test]
    fn a_flipped_byte_anywhere_fails_naming_the_peer() {
        let len = three_records().0.len();
        // Heads, bodies and tags of the first, a middle and the close record.
        for i in [0, 1, 3, 4, 50, 103, 104, 119, 120, 250, len - 20, len - 1] {
            let (mut bad, k) = three_records();
            bad[i] ^= 0x01;
            let e = err_of(read_all(bad, k));
            assert!(e.contains("rank 0 (10.0.0.1:4000)"), "byte {i}: {e}");
        }
    }

    #[test]
    fn replayed_reordered_dropped_and_cut_records_fail() {
        let rec = 4 + 100 + 16;
        type Edit = fn(Vec<u8>, usize) -> Vec<u8>;
        let cases: [(&str, Edit); 4] = [
            ("replayed", |w, r| {
                [&w[..2 * r], &w[r..2 * r], &w[2 * r..]].concat()
            }),
            ("reordered", |w, r| {
                [&w[r..2 * r], &w[..r], &w[2 * r..]].concat()
            }),
            ("dropped", |w, r| [&w[..r], &w[2 * r..]].concat()),
            ("cut", |w, r| w[..3 * r].to_vec()),
        ];
        for (what, edit) in cases {
            let (wire, k) = three_records();
            let e = err_of(read_all(edit(wire, rec), k));
            assert!(e.contains("rank 0"), "{what}: {e}");
            if what == "cut" {
                assert!(e.contains("cut after 3 records"), "{what}: {e}");
            } else {
                assert!(e.contains("failed authentication"), "{what}: {e}");
            }
        }
        // Untouched, it reads whole.
        let (wire, k) = three_records();
        assert_eq!(read_all(wire, k).unwrap().len(), 300);
    }

    #[test]
    fn keys_of_another_secret_or_exchange_do_not_open() {
        let (a, b) = (Exchange::new(), Exchange::new());
        let (pa, pb) = (a.public, b.public);
        let ki = a.keys(&pb, &[7; 32], b"t", true).unwrap();
        let kother = b.keys(&pa, &[8; 32], b"t", false).unwrap();
        let mut w = Sealed::new(Pipe::default(), ki, "x".into());
        w.write_all(b"hello").unwrap();
        w.close().unwrap();
        let wire = std::mem::take(&mut w.get_mut().bytes);
        assert!(err_of(read_all(wire.clone(), kother)).contains("failed authentication"));
        let (_, k2) = pair_keys();
        assert!(err_of(read_all(wire, k2)).contains("failed authentication"));
    }

    #[test]
    fn partial_writes_keep_the_rest_until_flushed() {
        let (ki, ka) = pair_keys();
        let mut w = Sealed::new(
            Pipe {
                room: Some(10),
                ..Pipe::default()
            },
            ki,
            "p".into(),
        );
        let msg = pattern(5000);
        assert_eq!(w.write(&msg).unwrap(), 5000);
        assert!(w.pending());
        // Full: the next write takes nothing and says so.
        let e = w.write(b"more").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        w.get_mut().room = None;
        w.flush().unwrap();
        assert!(!w.pending());
        w.close().unwrap();
        let wire = std::mem::take(&mut w.get_mut().bytes);
        assert_eq!(read_all(wire, ka).unwrap(), msg);
    }

    #[test]
    fn policy_follows_sites_and_overrides() {
        let wan = Policy {
            mode: Mode::Wan,
            sites: sites("a/n1;a/n2;b/n1", 3),
            forced: false,
        };
        assert!(!wan.wants(0, 1));
        assert!(wan.wants(0, 2));
        assert!(wan.ask(0, 1, Some(true)));
        assert!(!wan.ask(0, 2, Some(false)));
        let forced = Policy {
            mode: Mode::None,
            sites: None,
            forced: true,
        };
        assert!(!forced.ask(0, 2, Some(true)));
        assert!("all".parse::<Mode>().is_ok());
        assert!("yes".parse::<Mode>().unwrap_err().contains("expected wan"));
        assert_eq!(sites("a;b", 3), None);
    }
}
