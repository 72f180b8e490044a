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
//! # Waiting
//! Nothing in a ring needs a system call: a waiting rank polls the rings while it
//! spins (see `Engine::wait`). Before it sleeps in epoll it raises its flag in every
//! ring it reads or writes and checks them once more; a peer that then writes to it
//! (or makes room) sees the flag and writes its doorbell, an eventfd in its epoll.
//! So an idle rank gives its core back and costs its peers one eventfd write per
//! sleep, and a busy pair never makes a system call.
//!
//! # Layout
//! ```text
//! 0      magic u64 | version u32 | ring bytes u32 | token [u8; 32]
//! 4096   ring 0 (offerer → acceptor): head u64 @+0, tail u64 @+128, closed u32 @+256
//! 5120   ring 1 (acceptor → offerer): the same
//! 6144   sleeping u32 of side 0 @+0, of side 1 @+128
//! 8192   ring 0's bytes, then ring 1's
//! ```
//! Each side keeps its own copy of what it owns (the writer its head, the reader its
//! tail) and only publishes it: a peer that scribbles over the header cannot make us
//! read or write outside the rings, and a header that makes no sense (more bytes
//! announced than a ring holds) closes the link naming it.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

const MAGIC: u64 = 0x7163_675f_7368_6d31; // "qcg_shm1"
const VERSION: u32 = 1;
/// Bytes of each ring (a power of two).
pub const RING: usize = 256 * 1024;
const RINGS_AT: usize = 8192;
const CTL_AT: usize = 4096;
const CTL_STRIDE: usize = 1024;
const SLEEP_AT: usize = 6144;
const SEGMENT: usize = RINGS_AT + 2 * RING;
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
    fn new(fd: RawFd, len: usize) -> io::Result<Map> {
        // SAFETY: maps `len` bytes of a descriptor we hold; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
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
    /// Makes a segment and the offer that describes it.
    pub fn new(node: Node, bell: &Bell) -> io::Result<Pending> {
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
        let map = Map::new(fd.as_raw_fd(), SEGMENT)?;
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
        let pidfd = pidfd_open(pid)?;
        drop(self.fd);
        Ok(ShmLink::new(self.map, 0, bell, pidfd, pid))
    }
}

/// Opens the segment of `offer`, as the accepting rank: our side (1). An error says
/// why not (then the pair stays on TCP).
pub fn accept(offer: &Offer, here: Option<Node>) -> io::Result<ShmLink> {
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
    let map = Map::new(file.as_raw_fd(), SEGMENT)?;
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
    let pidfd = pidfd_open(offer.pid)?;
    Ok(ShmLink::new(map, 1, bell, pidfd, offer.pid))
}

/// A ring whose head and tail are more than a ring apart.
fn corrupt(head: u64, tail: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("corrupt ring header (head {head}, tail {tail}): closing the shared-memory link"),
    )
}

fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: the pidfd_open system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if fd < 0 {
        return Err(errno("pidfd_open"));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// One end of a shared-memory link.
#[derive(Debug)]
pub struct ShmLink {
    map: Map,
    /// 0: the offerer, 1: the acceptor.
    side: usize,
    /// Our head in the ring we write (the published one is a copy).
    head: u64,
    /// Our tail in the ring we read.
    tail: u64,
    /// The peer's tail in the ring we write, as last read: room is counted from it
    /// and read again only when it seems short (the line stays in the peer's cache).
    seen_tail: u64,
    /// The peer's doorbell.
    bell: Bell,
    /// Readable once the peer's process has exited.
    pidfd: OwnedFd,
    pid: u32,
    /// Its process is gone: what it wrote is read to the end, then the link ends.
    peer_gone: bool,
    /// We shut our side.
    shut: bool,
    /// Large messages may be copied from the peer's memory.
    pub single_copy: bool,
}

impl ShmLink {
    fn new(map: Map, side: usize, bell: Bell, pidfd: OwnedFd, pid: u32) -> ShmLink {
        let head = map
            .u64_at(CTL_AT + side * CTL_STRIDE)
            .load(Ordering::Acquire);
        let tail = map
            .u64_at(CTL_AT + (1 - side) * CTL_STRIDE + 128)
            .load(Ordering::Acquire);
        let seen_tail = map
            .u64_at(CTL_AT + side * CTL_STRIDE + 128)
            .load(Ordering::Acquire);
        ShmLink {
            map,
            side,
            head,
            tail,
            seen_tail,
            bell,
            pidfd,
            pid,
            peer_gone: false,
            shut: false,
            single_copy: true,
        }
    }

    /// The descriptor that turns readable when the peer's process exits.
    pub fn pidfd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
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

    fn peer_sleeping(&self) -> &AtomicU32 {
        self.map.u32_at(SLEEP_AT + (1 - self.side) * 128)
    }

    /// After a write: rings the peer's doorbell if it sleeps. The fence orders our
    /// head's store before the flag's load, against the peer's flag store and its
    /// last look at our head (each side stores, then loads the other's word), so a
    /// message is never left unseen by a sleeper.
    fn wake_peer(&self) {
        fence(Ordering::SeqCst);
        let s = self.peer_sleeping();
        if s.load(Ordering::Relaxed) != 0 && s.swap(0, Ordering::SeqCst) != 0 {
            self.bell.ring();
        }
    }

    /// Raises (or lowers) our flag that asks the peer to ring our doorbell.
    pub fn set_sleeping(&self, on: bool) {
        self.map
            .u32_at(SLEEP_AT + self.side * 128)
            .store(u32::from(on), Ordering::SeqCst);
    }

    /// Bytes waiting to be read, the peer having closed its side, or an error.
    fn available(&self) -> io::Result<usize> {
        let head = self.map.u64_at(self.in_ctl()).load(Ordering::Acquire);
        let n = head.wrapping_sub(self.tail);
        if n > RING as u64 {
            return Err(corrupt(head, self.tail));
        }
        Ok(n as usize)
    }

    /// Room to write, at least `want` bytes if there is (the peer's tail is read
    /// again only when what we saw last leaves less).
    fn room_for(&mut self, want: usize) -> io::Result<usize> {
        let used = self.head.wrapping_sub(self.seen_tail);
        if used <= RING as u64 && RING - used as usize >= want {
            return Ok(RING - used as usize);
        }
        let (room, tail) = self.room_now()?;
        self.seen_tail = tail;
        Ok(room)
    }

    /// Room now, and the peer's tail it was counted from.
    fn room_now(&self) -> io::Result<(usize, u64)> {
        let tail = self
            .map
            .u64_at(self.out_ctl() + 128)
            .load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        if used > RING as u64 {
            return Err(corrupt(self.head, tail));
        }
        Ok((RING - used as usize, tail))
    }

    /// Whether a read would find something (bytes, the end, or an error).
    pub fn readable(&self) -> bool {
        !matches!(self.available(), Ok(0))
            || self.peer_gone
            || self.map.u32_at(self.in_ctl() + 256).load(Ordering::Acquire) != 0
    }

    /// Whether a write would find room.
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

    fn copy_in(&mut self, src: &[u8]) -> usize {
        let ring = self.side;
        let at = (self.head as usize) & (RING - 1);
        let first = src.len().min(RING - at);
        // SAFETY: `at + first <= RING` and the rest wraps to the ring's start; the
        // bytes are ours to write (between the peer's tail and our head).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.data(ring).add(at), first);
            std::ptr::copy_nonoverlapping(
                src.as_ptr().add(first),
                self.data(ring),
                src.len() - first,
            );
        }
        self.head = self.head.wrapping_add(src.len() as u64);
        src.len()
    }

    /// Reads the peer's memory at `addr` into `dst` (cross-memory attach).
    pub fn read_peer(&self, addr: u64, dst: &mut [u8]) -> io::Result<()> {
        let mut done = 0usize;
        while done < dst.len() {
            let local = libc::iovec {
                iov_base: dst[done..].as_mut_ptr().cast(),
                iov_len: dst.len() - done,
            };
            let remote = libc::iovec {
                iov_base: (addr as usize + done) as *mut libc::c_void,
                iov_len: dst.len() - done,
            };
            // SAFETY: `local` is our own live buffer; the kernel checks `remote`
            // against the peer's address space and fails (EFAULT) outside it.
            let n = unsafe {
                libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0)
            };
            if n <= 0 {
                return Err(errno("process_vm_readv"));
            }
            done += n as usize;
        }
        Ok(())
    }
}

