//! Shared-memory links between two ranks of one node: one more kind of link under
//! the engine, a byte stream like a socket (the same frames, matching and
//! eager/rendezvous protocol), carried by two lock-free single-producer rings in a
//! segment only the two processes map.
//!
//! # How a link comes to be
//! Two ranks of one machine first link over TCP, as any two ranks, and prove on it
//! that they belong to the job (the handshake). Then the lower rank makes a segment
//! (`memfd_create`, sealed against resizing) and offers it on that link
//! ([`Offer`]): its node (boot id, network and pid namespaces), its pid, the segment's
//! and its doorbell's descriptor numbers and a random token written in the segment.
//! The other rank, if it is on the same node, opens both through
//! `/proc/<pid>/fd/<n>`, which the kernel allows only to the same user (or root), maps
//! the segment, checks the token and accepts; the two then move their messages from
//! the TCP link to the new one as a relayed link moves to a direct one (nothing is
//! reordered, see `Core::add_conn`), and the TCP link closes. Anything amiss (another
//! node, another user, a wrong token) leaves the pair on TCP. The segment has no name
//! anywhere: a stranger has nothing to open.
//!
//! # Large messages
//! A message above the eager limit is announced with the address of its buffer; the
//! receiver copies it straight into its posted buffer with one `process_vm_readv`
//! (Linux's cross-memory attach: one copy instead of two through the ring) and tells
//! the sender it is done. Where the kernel refuses (a ptrace policy such as Yama's),
//! the data streams through the ring, pipelined, as on a socket.
//!
//! # Sharing a large copy
//! One process copying a large message leaves the other's core idle: the sender
//! only waits for `Fin`. So a receiver that copies a large message (at least
//! [`SHARE_MIN`]) cuts it into chunks ([`share_chunk`], at most 16), opens its
//! share slot for the message (the sender's request id in the high half of a word,
//! the next chunk to take in the low) and tells the sender where its buffer is
//! (`Share`). Both then take chunks with a compare-and-swap on that word: the
//! receiver reads its chunks from the sender's memory (`process_vm_readv`), the
//! sender writes its own into the receiver's (`process_vm_writev`) and marks each
//! one done, or failed if the kernel refused it. Once every chunk is taken, the
//! receiver waits for the sender's chunks in flight (a copy of at most one chunk)
//! and copies the failed ones itself. A sender busy elsewhere takes nothing: the
//! receiver then copies every chunk itself, as before. Two cores copy 4 MiB
//! about twice as fast as one here: 280-340 against 570-770 µs (`share_floor`).
//!
//! # Waiting
//! Nothing in a ring needs a system call: a waiting rank polls the rings while it
//! spins (see `Engine::wait`). Before it sleeps in epoll it raises its flag in every
//! ring it reads or writes and checks them once more; a peer that then writes to it
//! (or makes room) sees the flag and writes its doorbell, an eventfd in its epoll.
//! So an idle rank gives its core back and costs its peers one eventfd write per
//! sleep, and a busy pair never makes a system call.
//!
//! # Records (fast boxes)
//! A ring carries records, each at the start of a cache line: a word (`u64`: the
//! record's number in its high half, its length in the low), then its bytes, up to
//! the next line. The writer copies the bytes, makes sure the word of the record
//! after it is zero (the words of the lines ahead are zeroed in batches after a
//! record is published, off the way of the next small one; a long record zeroes
//! its next word itself), then publishes the record with one release store of its
//! word; the reader polls the word where the next record starts and takes the
//! record when it carries the number expected. So a small message (the word, the
//! frame's 24-byte header and the payload: 33 bytes for 1 B, one line up to 32 B of
//! payload) crosses in one cache line, the word that says it is there included, as
//! in Open MPI's fast boxes (`btl/sm`'s `fbox`), and the reader's one miss brings it
//! whole (the rings of version 1 kept the head in a line of its own: two misses per
//! message). The receiving engine matches a small message from the record's header
//! in place and copies its payload straight into the posted buffer (`peek_frame`,
//! `take_frame`), as ob1 does from a fast box.
//! A word left by an earlier lap never passes: it was zeroed, or it is the word of
//! an older record, whose number differs. Records are at most a quarter of a ring
//! (a longer write is cut, as a socket cuts it); their bytes may wrap at the ring's
//! end. The reader publishes how far it has consumed (whole records), which the
//! writer reads only when the room it last saw runs short.
//!
//! # Layout
//! ```text
//! 0      magic u64 | version u32 | ring bytes u32 | token [u8; 32]
//! 4096   ring 0 (offerer → acceptor): consumed u64 @+128, closed u32 @+256
//! 5120   ring 1 (acceptor → offerer): the same
//! 6144   sleeping u32 of side 0 @+0, of side 1 @+128
//! 6656   lends of side 0: 64 u64 words; 7168: those of side 1
//! 7680   share slot of side 0 (as receiver): claim u64, done u64, failed u64;
//!        7808: that of side 1
//! 8192   ring 0's records, then ring 1's
//! ```
//! Each side keeps its own copy of what it owns (the writer its head, the reader its
//! position) and only publishes it: a peer that scribbles over the segment cannot
//! make us read or write outside the rings, and a header that makes no sense (a
//! record longer than a record may be, a consumed position we never wrote up to)
//! closes the link naming it.
#![allow(unsafe_code)]

use super::core::Peek;
use super::wire::HEADER;
use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

const MAGIC: u64 = 0x7163_675f_7368_6d31; // "qcg_shm1"
const VERSION: u32 = 4;
/// Bytes of each ring (a power of two).
pub const RING: usize = 256 * 1024;
const RINGS_AT: usize = 8192;
const CTL_AT: usize = 4096;
const CTL_STRIDE: usize = 1024;
const SLEEP_AT: usize = 6144;
/// Each side's lend words (see `ShmLink::lend`): [`LENDS`] u64 each.
const LENDS_AT: usize = 6656;
/// Lends a side may have out at once.
pub const LENDS: usize = 64;
/// Each side's share slot (see `ShmLink::open_share`): three u64 words.
const SHARE_AT: usize = 7680;
/// Smallest message whose copy the two sides share.
pub const SHARE_MIN: usize = 128 * 1024;
/// Most chunks a shared copy is cut into (one bit each in the slot's masks).
pub const SHARE_CHUNKS: usize = 64;

/// Bytes in each chunk of a shared copy of `len` bytes: a sixteenth of it in whole
/// pages, at least 64 KiB (so at most 16 chunks, under [`SHARE_CHUNKS`]). Both
/// sides compute it. Each chunk is a system call, and the two sides finish
/// closer together the more chunks there are: 4 MiB copied alone took 660-880 µs
/// in 64 chunks, 570-770 in 16; shared, 290-400 and 280-340 (three runs each of
/// `share_floor`).
pub fn share_chunk(len: usize) -> usize {
    let page = 4096;
    let c = len.div_ceil(16).div_ceil(page) * page;
    c.max(64 * 1024)
}

/// A shared copy's chunks: how long each is ([`share_chunk`]; the last may be
/// shorter) and how many there are.
pub fn share_geometry(len: usize) -> (usize, u32) {
    let chunk = share_chunk(len);
    (chunk, len.div_ceil(chunk) as u32)
}
const SEGMENT: usize = RINGS_AT + 2 * RING;
/// A cache line: records start at one.
const LINE: usize = 64;
/// Bytes of a record's word.
const WORD: usize = 8;
/// Most bytes in one record (its word and bytes fill a quarter of a ring).
pub const MAX_RECORD: usize = RING / 4 - WORD;
/// A read goes on to the next record only once it has this many bytes: bulk data
/// is read in large pieces, a small message alone.
const BATCH: usize = 4096;
/// Bytes of ring ahead of the writer's head whose line-start words it keeps zeroed
/// (topped up by halves, after a record is published; see `zero_ahead`).
const AHEAD: u64 = 4096;
/// Bytes of an offer on the wire.
pub const OFFER_LEN: usize = 104;
/// Bytes of an acceptance on the wire.
pub const ACCEPT_LEN: usize = 8;

fn errno(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Where this process runs: links over memory are offered only between processes
/// of the same kernel, network namespace and pid namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    boot: [u8; 36],
    netns: u64,
    pidns: u64,
}

