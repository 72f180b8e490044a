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
        }
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

    /// Opens the record at `buf[start..]` if it is whole; `Ok(false)` if more bytes
    /// are needed.
    fn open_next(&mut self) -> io::Result<bool> {
        let have = self.end - self.start;
        if have < HEAD {
            return Ok(false);
        }
        let h: [u8; HEAD] = [
            self.buf[self.start],
            self.buf[self.start + 1],
            self.buf[self.start + 2],
            self.buf[self.start + 3],
        ];
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
    }
}

impl<S: Read + Write> Sealed<S> {
    /// Opens the next record, reading the inner stream for it: `Ok(false)` at the
    /// authenticated end.
    fn fill(&mut self) -> io::Result<bool> {
        loop {
            if self.open_next()? {
                return Ok(true);
            }
            if self.closed {
                return Ok(false);
            }
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
            match self.io.read(&mut self.buf[end..]) {
                Ok(0) => {
                    return Err(invalid(SealError::Truncated {
                        peer: self.peer.clone(),
                        seq: self.recv_seq,
                    }))
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl<S: Read + Write> Read for Sealed<S> {
    /// Fills `dst` as far as the inner stream allows: as with a socket, a short read
    /// means it would block now (the engine relies on it with edge-triggered
    /// readiness). A failure after some good bytes is returned by the next call.
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        if let Some(why) = &self.broken {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why.clone()));
        }
        let mut n = 0;
        loop {
            if self.plain.0 < self.plain.1 {
                let k = (dst.len() - n).min(self.plain.1 - self.plain.0);
                dst[n..n + k].copy_from_slice(&self.buf[self.plain.0..self.plain.0 + k]);
                self.plain.0 += k;
                n += k;
            }
            if n == dst.len() {
                return Ok(n);
            }
            match self.fill() {
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
            for b in bufs {
                let k = b.len().min(RECORD_MAX - taken);
                out.extend_from_slice(&b[..k]);
                taken += k;
                if taken == RECORD_MAX {
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
mod tests {
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
                    io::IoSlice::new(&msg[(at + 10).min(msg.len())..]),
                ])
                .unwrap();
        }
        w.close().unwrap();
        let wire = std::mem::take(&mut w.get_mut().bytes);
        // Four data records (64 KiB at most each) and the close record.
        assert_eq!(wire.len(), msg.len() + 5 * OVERHEAD);
        let needle = &msg[1000..1032];
        assert!(!wire.windows(32).any(|x| x == needle));
        assert_eq!(read_all(wire, k).unwrap(), msg);
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