impl Read for ShmLink {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.available()?;
        if n == 0 {
            let closed = self.map.u32_at(self.in_ctl() + 256).load(Ordering::Acquire) != 0;
            if closed || self.peer_gone {
                // What it wrote before closing (or dying) was read: the end.
                if self.available()? == 0 {
                    return Ok(0);
                }
                return self.read(buf);
            }
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = n.min(buf.len());
        let ring = 1 - self.side;
        let at = (self.tail as usize) & (RING - 1);
        let first = n.min(RING - at);
        // SAFETY: reads `n` published bytes of the ring (between our tail and the
        // peer's head, checked in `available`), wrapping at its end, into `buf`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data(ring).add(at), buf.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(self.data(ring), buf.as_mut_ptr().add(first), n - first);
        }
        self.tail = self.tail.wrapping_add(n as u64);
        self.map
            .u64_at(self.in_ctl() + 128)
            .store(self.tail, Ordering::Release);
        // Room made: a writer asleep waiting for it is rung, without the fence of
        // `wake_peer` (one per message on this path). Its cost: a writer that found
        // the ring full and fell asleep in the instant of our store may sleep until its
        // loop's time-out (10 ms for a waiting caller, 250 ms for the background
        // thread) instead of being rung.
        let s = self.peer_sleeping();
        if s.load(Ordering::Relaxed) != 0 && s.swap(0, Ordering::SeqCst) != 0 {
            self.bell.ring();
        }
        Ok(n)
    }
}

impl Write for ShmLink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.peer_gone {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("its process ({}) has exited", self.pid),
            ));
        }
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let mut room = self.room_for(want)?;
        if room == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut n = 0;
        for b in bufs {
            if room == 0 {
                break;
            }
            let take = b.len().min(room);
            n += self.copy_in(&b[..take]);
            room -= take;
        }
        self.map
            .u64_at(self.out_ctl())
            .store(self.head, Ordering::Release);
        self.wake_peer();
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for ShmLink {
    fn drop(&mut self) {
        self.shutdown_write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (ShmLink, ShmLink) {
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let p = Pending::new(node, &bell).expect("segment");
        let offer = Offer::decode(&p.offer().encode()).expect("offer round trip");
        assert_eq!(&offer, p.offer());
        let b = accept(&offer, Some(node)).expect("accept");
        let a = p
            .accepted(std::process::id(), bell.raw() as u32)
            .expect("accepted");
        std::mem::forget(bell);
        (a, b)
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

    #[test]
    fn a_corrupt_ring_header_is_an_error_naming_it() {
        let (mut a, mut b) = pair();
        a.write_all(b"hello").expect("write");
        // The peer's published head says more than a ring holds.
        a.map
            .u64_at(a.out_ctl())
            .store(a.head + RING as u64 * 3, Ordering::Release);
        let e = b.read(&mut [0u8; 16]).expect_err("corrupt");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("corrupt ring header"), "{e}");
    }

    #[test]
    fn a_segment_is_refused_from_another_node_or_with_a_wrong_token() {
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let p = Pending::new(node, &bell).expect("segment");
        let mut other = node;
        other.netns += 1;
        let e = accept(p.offer(), Some(other)).expect_err("other node");
        assert!(e.to_string().contains("another node"), "{e}");
        let mut forged = p.offer().clone();
        forged.token[0] ^= 1;
        let e = accept(&forged, Some(node)).expect_err("wrong token");
        assert!(e.to_string().contains("token"), "{e}");
        // Another descriptor of ours: not a segment.
        let mut wrong = p.offer().clone();
        wrong.segment_fd = bell.raw() as u32;
        assert!(accept(&wrong, Some(node)).is_err());
    }

    /// Another user of the machine cannot open the segment nor the doorbell, even
    /// knowing where they are (the test runs as root, the stranger as `nobody`).
    #[test]
    fn another_user_cannot_open_the_segment_or_the_doorbell() {
        let node = Node::here().expect("a node");
        let bell = Bell::new().expect("bell");
        let p = Pending::new(node, &bell).expect("segment");
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
        let p = Pending::new(node, &bell).expect("segment");
        let mut b = accept(p.offer(), Some(node)).expect("accept");
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
}