impl Node {
    /// This process's node, if the kernel says.
    pub fn here() -> Option<Node> {
        use std::os::unix::fs::MetadataExt;
        let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let id = id.trim().as_bytes();
        let mut boot = [0u8; 36];
        if id.len() != 36 {
            return None;
        }
        boot.copy_from_slice(id);
        Some(Node {
            boot,
            netns: std::fs::metadata("/proc/self/ns/net").ok()?.ino(),
            pidns: std::fs::metadata("/proc/self/ns/pid").ok()?.ino(),
        })
    }
}

/// What the offering rank tells the other on their TCP link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    /// The offerer's node.
    pub node: Node,
    /// The offerer's pid.
    pub pid: u32,
    /// The segment's descriptor in the offerer.
    pub segment_fd: u32,
    /// The offerer's doorbell descriptor.
    pub bell_fd: u32,
    /// Written in the segment: proves the right file was opened.
    pub token: [u8; 32],
    /// Bytes of each ring.
    pub ring: u64,
}

impl Offer {
    /// Its bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(OFFER_LEN);
        b.extend_from_slice(&self.node.boot);
        b.extend_from_slice(&self.node.netns.to_le_bytes());
        b.extend_from_slice(&self.node.pidns.to_le_bytes());
        b.extend_from_slice(&self.pid.to_le_bytes());
        b.extend_from_slice(&self.segment_fd.to_le_bytes());
        b.extend_from_slice(&self.bell_fd.to_le_bytes());
        b.extend_from_slice(&self.token);
        b.extend_from_slice(&self.ring.to_le_bytes());
        b
    }

    /// Reads an offer; `None` if it is not one.
    pub fn decode(b: &[u8]) -> Option<Offer> {
        if b.len() != OFFER_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        let mut boot = [0u8; 36];
        boot.copy_from_slice(&b[..36]);
        let mut token = [0u8; 32];
        token.copy_from_slice(&b[64..96]);
        Some(Offer {
            node: Node {
                boot,
                netns: u64_at(36),
                pidns: u64_at(44),
            },
            pid: u32_at(52),
            segment_fd: u32_at(56),
            bell_fd: u32_at(60),
            token,
            ring: u64_at(96),
        })
    }
}

/// What the accepting rank answers: its pid and doorbell.
pub fn encode_accept(pid: u32, bell_fd: u32) -> Vec<u8> {
    let mut b = pid.to_le_bytes().to_vec();
    b.extend_from_slice(&bell_fd.to_le_bytes());
    b
}

/// Reads an acceptance: (pid, doorbell descriptor).
pub fn decode_accept(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() != ACCEPT_LEN {
        return None;
    }
    Some((
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
    ))
}

/// A process's doorbell: a pipe whose reading end is in its epoll; peers that find
/// it asleep write a byte. (A pipe rather than an eventfd: a peer opens it through
/// `/proc/<pid>/fd/<n>`, which the kernel allows for a pipe and not for an eventfd.)
#[derive(Debug)]
pub struct Bell {
    /// The end we read (ours only).
    rx: Option<OwnedFd>,
    /// The end written.
    tx: OwnedFd,
}

impl Bell {
    /// A new doorbell of our own.
    pub fn new() -> io::Result<Bell> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into a live array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
            return Err(errno("pipe2"));
        }
        // SAFETY: two fresh descriptors we own.
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Bell { rx: Some(rx), tx })
    }

    /// A peer's doorbell, opened through /proc (checked to be a pipe).
    fn open(pid: u32, fd: u32) -> io::Result<Bell> {
        let path = format!("/proc/{pid}/fd/{fd}");
        let target = std::fs::read_link(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
        if !target.to_string_lossy().starts_with("pipe:") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path} is not a doorbell ({})", target.display()),
            ));
        }
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
        Ok(Bell {
            rx: None,
            tx: f.into(),
        })
    }

    /// The descriptor to watch (ours) and to offer to peers.
    pub fn raw(&self) -> RawFd {
        self.rx.as_ref().unwrap_or(&self.tx).as_raw_fd()
    }

    /// Wakes the owner.
    fn ring(&self) {
        let one = 1u8;
        // SAFETY: writes one byte from a live u8; a full pipe (EAGAIN) is fine: the
        // owner has wake-ups pending already.
        let _ = unsafe { libc::write(self.tx.as_raw_fd(), (&one as *const u8).cast(), 1) };
    }

    /// Empties it after a wake-up.
    pub fn clear(&self) {
        let Some(rx) = &self.rx else { return };
        let mut b = [0u8; 256];
        // SAFETY: reads into a live local array from our descriptor.
        while unsafe { libc::read(rx.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) } > 0 {}
    }
}

/// A mapped segment.
#[derive(Debug)]
struct Map {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide memory; every access goes through atomics or
// byte copies bounded by the ring protocol, under the engine's lock.
unsafe impl Send for Map {}

impl Map {
    /// Maps `len` bytes of `fd`; `populate`: every page at once, not as touched.
    fn new(fd: RawFd, len: usize, populate: bool) -> io::Result<Map> {
        let flags = if populate {
            libc::MAP_SHARED | libc::MAP_POPULATE
        } else {
            libc::MAP_SHARED
        };
        // SAFETY: maps `len` bytes of a descriptor we hold; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(errno("mmap"));
        }
        Ok(Map {
            base: p.cast(),
            len,
        })
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= self.len && off % 8 == 0);
        // SAFETY: in bounds and aligned (page-aligned base, offsets multiple of 8);
        // the mapping lives as long as `self`.
        unsafe { &*self.base.add(off).cast::<AtomicU64>() }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + 4 <= self.len && off % 4 == 0);
        // SAFETY: as `u64_at`.
        unsafe { &*self.base.add(off).cast::<AtomicU32>() }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no reference outlives `self`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A segment made by the offering rank, waiting for the other's answer.
#[derive(Debug)]
pub struct Pending {
    map: Map,
    fd: OwnedFd,
    offer: Offer,
}

impl Pending {
    /// Makes a segment and the offer that describes it (`populate`: see
    /// [`super::POPULATE_RANKS`]).
    pub fn new(node: Node, bell: &Bell, populate: bool) -> io::Result<Pending> {
        let name = c"qcg-link";
        // SAFETY: a valid C string; a negative result is an error.
        let fd = unsafe {
            libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if fd < 0 {
            return Err(errno("memfd_create"));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let file = File::from(fd);
        file.set_len(SEGMENT as u64)
            .map_err(|e| io::Error::new(e.kind(), format!("sizing the segment: {e}")))?;
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        let fd: OwnedFd = file.into();
        // SAFETY: fcntl on our descriptor with integer arguments.
        let r = unsafe {
            libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
            )
        };
        if r < 0 {
            return Err(errno("sealing the segment"));
        }
        let map = Map::new(fd.as_raw_fd(), SEGMENT, populate)?;
        let mut token = [0u8; 32];
        use ring::rand::SecureRandom;
        ring::rand::SystemRandom::new()
            .fill(&mut token)
            .map_err(|_| io::Error::other("no randomness for the segment's token"))?;
        // SAFETY: the first 48 bytes of our fresh mapping, written before anyone else
        // can open it (the offer is not sent yet).
        unsafe {
            std::ptr::copy_nonoverlapping(token.as_ptr(), map.base.add(16), 32);
        }
        map.u32_at(8).store(VERSION, Ordering::Relaxed);
        map.u32_at(12).store(RING as u32, Ordering::Relaxed);
        map.u64_at(0).store(MAGIC, Ordering::Release);
        let offer = Offer {
            node,
            pid: std::process::id(),
            segment_fd: fd.as_raw_fd() as u32,
            bell_fd: bell.raw() as u32,
            token,
            ring: RING as u64,
        };
        Ok(Pending { map, fd, offer })
    }

    /// The offer to send.
    pub fn offer(&self) -> &Offer {
        &self.offer
    }

    /// The peer accepted: the link, our side (0).
    pub fn accepted(self, pid: u32, bell_fd: u32) -> io::Result<ShmLink> {
        let bell = Bell::open(pid, bell_fd)?;
        let pidfd = pidfd_open(pid);
        drop(self.fd);
        Ok(ShmLink::new(self.map, 0, bell, pidfd, pid))
    }
}

/// Opens the segment of `offer`, as the accepting rank: our side (1). An error says
/// why not (then the pair stays on TCP). `populate`: as [`Pending::new`].
pub fn accept(offer: &Offer, here: Option<Node>, populate: bool) -> io::Result<ShmLink> {
    if here != Some(offer.node) {
        return Err(io::Error::other("the peer is on another node"));
    }
    if offer.ring != RING as u64 {
        return Err(io::Error::other(format!(
            "rings of {} bytes, this version uses {RING}",
            offer.ring
        )));
    }
    let path = format!("/proc/{}/fd/{}", offer.pid, offer.segment_fd);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    let len = file.metadata()?.len();
    if len != SEGMENT as u64 {
        return Err(io::Error::other(format!(
            "{path} has {len} bytes, not a segment's {SEGMENT}"
        )));
    }
    // SAFETY: fcntl on a descriptor we hold.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 || seals & (libc::F_SEAL_SHRINK | libc::F_SEAL_GROW) == 0 {
        return Err(io::Error::other(format!(
            "{path} is not sealed against resizing"
        )));
    }
    let map = Map::new(file.as_raw_fd(), SEGMENT, populate)?;
    let mut token = [0u8; 32];
    // SAFETY: 32 bytes inside the mapping into a local array.
    unsafe { std::ptr::copy_nonoverlapping(map.base.add(16), token.as_mut_ptr(), 32) };
    if map.u64_at(0).load(Ordering::Acquire) != MAGIC
        || map.u32_at(8).load(Ordering::Relaxed) != VERSION
        || token
            .iter()
            .zip(offer.token)
            .fold(0u8, |d, (a, b)| d | (a ^ b))
            != 0
    {
        return Err(io::Error::other(format!(
            "{path} is not the segment offered (wrong magic, version or token)"
        )));
    }
    let bell = Bell::open(offer.pid, offer.bell_fd)?;
    let pidfd = pidfd_open(offer.pid);
    Ok(ShmLink::new(map, 1, bell, pidfd, offer.pid))
}

/// A ring whose header makes no sense: a record longer than a record may be, or a
/// consumed position the writer never reached.
fn corrupt(what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("corrupt ring header ({what}): closing the shared-memory link"),
    )
}

/// A descriptor that turns readable when process `pid` exits; `None` where the
/// kernel (older than 5.3) or a tool under which we run (valgrind) has no
/// `pidfd_open`: a peer that dies is then noticed by its silence (the liveness
/// limit), not at once. Said once per process.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: the pidfd_open system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if fd < 0 {
        static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            tracing::info!(
                error = %errno("pidfd_open"),
                "cannot watch a shared-memory peer's process: one that dies is noticed when \
                 it stops sending (the liveness limit), not at once"
            );
        }
        return None;
    }
    // SAFETY: a fresh descriptor we own.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Bytes a record of `len` bytes of data takes in a ring: its word and its data,
/// up to the next cache line.
fn record_size(len: usize) -> usize {
    (WORD + len + LINE - 1) & !(LINE - 1)
}

/// One end of a shared-memory link.
#[derive(Debug)]
pub struct ShmLink {
    map: Map,
    /// 0: the offerer, 1: the acceptor.
    side: usize,
    /// Where our next record goes in the ring we write (a line's start).
    head: u64,
    /// The number our next record carries.
    seq_out: u32,
    /// Where the next record starts in the ring we read (a line's start).
    tail: u64,
    /// The number the next record we read must carry.
    seq_in: u32,
    /// Bytes of the record being read not read yet (0: none started).
    left: usize,
    /// Where they are.
    at: u64,
    /// The peer's consumed position in the ring we write, as last read: room is
    /// counted from it and read again only when it seems short (the line stays in
    /// the peer's cache).
    seen_tail: u64,
    /// The words of the lines from `head` up to here are zero (a fresh segment is
    /// zero throughout).
    zeroed: u64,
    /// The peer's doorbell.
    bell: Bell,
    /// Readable once the peer's process has exited (`None`: see `pidfd_open`).
    pidfd: Option<OwnedFd>,
    pid: u32,
    /// Its process is gone: what it wrote is read to the end, then the link ends.
    peer_gone: bool,
    /// We shut our side.
    shut: bool,
    /// Large messages may be copied from the peer's memory.
    pub single_copy: bool,
    /// Large copies are shared with the sender (see the module's docs).
    pub share: bool,
    /// Our lend words in use (bit i: word i).
    lent: u64,
    /// Lends made so far (a lend's number is this count, times [`LENDS`], plus
    /// its word).
    lends: u64,
}

impl ShmLink {
    fn new(map: Map, side: usize, bell: Bell, pidfd: Option<OwnedFd>, pid: u32) -> ShmLink {
        ShmLink {
            map,
            side,
            head: 0,
            seq_out: 1,
            tail: 0,
            seq_in: 1,
            left: 0,
            at: 0,
            seen_tail: 0,
            zeroed: RING as u64,
            bell,
            pidfd,
            pid,
            peer_gone: false,
            shut: false,
            single_copy: true,
            share: true,
            lent: 0,
            lends: 0,
        }
    }

    fn lend_word(&self, side: usize, i: usize) -> &AtomicU64 {
        self.map
            .u64_at(LENDS_AT + side * LENDS * 8 + (i % LENDS) * 8)
    }

    /// Marks memory of ours lent to the peer, which may copy it (`read_peer`) for as
    /// long as the mark stands: returns the lend's number (never 0, below 2³⁰), or
    /// `None` when all our lend words are in use. The peer checks the mark after
    /// its copy (`peer_lends`): a copy made while we took the memory back
    /// (`take_back`) is thrown away, so we may reuse the memory at once.
    pub fn lend(&mut self) -> Option<u64> {
        let i = (!self.lent).trailing_zeros() as usize;
        if i >= LENDS {
            return None;
        }
        self.lends = (self.lends + 1) % (1 << 24);
        let n = (self.lends.max(1) * LENDS as u64) | i as u64;
        self.lent |= 1 << i;
        self.lend_word(self.side, i).store(n, Ordering::SeqCst);
        Some(n)
    }

    /// Ends lend `n`: done with, or taken back. After this returns, a copy the peer
    /// makes (or is making) of the memory fails its check.
    pub fn take_back(&mut self, n: u64) {
        let i = (n % LENDS as u64) as usize;
        let w = self.lend_word(self.side, i);
        if self.lent & (1 << i) != 0 && w.load(Ordering::Relaxed) == n {
            w.store(0, Ordering::SeqCst);
            self.lent &= !(1 << i);
        }
        fence(Ordering::SeqCst);
    }

    /// Whether the peer's lend `n` still stands: checked after copying what it
    /// lent, whose bytes are good only if it does (the fence orders our copy
    /// before this look, against the peer's `take_back` before it reuses them).
    pub fn peer_lends(&self, n: u64) -> bool {
        fence(Ordering::SeqCst);
        n != 0
            && self
                .lend_word(1 - self.side, (n % LENDS as u64) as usize)
                .load(Ordering::SeqCst)
                == n
    }

    fn share_word(&self, side: usize, i: usize) -> &AtomicU64 {
        self.map.u64_at(SHARE_AT + side * 128 + i * 8)
    }

    /// Opens our share slot for the peer's message `id`: no chunk taken, none done.
    pub fn open_share(&self, id: u32) {
        self.share_word(self.side, 1).store(0, Ordering::Relaxed);
        self.share_word(self.side, 2).store(0, Ordering::Relaxed);
        self.share_word(self.side, 0)
            .store(u64::from(id) << 32, Ordering::SeqCst);
    }

    /// Takes the next of the `chunks` chunks of message `id`, in our slot
    /// (`ours`: we receive it) or the peer's (we send it). `Ok(None)` when all are
    /// taken or the peer's slot holds another message (the receiver finished
    /// without us); an error when our own slot holds another message, which only a
    /// peer scribbling over the segment does.
    pub fn claim(&self, ours: bool, id: u32, chunks: u32) -> io::Result<Option<u32>> {
        let side = if ours { self.side } else { 1 - self.side };
        let w = self.share_word(side, 0);
        let mut cur = w.load(Ordering::Acquire);
        loop {
            if cur >> 32 != u64::from(id) {
                if ours {
                    return Err(corrupt(format!(
                        "the share slot names message {} while we copy {id}",
                        cur >> 32
                    )));
                }
                return Ok(None);
            }
            if cur as u32 >= chunks {
                return Ok(None);
            }
            match w.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(Some(cur as u32)),
                Err(now) => cur = now,
            }
        }
    }

    /// Marks chunk `i` of the peer's message written (`ok`) or refused.
    pub fn helped(&self, i: u32, ok: bool) {
        self.share_word(1 - self.side, if ok { 1 } else { 2 })
            .fetch_or(1 << (i % 64), Ordering::Release);
    }

    /// The chunks the peer wrote into our buffer, and those it could not.
    pub fn share_marks(&self) -> (u64, u64) {
        (
            self.share_word(self.side, 1).load(Ordering::Acquire),
            self.share_word(self.side, 2).load(Ordering::Acquire),
        )
    }

    /// Whether the peer's process still runs (as far as its pidfd, or without one
    /// its pid, tells).
    pub fn peer_alive(&self) -> bool {
        if self.peer_gone {
            return false;
        }
        let Some(fd) = &self.pidfd else {
            // No pidfd (a kernel before 5.3): is there still a process of that pid?
            // SAFETY: signal 0 only checks; no signal is sent.
            let gone = unsafe { libc::kill(self.pid as libc::pid_t, 0) } != 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            return !gone;
        };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd of ours, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        !(n > 0 && p.revents & libc::POLLIN != 0)
    }

    /// The descriptor that turns readable when the peer's process exits, if the
    /// kernel gave one.
    pub fn pidfd(&self) -> Option<RawFd> {
        self.pidfd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Its process exited: what it wrote is still read, then the link ends.
    pub fn peer_exited(&mut self) {
        self.peer_gone = true;
    }

    fn out_ctl(&self) -> usize {
        CTL_AT + self.side * CTL_STRIDE
    }

    fn in_ctl(&self) -> usize {
        CTL_AT + (1 - self.side) * CTL_STRIDE
    }

    fn data(&self, ring: usize) -> *mut u8 {
        // SAFETY (of the arithmetic): inside the mapping, see the layout.
        unsafe { self.map.base.add(RINGS_AT + ring * RING) }
    }

    /// The word at `pos` (a line's start) of ring `ring`.
    fn word(&self, ring: usize, pos: u64) -> &AtomicU64 {
        self.map
            .u64_at(RINGS_AT + ring * RING + (pos as usize & (RING - 1)))
    }

    fn peer_sleeping(&self) -> &AtomicU32 {
        self.map.u32_at(SLEEP_AT + (1 - self.side) * 128)
    }

    /// After a write: rings the peer's doorbell if it sleeps. The fence orders our
    /// record's store before the flag's load, against the peer's flag store and its
    /// last look at our ring (each side stores, then loads the other's word), so a
    /// message is never left unseen by a sleeper.
    fn wake_peer(&self) {
        fence(Ordering::SeqCst);
        self.ring_if_sleeping();
    }

    /// Rings the peer's doorbell if its flag says it sleeps. Sound after a
    /// sequentially consistent store or fence of ours: the sleeper raises its flag,
    /// fences, and looks at our ring once more (`Core::polled_sleep`).
    #[inline]
    fn ring_if_sleeping(&self) {
        let s = self.peer_sleeping();
        if s.load(Ordering::SeqCst) != 0 && s.swap(0, Ordering::SeqCst) != 0 {
            self.bell.ring();
        }
    }

    /// Raises (or lowers) our flag that asks the peer to ring our doorbell.
    pub fn set_sleeping(&self, on: bool) {
        self.map
            .u32_at(SLEEP_AT + self.side * 128)
            .store(u32::from(on), Ordering::SeqCst);
    }

    /// The length of the next record of the ring we read, if it is there: one load
    /// of the line that also holds (the start of) its data.
    #[inline]
    fn next_record(&self) -> io::Result<Option<usize>> {
        let w = self.word(1 - self.side, self.tail).load(Ordering::Acquire);
        if (w >> 32) as u32 != self.seq_in {
            return Ok(None);
        }
        let len = w as u32 as usize;
        if len == 0 || len > MAX_RECORD {
            return Err(corrupt(format!(
                "record {} at {} says {len} bytes, a record holds 1 to {MAX_RECORD}",
                self.seq_in, self.tail
            )));
        }
        Ok(Some(len))
    }

    /// Room to write (bytes of ring free), at least `want` if there is: the peer's
    /// consumed position is read again only when what we saw last leaves less.
    fn room_for(&mut self, want: usize) -> io::Result<usize> {
        let used = self.head.wrapping_sub(self.seen_tail) as usize;
        if RING - used >= want {
            return Ok(RING - used);
        }
        let (room, tail) = self.room_now()?;
        self.seen_tail = tail;
        Ok(room)
    }

    /// Room now, and the peer's consumed position it was counted from.
    fn room_now(&self) -> io::Result<(usize, u64)> {
        let tail = self
            .map
            .u64_at(self.out_ctl() + 128)
            .load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        if used > RING as u64 || tail % LINE as u64 != 0 {
            return Err(corrupt(format!(
                "the reader says it consumed up to {tail}, we wrote up to {}",
                self.head
            )));
        }
        Ok((RING - used as usize, tail))
    }

    /// Zeroes the words of the lines ahead of `head`, as far as the reader has
    /// freed them, once fewer than half of `AHEAD`'s are: done after a record is
    /// published, so that the next one's word is zero already and its store (a miss
    /// on a line the ring last used a lap ago) is not on the way of the record it
    /// follows, as it would be with stores leaving in order. The reader's consumed
    /// position is read again when what we saw last frees too little.
    fn zero_ahead(&mut self) {
        if self.zeroed >= self.head + AHEAD / 2 {
            return;
        }
        if self.seen_tail + (RING as u64) < self.head + AHEAD {
            // A corrupt position is reported by the next write (`room_for`).
            if let Ok((_, tail)) = self.room_now() {
                self.seen_tail = tail;
            }
        }
        let limit = (self.seen_tail + RING as u64).min(self.head + AHEAD);
        let mut p = self.zeroed.max(self.head);
        while p < limit {
            self.word(self.side, p).store(0, Ordering::Relaxed);
            p += LINE as u64;
        }
        self.zeroed = self.zeroed.max(p);
    }

    /// The next record, looked at in place (see `LinkIo::peek_frame`): a frame
    /// header's bytes and the record's length when a whole record is there, not
    /// started, at least a header long and not wrapping at the ring's end.
    pub fn peek_frame(&self) -> Peek {
        if self.left != 0 {
            return Peek::Other;
        }
        let len = match self.next_record() {
            Ok(Some(len)) => len,
            Ok(None) if !self.peer_gone && !self.closed() => return Peek::Nothing,
            // The end, or a corrupt header: the usual read says which.
            _ => return Peek::Other,
        };
        let at = (self.tail as usize + WORD) & (RING - 1);
        if len < HEADER || at + len > RING {
            return Peek::Other;
        }
        let mut head = [0u8; HEADER];
        // SAFETY: the first HEADER bytes of a record the peer published (its word
        // read with acquire in `next_record`), inside the ring (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.data(1 - self.side).add(at),
                head.as_mut_ptr(),
                HEADER,
            );
        }
        Peek::Frame { head, len }
    }

    /// Copies bytes `skip..skip + dst.len()` of the record `peek_frame` described
    /// into `dst` (cut to the record), and frees the record.
    pub fn take_frame(&mut self, skip: usize, dst: &mut [u8]) {
        let Ok(Some(len)) = self.next_record() else {
            return;
        };
        let at = (self.tail as usize + WORD) & (RING - 1);
        let n = dst.len().min(len.saturating_sub(skip));
        if at + len <= RING && n > 0 {
            // SAFETY: `n` bytes inside a published record that does not wrap
            // (checked above), into our own buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.data(1 - self.side).add(at + skip),
                    dst.as_mut_ptr(),
                    n,
                );
            }
        }
        self.seq_in = self.seq_in.wrapping_add(1);
        self.tail = (self.tail + (WORD + len) as u64 + LINE as u64 - 1) & !(LINE as u64 - 1);
        self.consumed();
    }

    /// The peer shut its side.
    fn closed(&self) -> bool {
        self.map.u32_at(self.in_ctl() + 256).load(Ordering::Acquire) != 0
    }

    /// Publishes how far we read (whole records): the room goes back to the
    /// writer, which is rung if it sleeps. Without the fence of `wake_peer` (one per
    /// message on this path); its cost: a writer that found the ring full and fell
    /// asleep in the instant of our store may sleep until its loop's time-out (10 ms
    /// for a waiting caller, 250 ms for the background thread) instead of being
    /// rung.
    fn consumed(&self) {
        self.map
            .u64_at(self.in_ctl() + 128)
            .store(self.tail, Ordering::Release);
        let s = self.peer_sleeping();
        if s.load(Ordering::Relaxed) != 0 && s.swap(0, Ordering::SeqCst) != 0 {
            self.bell.ring();
        }
    }

    /// Whether a read would find something (bytes, the end, or an error).
    #[inline]
    pub fn readable(&self) -> bool {
        self.left > 0
            || !matches!(self.next_record(), Ok(None))
            || self.peer_gone
            || self.map.u32_at(self.in_ctl() + 256).load(Ordering::Acquire) != 0
    }

    /// Whether a write would find room.
    #[inline]
    pub fn writable(&self) -> bool {
        self.head.wrapping_sub(self.seen_tail) < RING as u64
            || !matches!(self.room_now(), Ok((0, _)))
    }

    /// Shuts our side: the peer reads what we wrote, then the end.
    pub fn shutdown_write(&mut self) {
        if !self.shut {
            self.shut = true;
            self.map
                .u32_at(self.out_ctl() + 256)
                .store(1, Ordering::Release);
            self.wake_peer();
        }
    }

    /// Copies `src` into the ring we write at `pos`, wrapping at its end.
    fn copy_in(&mut self, pos: u64, src: &[u8]) {
        let ring = self.side;
        let at = (pos as usize) & (RING - 1);
        let first = src.len().min(RING - at);
        // SAFETY: `at + first <= RING` and the rest wraps to the ring's start; the
        // bytes are ours to write (between the peer's consumed position and our
        // head, see `write_vectored`).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.data(ring).add(at), first);
            if first < src.len() {
                std::ptr::copy_nonoverlapping(
                    src.as_ptr().add(first),
                    self.data(ring),
                    src.len() - first,
                );
            }
        }
    }

    /// Reads the peer's memory at `addr` into `dst` (cross-memory attach).
    pub fn read_peer(&self, addr: u64, dst: &mut [u8]) -> io::Result<()> {
        self.cross(dst.as_mut_ptr(), addr, dst.len(), false)
    }

    /// Writes `src` into the peer's memory at `addr` (cross-memory attach).
    pub fn write_peer(&self, addr: u64, src: &[u8]) -> io::Result<()> {
        // The kernel only reads `src` for a write.
        self.cross(src.as_ptr().cast_mut(), addr, src.len(), true)
    }

    /// Copies `len` bytes between ours at `local` and the peer's at `remote`, in
    /// as many calls as the kernel needs: into the peer's memory if `write`.
    fn cross(&self, local: *mut u8, remote: u64, len: usize, write: bool) -> io::Result<()> {
        let mut done = 0usize;
        while done < len {
            let l = libc::iovec {
                // SAFETY: `done < len`, inside the caller's buffer.
                iov_base: unsafe { local.add(done) }.cast(),
                iov_len: len - done,
            };
            let r = libc::iovec {
                iov_base: (remote as usize + done) as *mut libc::c_void,
                iov_len: len - done,
            };
            let pid = self.pid as libc::pid_t;
            // SAFETY: `l` is the caller's live buffer (written only for a read);
            // the kernel checks `r` against the peer's address space (EFAULT
            // outside it).
            let n = unsafe {
                if write {
                    libc::process_vm_writev(pid, &l, 1, &r, 1, 0)
                } else {
                    libc::process_vm_readv(pid, &l, 1, &r, 1, 0)
                }
            };
            if n <= 0 {
                let what = if write {
                    "process_vm_writev"
                } else {
                    "process_vm_readv"
                };
                return Err(errno(what));
            }
            done += n as usize;
        }
        Ok(())
    }
}

impl Read for ShmLink {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let ring = 1 - self.side;
        let mut n = 0;
        let mut consumed = false;
        while n < buf.len() {
            if self.left == 0 {
                let Some(len) = self.next_record()? else {
                    break;
                };
                self.left = len;
                self.at = self.tail + WORD as u64;
                self.seq_in = self.seq_in.wrapping_add(1);
            }
            let k = self.left.min(buf.len() - n);
            let at = (self.at as usize) & (RING - 1);
            let first = k.min(RING - at);
            // SAFETY: `k` bytes of a record the peer published (its word read with
            // acquire in `next_record`, its length checked to fit a record), wrapping
            // at the ring's end, into `buf[n..n + k]`.
            unsafe {
                let dst = buf.as_mut_ptr().add(n);
                std::ptr::copy_nonoverlapping(self.data(ring).add(at), dst, first);
                if first < k {
                    std::ptr::copy_nonoverlapping(self.data(ring), dst.add(first), k - first);
                }
            }
            n += k;
            self.at += k as u64;
            self.left -= k;
            if self.left == 0 {
                // The whole record is read: its lines go back to the writer.
                self.tail = (self.at + LINE as u64 - 1) & !(LINE as u64 - 1);
                consumed = true;
                if n < BATCH {
                    // A small message: handed on at once. Looking for the next
                    // record would cost a miss first (the writer zeroed its word
                    // last), on the path of this one's answer.
                    break;
                }
            }
        }
        if consumed {
            self.consumed();
        }
        if n > 0 {
            return Ok(n);
        }
        let closed = self.map.u32_at(self.in_ctl() + 256).load(Ordering::Acquire) != 0;
        if closed || self.peer_gone {
            // What it wrote before closing (or dying) was read: the end.
            if self.next_record()?.is_none() {
                return Ok(0);
            }
            return self.read(buf);
        }
        Err(io::ErrorKind::WouldBlock.into())
    }
}

impl Write for ShmLink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    /// Writes one record: as much of `bufs` as fits (at most [`MAX_RECORD`]
    /// bytes), behind the word that publishes it. The word of the record after it
    /// is zeroed first, so that the reader, reaching it, never takes what an
    /// earlier lap left there for a record.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.peer_gone {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("its process ({}) has exited", self.pid),
            ));
        }
        let want: usize = bufs.iter().map(|b| b.len()).sum::<usize>().min(MAX_RECORD);
        if want == 0 {
            return Ok(0);
        }
        let room = self.room_for(record_size(want))?;
        if room < LINE {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let take = want.min(room - WORD);
        let mut pos = self.head + WORD as u64;
        let mut left = take;
        for b in bufs {
            if left == 0 {
                break;
            }
            let k = b.len().min(left);
            self.copy_in(pos, &b[..k]);
            pos += k as u64;
            left -= k;
        }
        self.publish(take, room);
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ShmLink {
    /// Writes a frame, its header then `body`, as one record when it fits whole (the
    /// usual small message: the header copied as a fixed-size block, no loop over
    /// slices); otherwise as `write_vectored` of the parts. The bytes taken.
    pub fn write_frame(&mut self, head: &[u8; HEADER], body: &[u8]) -> io::Result<usize> {
        let want = HEADER + body.len();
        let size = record_size(want);
        let room = if self.peer_gone || want > MAX_RECORD {
            0
        } else {
            self.room_for(size)?
        };
        if room < size {
            return self.write_vectored(&[IoSlice::new(head), IoSlice::new(body)]);
        }
        // A record starts on a line, and its word and a header fit in one: the
        // header never wraps at the ring's end.
        const _: () = assert!(WORD + HEADER <= LINE);
        let at = (self.head as usize + WORD) & (RING - 1);
        // SAFETY: `at + HEADER <= RING` (above); the bytes are ours to write, between
        // the peer's consumed position and our head (`room`).
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), self.data(self.side).add(at), HEADER);
        }
        if !body.is_empty() {
            self.copy_in(self.head + (WORD + HEADER) as u64, body);
        }
        self.publish(want, room);
        Ok(want)
    }

    /// Publishes the record of `take` bytes written after our head, with `room`
    /// bytes free before it was written.
    #[inline]
    fn publish(&mut self, take: usize, room: usize) {
        let ring = self.side;
        let size = record_size(take);
        let next = self.head + size as u64;
        if room > size && next >= self.zeroed {
            // The next record's word, ours to write (the reader has not reached it:
            // there is room beyond this record), not zeroed ahead yet (a long
            // record): zeroed now, before this record is published.
            self.word(ring, next).store(0, Ordering::Relaxed);
        }
        // Else it was zeroed ahead, or the ring is full after this record and the
        // next word is that of a record of the last lap, whose number is not the one
        // expected next.
        // Published with a swap: a locked instruction, so our stores are ordered
        // before the load of the peer's sleep flag just below (what the fence of
        // `wake_peer` does, one locked instruction fewer).
        self.word(ring, self.head).swap(
            (u64::from(self.seq_out) << 32) | take as u64,
            Ordering::SeqCst,
        );
        self.head = next;
        self.seq_out = self.seq_out.wrapping_add(1);
        self.ring_if_sleeping();
        // After the barrier, which would wait for these stores' misses.
        self.zero_ahead();
    }
}

impl Drop for ShmLink {
    /// Takes back every lend still standing first: the link goes when its peer is
    /// lost (it may still be alive, a straggler), and the sends it lent are freed
    /// with it, so a copy the peer makes from now on must fail its check.
    fn drop(&mut self) {
        for i in 0..LENDS {
            if self.lent & (1 << i) != 0 {
                self.lend_word(self.side, i).store(0, Ordering::SeqCst);
            }
        }
        self.lent = 0;
        fence(Ordering::SeqCst);
        self.shutdown_write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (ShmLink, ShmLink) {
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let p = Pending::new(node, &bell, true).expect("segment");
        let offer = Offer::decode(&p.offer().encode()).expect("offer round trip");
        assert_eq!(&offer, p.offer());
        let b = accept(&offer, Some(node), true).expect("accept");
        let a = p
            .accepted(std::process::id(), bell.raw() as u32)
            .expect("accepted");
        std::mem::forget(bell);
        (a, b)
    }

    #[test]
    fn lends_stand_until_taken_back_or_the_link_goes() {
        let (mut a, b) = pair();
        let n: Vec<u64> = (0..LENDS).map(|_| a.lend().expect("a free word")).collect();
        assert_eq!(a.lend(), None, "every word in use");
        assert!(n.iter().all(|&n| b.peer_lends(n) && n < 1 << 30 && n != 0));
        assert!(
            !b.peer_lends(n[3] + LENDS as u64),
            "another lend of the word"
        );
        a.take_back(n[3]);
        assert!(!b.peer_lends(n[3]));
        let again = a.lend().expect("the word is free again");
        assert_ne!(again, n[3], "a new number");
        assert!(b.peer_lends(again) && !b.peer_lends(n[3]));
        // The peer declared lost: our link goes, and with it every lend.
        drop(a);
        assert!(n.iter().chain([&again]).all(|&n| !b.peer_lends(n)));
    }

    #[test]
    fn bytes_cross_in_order_through_wrapping_rings() {
        let (mut a, mut b) = pair();
        let mut sent = Vec::new();
        let mut got = Vec::new();
        let mut x: u32 = 1;
        let mut buf = vec![0u8; 70_001];
        for round in 0..200 {
            let len = (round * 7919) % 90_000 + 1;
            let chunk: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let mut off = 0;
            while off < chunk.len() {
                match a.write(&chunk[off..]) {
                    Ok(n) => off += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        let n = b.read(&mut buf).expect("read");
                        got.extend_from_slice(&buf[..n]);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            sent.extend_from_slice(&chunk);
        }
        loop {
            match b.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "bytes differ");
        // The other direction too, then the end.
        b.write_all(b"back").expect("write");
        b.shutdown_write();
        let mut four = [0u8; 8];
        assert_eq!(a.read(&mut four).expect("read"), 4);
        assert_eq!(&four[..4], b"back");
        assert_eq!(a.read(&mut four).expect("end"), 0);
    }

    /// Reads everything there is now.
    /// Writes `len` bytes with `write` (given how many went already), reading `b`
    /// into `into` whenever the ring is full.
    fn write_draining(
        a: &mut ShmLink,
        b: &mut ShmLink,
        buf: &mut [u8],
        into: &mut Vec<u8>,
        len: usize,
        mut write: impl FnMut(&mut ShmLink, usize) -> io::Result<usize>,
    ) {
        let mut off = 0;
        while off < len {
            match write(a, off) {
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => drain(b, buf, into),
                Err(e) => panic!("write: {e}"),
            }
        }
    }

    fn drain(b: &mut ShmLink, buf: &mut [u8], into: &mut Vec<u8>) {
        loop {
            match b.read(buf) {
                Ok(0) => panic!("the link ended"),
                Ok(n) => into.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn a_record_at_the_limit_crosses_whole_and_one_byte_more_is_cut() {
        let (mut a, mut b) = pair();
        let big: Vec<u8> = (0..MAX_RECORD + 1).map(|i| (i * 7) as u8).collect();
        assert_eq!(a.write(&big[..MAX_RECORD]).expect("write"), MAX_RECORD);
        // One more byte than a record holds: the write is cut, as a socket cuts it.
        assert_eq!(a.write(&big).expect("write"), MAX_RECORD);
        assert_eq!(a.write(&big[MAX_RECORD..]).expect("write"), 1);
        let mut got = Vec::new();
        drain(&mut b, &mut vec![0u8; 3 * MAX_RECORD], &mut got);
        let mut want = big[..MAX_RECORD].to_vec();
        want.extend_from_slice(&big);
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes differ");
        assert!(!b.readable());
    }

    #[test]
    fn small_and_large_records_keep_their_order_across_laps() {
        let (mut a, mut b) = pair();
        // Sizes around a line (a record's word is 8 bytes) and around the limit,
        // interleaved, over many laps of the ring; read through a small buffer so
        // that records are read in pieces too.
        let sizes = [
            1,
            24,
            25,
            55,
            56,
            57,
            64,
            120,
            4096,
            MAX_RECORD,
            MAX_RECORD + 9,
            3,
        ];
        let mut sent = Vec::new();
        let mut got = Vec::new();
        let mut buf = [0u8; 1000];
        let mut x = 0u8;
        for round in 0..60 {
            for (i, &len) in sizes.iter().enumerate() {
                let len = len + (round * i) % 3;
                let chunk: Vec<u8> = (0..len)
                    .map(|_| {
                        x = x.wrapping_add(1);
                        x
                    })
                    .collect();
                write_draining(&mut a, &mut b, &mut buf, &mut got, chunk.len(), |a, off| {
                    a.write(&chunk[off..])
                });
                sent.extend_from_slice(&chunk);
            }
        }
        drain(&mut b, &mut buf, &mut got);
        assert!(a.head > 10 * RING as u64, "only {} bytes written", a.head);
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "bytes differ");
    }

    #[test]
    fn a_full_ring_refuses_writes_until_read_and_its_next_word_is_not_a_record() {
        let (mut a, mut b) = pair();
        let block = vec![5u8; MAX_RECORD];
        for _ in 0..4 {
            assert_eq!(a.write(&block).expect("write"), MAX_RECORD);
        }
        // Exactly full: the next word is the first record's, a lap old.
        let e = a.write(b"x").expect_err("full");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(!a.writable());
        let mut got = Vec::new();
        drain(&mut b, &mut vec![0u8; 50_000], &mut got);
        assert_eq!(got.len(), 4 * MAX_RECORD);
        assert!(
            !b.readable(),
            "a record of the last lap was taken for a new one"
        );
        assert!(a.writable());
        a.write_all(b"next lap").expect("write");
        let mut got = Vec::new();
        drain(&mut b, &mut [0u8; 64], &mut got);
        assert_eq!(got, b"next lap");
    }

    #[test]
    fn a_frame_written_whole_reads_back_as_its_header_and_body_across_laps() {
        let (mut a, mut b) = pair();
        let mut want = Vec::new();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        // Bodies of every length up to a few lines, then some near a record's
        // limit: the records' starts move around the ring, lap after lap, and
        // bodies wrap at its end.
        let mut sizes: Vec<usize> = (0..300).collect();
        sizes.extend([MAX_RECORD - HEADER, MAX_RECORD - HEADER - 1, 5000, 70_000]);
        for round in 0..12u8 {
            for &n in &sizes {
                let head = [round ^ n as u8; HEADER];
                let body: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(31) ^ round).collect();
                // What the ring does not take at once goes as the rest of the
                // frame, as the engine's queue sends it.
                let whole = [&head[..], &body[..]].concat();
                write_draining(&mut a, &mut b, &mut buf, &mut got, whole.len(), |a, off| {
                    if off == 0 {
                        a.write_frame(&head, &body)
                    } else {
                        a.write(&whole[off..])
                    }
                });
                want.extend_from_slice(&whole);
            }
            drain(&mut b, &mut buf, &mut got);
        }
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes differ");
        // Nearly full: the frame is cut to what fits, as a write of its parts is.
        let block = vec![5u8; MAX_RECORD];
        for _ in 0..3 {
            assert_eq!(a.write(&block).expect("write"), MAX_RECORD);
        }
        let big = vec![7u8; MAX_RECORD];
        let k = a.write_frame(&[9u8; HEADER], &big).expect("cut");
        assert!(k < HEADER + MAX_RECORD && k > HEADER, "{k}");
        assert_eq!(
            a.write_frame(&[9u8; HEADER], b"x")
                .expect_err("full")
                .kind(),
            io::ErrorKind::WouldBlock
        );
    }

    /// Bytes of an earlier lap that look like the next record's word (its number,
    /// a length) are never taken for it: the writer zeroes the next word before it
    /// publishes a record.
    #[test]
    fn a_word_left_by_an_earlier_lap_is_never_taken_for_a_record() {
        let (mut a, mut b) = pair();
        // Lap 0: four records of the limit fill the ring; the first one's bytes hold,
        // where line 1 starts, the word record 6 will have if it has 5 bytes.
        let mut first = vec![1u8; MAX_RECORD];
        let forged = ((6u64) << 32) | 5;
        first[LINE - WORD..LINE].copy_from_slice(&forged.to_ne_bytes());
        a.write_all(&first).expect("write");
        for _ in 0..3 {
            a.write_all(&vec![2u8; MAX_RECORD]).expect("write");
        }
        drain(&mut b, &mut vec![0u8; 70_000], &mut Vec::new());
        // Lap 1: record 5 (one byte) takes line 0; line 1 is where record 6 goes.
        a.write_all(b"!").expect("write");
        let mut got = Vec::new();
        drain(&mut b, &mut [0u8; 64], &mut got);
        assert_eq!(got, b"!");
        assert!(!b.readable(), "bytes of the last lap were read as a record");
        let e = b.read(&mut [0u8; 64]).expect_err("nothing to read");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        a.write_all(b"sixth").expect("write");
        let mut got = Vec::new();
        drain(&mut b, &mut [0u8; 64], &mut got);
        assert_eq!(got, b"sixth");
    }

    #[test]
    fn a_corrupt_ring_header_is_an_error_naming_it() {
        let (mut a, mut b) = pair();
        a.write_all(b"hello").expect("write");
        // The record's word says more than a record holds.
        a.word(a.side, 0)
            .store((1u64 << 32) | (RING as u64 * 3), Ordering::Release);
        let e = b.read(&mut [0u8; 16]).expect_err("corrupt");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("corrupt ring header"), "{e}");
        // A consumed position the writer never reached.
        b.map
            .u64_at(b.in_ctl() + 128)
            .store(RING as u64 * 5, Ordering::Release);
        // (Read when the room last seen runs short, within a ring's worth of writes.)
        let block = vec![0u8; MAX_RECORD];
        let e = (0..8).find_map(|_| a.write(&block).err()).expect("corrupt");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("corrupt ring header"), "{e}");
    }

    #[test]
    fn a_whole_record_is_looked_at_in_place_and_taken_into_a_buffer() {
        let (mut a, mut b) = pair();
        assert_eq!(b.peek_frame(), Peek::Nothing);
        let head = [9u8; HEADER];
        let n = a
            .write_vectored(&[IoSlice::new(&head), IoSlice::new(b"payload")])
            .expect("write");
        assert_eq!(n, HEADER + 7);
        // A record shorter than a header.
        a.write_all(b"tail").expect("write");
        match b.peek_frame() {
            Peek::Frame { head: h, len } => {
                assert_eq!(h, head);
                assert_eq!(len, HEADER + 7);
            }
            other => panic!("{other:?}"),
        }
        let mut got = [0u8; 7];
        b.take_frame(HEADER, &mut got);
        assert_eq!(&got, b"payload");
        // The usual read takes what is not a frame.
        assert_eq!(b.peek_frame(), Peek::Other);
        let mut four = [0u8; 8];
        assert_eq!(b.read(&mut four).expect("read"), 4);
        assert_eq!(&four[..4], b"tail");
        assert_eq!(b.peek_frame(), Peek::Nothing);
        // The end, too.
        a.shutdown_write();
        assert_eq!(b.peek_frame(), Peek::Other);
        assert_eq!(b.read(&mut four).expect("end"), 0);
    }

    /// Pages of `map` in memory (`mincore`).
    fn resident(map: &Map) -> usize {
        let pages = map.len.div_ceil(4096);
        let mut v = vec![0u8; pages];
        // SAFETY: a page-aligned mapping of `map.len` bytes, a vector of a byte per
        // page.
        let r = unsafe { libc::mincore(map.base.cast(), map.len, v.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", io::Error::last_os_error());
        v.iter().filter(|&&b| b & 1 != 0).count()
    }

    #[test]
    fn a_populated_segment_is_in_memory_on_both_sides_before_any_message() {
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let pages = SEGMENT / 4096;
        let p = Pending::new(node, &bell, true).expect("segment");
        assert_eq!(resident(&p.map), pages, "the offering side");
        // Not populated: only the header's page, which the offer wrote, until the
        // accepting side populates its mapping (which faults the pages in).
        let q = Pending::new(node, &bell, false).expect("segment");
        assert!(resident(&q.map) <= 2, "{} of {pages}", resident(&q.map));
        let c = accept(q.offer(), Some(node), false).expect("accept");
        assert!(resident(&c.map) <= 2, "{} of {pages}", resident(&c.map));
        let d = accept(q.offer(), Some(node), true).expect("accept");
        assert_eq!(resident(&d.map), pages, "the accepting side");
    }

    #[test]
    fn a_segment_is_refused_from_another_node_or_with_a_wrong_token() {
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let p = Pending::new(node, &bell, true).expect("segment");
        let mut other = node;
        other.netns += 1;
        let e = accept(p.offer(), Some(other), false).expect_err("other node");
        assert!(e.to_string().contains("another node"), "{e}");
        let mut forged = p.offer().clone();
        forged.token[0] ^= 1;
        let e = accept(&forged, Some(node), false).expect_err("wrong token");
        assert!(e.to_string().contains("token"), "{e}");
        // Another descriptor of ours: not a segment.
        let mut wrong = p.offer().clone();
        wrong.segment_fd = bell.raw() as u32;
        assert!(accept(&wrong, Some(node), false).is_err());
    }

    /// Another user of the machine cannot open the segment nor the doorbell, even
    /// knowing where they are (the test runs as root, the stranger as `nobody`).
    #[test]
    fn another_user_cannot_open_the_segment_or_the_doorbell() {
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let p = Pending::new(node, &bell, true).expect("segment");
        let o = p.offer();
        for fd in [o.segment_fd, o.bell_fd] {
            let path = format!("/proc/{}/fd/{fd}", o.pid);
            // We can (same user): the check below is not vacuous.
            assert!(std::fs::OpenOptions::new().write(true).open(&path).is_ok());
            let out = std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .args(["sh", "-c", &format!("echo x > {path}")])
                .output()
                .expect("setpriv (util-linux) runs");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "user nobody wrote to {path}");
            assert!(err.contains("Permission denied"), "{path}: {err}");
        }
    }

    #[test]
    fn cross_memory_reads_copy_the_peers_buffer() {
        let (a, _b) = pair();
        let src: Vec<u8> = (0..3_000_000u32).map(|i| (i * 31) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        a.read_peer(src.as_ptr() as u64, &mut dst)
            .expect("read_peer");
        assert!(dst == src);
    }

    /// A receiver waiting for a sender's chunks asks whether the sender still
    /// runs: a process that exits (here `sleep`, killed) is seen at once.
    #[test]
    fn a_peer_whose_process_exited_is_not_alive() {
        let (mut a, mut b) = pair();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        // As if the peer were that process: with its pidfd, and without one.
        (a.pid, a.pidfd) = (child.id(), pidfd_open(child.id()));
        (b.pid, b.pidfd) = (child.id(), None);
        assert!(a.pidfd.is_some());
        assert!(a.peer_alive() && b.peer_alive());
        child.kill().expect("kill");
        child.wait().expect("wait");
        assert!(!a.peer_alive() && !b.peer_alive());
    }

    /// Two threads share a copy through a real segment, each taking chunks as it
    /// comes: every chunk is taken once, written or read, and the bytes are whole.
    /// A sender with a stale message takes nothing; a receiver whose own slot
    /// names another message is told the segment is corrupt.
    #[test]
    fn a_shared_copy_takes_each_chunk_once_from_two_threads() {
        let (a, mut b) = pair();
        let len = (4 << 20) + 123;
        let src: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
        let mut dst = vec![0u8; len];
        let (chunk, chunks) = share_geometry(len);
        assert!(chunks as usize <= SHARE_CHUNKS && chunk % 4096 == 0);
        let (s, d) = (src.as_ptr() as u64, dst.as_mut_ptr() as usize);
        let part = |i: u32| (i as usize * chunk, ((i as usize + 1) * chunk).min(len));
        for id in [7u32, 8] {
            a.open_share(id);
            let src = &src;
            let (own, back) = std::thread::scope(|scope| {
                let sender = scope.spawn(move || {
                    while let Ok(Some(i)) = b.claim(false, id, chunks) {
                        let (from, to) = part(i);
                        b.write_peer((d + from) as u64, &src[from..to])
                            .expect("write_peer");
                        b.helped(i, true);
                    }
                    b
                });
                let mut own = 0u64;
                while let Some(i) = a.claim(true, id, chunks).expect("our slot") {
                    let (from, to) = part(i);
                    // SAFETY: chunk `i` of `dst`, which only we copy into.
                    let into =
                        unsafe { std::slice::from_raw_parts_mut((d + from) as *mut u8, to - from) };
                    a.read_peer(s + from as u64, into).expect("read_peer");
                    own |= 1 << i;
                }
                (own, sender.join().expect("the sender's thread"))
            });
            b = back;
            let (done, failed) = a.share_marks();
            assert_eq!(
                (own | done, own & done, failed),
                (u64::MAX >> (64 - chunks), 0, 0)
            );
            assert!(dst == *src, "message {id}");
            dst.fill(0);
        }
        assert_eq!(b.claim(false, 7, chunks).expect("no error"), None, "stale");
        assert!(
            a.claim(true, 9, chunks).is_err(),
            "our slot names message 8"
        );
        b.helped(3, false);
        assert_eq!(a.share_marks().1, 1 << 3);
        assert!(b.peer_alive() && a.peer_alive());
    }
}

#[cfg(test)]
mod floor {
    use super::*;

    /// The rings alone, two threads ping-ponging 1 byte (no engine): the floor under
    /// the engine's latency. Prints; asserts nothing about time.
    /// `cargo test --release -p qcg --lib shm_floor -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn shm_floor() {
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let p = Pending::new(node, &bell, true).expect("segment");
        let mut b = accept(p.offer(), Some(node), true).expect("accept");
        let mut a = p
            .accepted(std::process::id(), bell.raw() as u32)
            .expect("accepted");
        let reps = 1_000_000;
        let t = std::thread::spawn(move || {
            let mut x = [0u8; 1];
            for _ in 0..reps {
                while !b.readable() {
                    std::hint::spin_loop();
                }
                b.read_exact(&mut x).expect("read");
                b.write_all(&x).expect("write");
            }
        });
        let mut x = [7u8; 1];
        let t0 = std::time::Instant::now();
        for _ in 0..reps {
            a.write_all(&x).expect("write");
            while !a.readable() {
                std::hint::spin_loop();
            }
            a.read_exact(&mut x).expect("read");
        }
        let one_way = t0.elapsed().as_secs_f64() / (2.0 * reps as f64) * 1e6;
        t.join().expect("thread");
        println!("rings alone, 1 B one way: {one_way:.3} us");
    }

    /// A 4 MiB copy through cross-memory attach, taken by the receiver alone and
    /// then shared with a sender thread that takes chunks as it comes (the slot of
    /// "Sharing a large copy", no engine): what two cores copy against one. Prints;
    /// asserts nothing about time.
    /// `cargo test --release -p qcg --lib share_floor -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn share_floor() {
        use std::sync::atomic::AtomicBool;
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let p = Pending::new(node, &bell, true).expect("segment");
        let mut b = Some(accept(p.offer(), Some(node), true).expect("accept"));
        let a = p
            .accepted(std::process::id(), bell.raw() as u32)
            .expect("accepted");
        let len = 4 << 20;
        let reps = 300u32;
        let src = vec![5u8; len];
        let mut dst = vec![0u8; len];
        let (s, d) = (src.as_ptr() as u64, dst.as_mut_ptr() as usize);
        let (chunk, chunks) = share_geometry(len);
        let stop = AtomicBool::new(false);
        for (what, help) in [("the receiver alone", false), ("shared", true)] {
            stop.store(false, Ordering::SeqCst);
            let (src, stop) = (&src, &stop);
            let (t0, back) = std::thread::scope(|scope| {
                let sender = help.then(|| {
                    let b = b.take().expect("the sender's end");
                    scope.spawn(move || {
                        let mut id = 1;
                        while !stop.load(Ordering::Relaxed) {
                            while let Ok(Some(i)) = b.claim(false, id, chunks) {
                                let from = i as usize * chunk;
                                let to = (from + chunk).min(len);
                                b.write_peer((d + from) as u64, &src[from..to])
                                    .expect("write_peer");
                                b.helped(i, true);
                            }
                            let now = a_slot_id(&b);
                            if now > id {
                                id = now;
                            }
                        }
                        b
                    })
                });
                let t0 = std::time::Instant::now();
                for id in 1..=reps {
                    a.open_share(id);
                    let mut own = 0u64;
                    while let Some(i) = a.claim(true, id, chunks).expect("our slot") {
                        let from = i as usize * chunk;
                        let to = (from + chunk).min(len);
                        // SAFETY: chunk `i` of `dst`, which only we copy into.
                        let into = unsafe {
                            std::slice::from_raw_parts_mut((d + from) as *mut u8, to - from)
                        };
                        a.read_peer(s + from as u64, into).expect("read_peer");
                        own |= 1 << i;
                    }
                    let all = u64::MAX >> (64 - chunks);
                    while (a.share_marks().0 | own) & all != all {
                        std::hint::spin_loop();
                    }
                }
                let t = t0.elapsed();
                stop.store(true, Ordering::SeqCst);
                (t, sender.map(|h| h.join().expect("the sender's thread")))
            });
            if back.is_some() {
                b = back;
            }
            let us = t0.as_secs_f64() / f64::from(reps) * 1e6;
            println!(
                "4 MiB copy, {what}: {us:.0} us ({:.1} GB/s)",
                len as f64 / us / 1e3
            );
        }
        assert!(dst == src);
    }

    /// The message a sender's peer opened its share slot for (the high half of the
    /// slot's word).
    fn a_slot_id(b: &ShmLink) -> u32 {
        (b.share_word(1 - b.side, 0).load(Ordering::Acquire) >> 32) as u32
    }
}
