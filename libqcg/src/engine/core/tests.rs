//! The state machine over in-memory pipes.

#![allow(clippy::unwrap_used)]
use super::*;
use std::cell::RefCell;
use std::rc::Rc;

/// One direction of an in-memory link that holds at most `cap` bytes.
type Buf = Rc<RefCell<VecDeque<u8>>>;

/// An in-memory stream end: reads `rx`, writes `tx`; `WouldBlock` when empty/full.
struct Pipe {
    rx: Buf,
    tx: Buf,
    cap: usize,
    /// Once set, an empty `rx` reads as the end of the stream.
    eof: Rc<std::cell::Cell<bool>>,
    /// Reads the peer's memory (the same process here): `Some(false)` says it
    /// can but the kernel refuses, as under a ptrace policy.
    mem: Option<bool>,
    /// Lends standing, per end (shared by the two ends), and which end this is.
    lends: Rc<RefCell<[std::collections::HashSet<u64>; 2]>>,
    side: usize,
    /// Shares large copies (with `mem`): the two ends' share slots (claim word,
    /// done and failed masks, as in the segment) and whether the peer's process
    /// still runs.
    share: bool,
    slots: Rc<RefCell<[[u64; 3]; 2]>>,
    peer_alive: Rc<std::cell::Cell<bool>>,
    /// Chunks the peer takes as soon as we open our share slot.
    peer_takes: u32,
}

impl Read for Pipe {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let mut q = self.rx.borrow_mut();
        if q.is_empty() && self.eof.get() {
            return Ok(0);
        }
        if q.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = out.len().min(q.len());
        for (o, b) in out.iter_mut().zip(q.drain(..n)) {
            *o = b;
        }
        Ok(n)
    }
}

impl Write for Pipe {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut q = self.tx.borrow_mut();
        let room = self.cap - q.len();
        if room == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = data.len().min(room);
        q.extend(&data[..n]);
        Ok(n)
    }
    /// Gathers across the slices up to the room left, as a socket or a ring does
    /// (the default would write the first slice only).
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let mut q = self.tx.borrow_mut();
        let room = self.cap - q.len();
        if room == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut n = 0;
        for b in bufs {
            let k = b.len().min(room - n);
            q.extend(&b[..k]);
            n += k;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl LinkIo for Pipe {
    fn reads_peer(&self) -> bool {
        self.mem.is_some()
    }

    #[allow(unsafe_code)]
    fn read_peer(&mut self, addr: u64, dst: &mut [u8]) -> io::Result<()> {
        if self.mem != Some(true) {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        // SAFETY: the peer is a core of this test, whose send buffer at `addr`
        // lives until its request completes (after our `Fin`).
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn lend(&mut self) -> Option<u64> {
        self.mem?;
        let mut l = self.lends.borrow_mut();
        let n = (1..).find(|n| !l[self.side].contains(n))?;
        l[self.side].insert(n);
        Some(n)
    }

    fn take_back(&mut self, n: u64) {
        self.lends.borrow_mut()[self.side].remove(&n);
    }

    fn peer_lends(&self, n: u64) -> bool {
        self.lends.borrow()[1 - self.side].contains(&n)
    }

    fn shares(&self) -> bool {
        self.share && self.mem.is_some()
    }

    fn open_share(&mut self, id: u32) {
        self.slots.borrow_mut()[self.side] =
            [u64::from(id) << 32 | u64::from(self.peer_takes), 0, 0];
    }

    fn claim(&mut self, ours: bool, id: u32, chunks: u32) -> io::Result<Option<u32>> {
        let side = if ours { self.side } else { 1 - self.side };
        let w = &mut self.slots.borrow_mut()[side][0];
        if *w >> 32 != u64::from(id) {
            return match ours {
                true => Err(io::Error::other("the share slot names another message")),
                false => Ok(None),
            };
        }
        if *w as u32 >= chunks {
            return Ok(None);
        }
        *w += 1;
        Ok(Some(*w as u32 - 1))
    }

    fn helped(&mut self, i: u32, ok: bool) {
        self.slots.borrow_mut()[1 - self.side][if ok { 1 } else { 2 }] |= 1 << i;
    }

    fn share_marks(&self) -> (u64, u64) {
        let s = self.slots.borrow()[self.side];
        (s[1], s[2])
    }

    #[allow(unsafe_code)]
    fn write_peer(&mut self, addr: u64, src: &[u8]) -> io::Result<()> {
        if self.mem != Some(true) {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        // SAFETY: the peer is this test, whose buffer at `addr` outlives the call.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, src.len()) };
        Ok(())
    }

    fn peer_alive(&self) -> bool {
        self.peer_alive.get()
    }
}

impl Drop for Pipe {
    /// As a link over memory: its lends go with it.
    fn drop(&mut self) {
        self.lends.borrow_mut()[self.side].clear();
    }
}

fn pipe(cap: usize) -> (Pipe, Pipe, Buf) {
    let (a, b): (Buf, Buf) = Default::default();
    let lends: Rc<RefCell<[std::collections::HashSet<u64>; 2]>> = Default::default();
    let slots: Rc<RefCell<[[u64; 3]; 2]>> = Default::default();
    (
        Pipe {
            rx: a.clone(),
            tx: b.clone(),
            cap,
            eof: Default::default(),
            mem: None,
            lends: lends.clone(),
            side: 0,
            share: true,
            slots: slots.clone(),
            peer_alive: Rc::new(std::cell::Cell::new(true)),
            peer_takes: 0,
        },
        Pipe {
            rx: b,
            tx: a.clone(),
            cap,
            eof: Default::default(),
            mem: None,
            lends,
            side: 1,
            share: true,
            slots,
            peer_alive: Rc::new(std::cell::Cell::new(true)),
            peer_takes: 0,
        },
        a,
    )
}

/// Ranks 0 and 1 linked in memory; `to0` is what rank 0 will read.
fn pair(limits: Limits, cap: usize) -> (Core<Pipe>, Core<Pipe>, Buf) {
    let now = Instant::now();
    let (p0, p1, to0) = pipe(cap);
    let mut a = Core::new(0, 2, limits, Instant::now());
    let mut b = Core::new(1, 2, limits, Instant::now());
    a.add_conn(1, p0, now, false);
    b.add_conn(0, p1, now, false);
    (a, b, to0)
}

/// Moves bytes from `a` to `b` only, `rounds` times (a message partly across).
fn forward<C: LinkIo>(a: &mut Core<C>, b: &mut Core<C>, rounds: usize) {
    for _ in 0..rounds {
        for c in a.conn_ids() {
            a.on_writable(c);
        }
        for c in b.conn_ids() {
            b.on_readable(c);
        }
    }
}

/// Moves bytes both ways for a while (enough for every test's bytes).
fn settle<C: LinkIo>(a: &mut Core<C>, b: &mut Core<C>) {
    for _ in 0..2_000 {
        for c in a.conn_ids() {
            a.on_writable(c);
            a.on_readable(c);
        }
        for c in b.conn_ids() {
            b.on_writable(c);
            b.on_readable(c);
        }
    }
}

fn any() -> Pattern {
    Pattern {
        context: 0,
        source: None,
        tag: None,
    }
}

fn received(r: Option<Result<Outcome, Error>>) -> (Status, Vec<u8>) {
    match r {
        Some(Ok(Outcome::Received(st, Some(d)))) => (st, d),
        other => panic!("not a receive: {other:?}"),
    }
}

fn limits(eager: usize, unexpected: usize) -> Limits {
    Limits {
        eager,
        unexpected,
        liveness: Duration::from_secs(30),
    }
}

#[test]
fn eager_and_rendezvous_messages_arrive_whole_and_in_order() {
    let (mut a, mut b, _) = pair(limits(100, 1 << 20), 64);
    let msgs: Vec<Vec<u8>> = [0usize, 1, 99, 100, 101, 5000]
        .iter()
        .map(|&n| (0..n).map(|i| i as u8).collect())
        .collect();
    let sends: Vec<ReqId> = msgs
        .iter()
        .map(|m| a.post_send(1, 3, 0, SendBuf::Owned(m.clone())))
        .collect();
    settle(&mut a, &mut b);
    // The large ones wait for their receives (rendezvous): not done yet.
    assert!(!a.is_done(sends[4]) && !a.is_done(sends[5]));
    for m in &msgs {
        let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        settle(&mut a, &mut b);
        let (st, d) = received(b.take(r));
        assert_eq!((st.source, st.tag, st.len), (0, 3, m.len()));
        assert_eq!(&d, m);
    }
    assert!(sends
        .iter()
        .all(|&s| matches!(a.take(s), Some(Ok(Outcome::Sent)))));
    assert_eq!(b.accounting().unexpected_bytes, 0);
    // What one side wrote the other read: both count every byte, payloads and
    // headers, once.
    let payload: usize = msgs.iter().map(Vec::len).sum();
    let (ma, mb) = (a.accounting().moved, b.accounting().moved);
    assert_eq!(ma, mb);
    assert!(ma as usize > payload && (ma as usize) < payload + 64 * HEADER);
}

#[test]
fn a_synchronous_send_completes_only_once_the_receiver_matched_it() {
    let (mut a, mut b, _) = pair(limits(100, 1 << 20), 64);
    let small = a.post_ssend(1, 4, 0, SendBuf::Owned(vec![7u8; 3]));
    let empty = a.post_ssend(1, 5, 0, SendBuf::Owned(Vec::new()));
    let plain = a.post_send(1, 4, 0, SendBuf::Owned(vec![8u8; 3]));
    settle(&mut a, &mut b);
    // The standard one is out; the synchronous ones wait, however small.
    assert!(a.is_done(plain));
    assert!(!a.is_done(small) && !a.is_done(empty));
    assert_eq!(b.iprobe(&any()).ok().flatten().map(|s| s.len), Some(3));
    let r = b.post_recv(
        Pattern {
            tag: Some(5),
            ..any()
        },
        RecvBuf::Alloc(Vec::new()),
    );
    settle(&mut a, &mut b);
    assert_eq!(received(b.take(r)).0.len, 0);
    assert!(a.is_done(empty) && !a.is_done(small));
    for want in [vec![7u8; 3], vec![8u8; 3]] {
        let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        settle(&mut a, &mut b);
        assert_eq!(received(b.take(r)).1, want, "order kept per tag");
    }
    assert!(matches!(a.take(small), Some(Ok(Outcome::Sent))));
}

#[test]
fn a_large_message_lands_in_the_posted_buffer() {
    let (mut a, mut b, _) = pair(limits(16, 1 << 20), 1 << 12);
    let r = b.post_recv(any(), RecvBuf::Owned(vec![0u8; 100_000]));
    let data: Vec<u8> = (0..70_000).map(|i| (i * 7) as u8).collect();
    let s = a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
    settle(&mut a, &mut b);
    let (st, buf) = received(b.take(r));
    assert_eq!(st.len, 70_000);
    assert_eq!(buf.len(), 100_000, "the caller's own buffer comes back");
    assert_eq!(&buf[..70_000], &data[..]);
    assert!(a.take(s).is_some());
    assert_eq!(b.accounting().unexpected_peak, 0, "nothing was buffered");
}

/// Over a link that reads the peer's memory, a large message is copied from the
/// sender's buffer (`Addr`, then `Fin`: no `Data` on the link); where the read is
/// refused, it streams as on a socket. Sent before and after its receive is posted.
#[test]
fn a_large_message_is_copied_once_from_the_senders_memory_or_streamed_if_refused() {
    for (mem, copies) in [(true, 2u64), (false, 0)] {
        let now = Instant::now();
        let (mut p0, mut p1, _) = pipe(1 << 12);
        p0.mem = Some(mem);
        p1.mem = Some(mem);
        let mut a = Core::new(0, 2, limits(16, 1 << 20), Instant::now());
        let mut b = Core::new(1, 2, limits(16, 1 << 20), Instant::now());
        a.add_conn(1, p0, now, false);
        b.add_conn(0, p1, now, false);
        let data: Vec<u8> = (0..70_000).map(|i| (i * 7) as u8).collect();
        let posted = b.post_recv(any(), RecvBuf::Owned(vec![0u8; 100_000]));
        let s1 = a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
        let s2 = a.post_ssend(1, 2, 0, SendBuf::Owned(data[..30_000].to_vec()));
        settle(&mut a, &mut b);
        assert!(a.take(s1).is_some_and(|r| r.is_ok()));
        assert!(!a.is_done(s2), "a synchronous send waits for its receive");
        let (st, buf) = received(b.take(posted));
        assert_eq!(st.len, 70_000);
        assert_eq!(&buf[..70_000], &data[..]);
        let late = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        settle(&mut a, &mut b);
        let (st, buf) = received(b.take(late));
        assert_eq!((st.tag, buf), (2, data[..30_000].to_vec()));
        assert!(a.take(s2).is_some_and(|r| r.is_ok()));
        assert_eq!(b.accounting().single_copies, copies, "reads allowed: {mem}");
    }
}

/// A large message's copy shared with its sender gives the whole message, at
/// every size around the smallest shared and at sizes that end in a short chunk,
/// shared or not. (Here the receiver takes every chunk: the sender, this thread,
/// is not running while it copies; the next test is the sender's part.)
#[test]
fn a_shared_copy_gives_the_whole_message_whoever_takes_the_chunks() {
    for share in [true, false] {
        let now = Instant::now();
        let (mut p0, mut p1, _) = pipe(1 << 12);
        (p0.mem, p1.mem, p0.share, p1.share) = (Some(true), Some(true), share, share);
        let mut a = Core::new(0, 2, limits(16, 1 << 20), now);
        let mut b = Core::new(1, 2, limits(16, 1 << 20), now);
        a.add_conn(1, p0, now, false);
        b.add_conn(0, p1, now, false);
        let sizes = [SHARE_MIN - 1, SHARE_MIN, 1 << 20, (1 << 20) + 4097, 5 << 20];
        for len in sizes {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
            let s = a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
            let r = b.post_recv(any(), RecvBuf::Owned(vec![0; len + 10]));
            settle(&mut a, &mut b);
            assert!(a.take(s).is_some_and(|r| r.is_ok()), "{len}");
            let (st, buf) = received(b.take(r));
            assert_eq!(st.len, len);
            assert!(buf[..len] == data[..], "{len} bytes, shared {share}");
        }
        assert_eq!(b.accounting().single_copies, sizes.len() as u64);
        assert_eq!(b.accounting().shared_chunks, 0);
        assert_eq!((a.lost(1), b.lost(0)), (None, None));
    }
}

/// Writes a `Share` frame for message `id` of `len` bytes into `dst` where rank 0
/// reads.
fn share_frame(to0: &Buf, id: u32, len: usize, dst: &mut [u8]) {
    let at = dst.as_mut_ptr() as u64;
    let mut h = Header::new(Kind::Share);
    (h.tag, h.context, h.id, h.len) = ((at >> 32) as u32, at as u32, id, len as u64);
    to0.borrow_mut().extend(h.encode());
}

/// The sender's part of a shared copy: on `Share` it writes every chunk not yet
/// taken into the receiver's buffer and marks each done. A `Share` whose slot
/// names another message (the receiver finished it alone) or that gives another
/// length writes nothing.
#[test]
fn on_share_the_sender_writes_the_chunks_left_and_nothing_else() {
    let now = Instant::now();
    let (mut p0, mut p1, to0) = pipe(1 << 12);
    (p0.mem, p1.mem) = (Some(true), Some(true));
    let mut a = Core::new(0, 2, limits(16, 1 << 20), now);
    a.add_conn(1, p0, now, false);
    let len = (1 << 20) + 5;
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
    let s = a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
    a.on_writable(0);
    let (chunk, chunks) = share_geometry(len);
    assert!(chunks > 2);
    let id = s as u32;
    let mut dst = vec![0u8; len];
    p1.open_share(id + 1);
    share_frame(&to0, id, len, &mut dst);
    a.on_readable(0);
    p1.open_share(id);
    share_frame(&to0, id, len - 1, &mut dst);
    a.on_readable(0);
    assert!(
        dst.iter().all(|&b| b == 0),
        "written for a stale or wrong share"
    );
    assert_eq!(p1.share_marks(), (0, 0));
    // The receiver took chunk 0 already; the sender takes the rest.
    assert_eq!(p1.claim(true, id, chunks).unwrap(), Some(0));
    share_frame(&to0, id, len, &mut dst);
    a.on_readable(0);
    let all = u64::MAX >> (64 - chunks);
    assert_eq!(p1.share_marks(), (all & !1, 0));
    assert!(
        dst[..chunk].iter().all(|&b| b == 0),
        "chunk 0 is the receiver's"
    );
    assert!(dst[chunk..] == data[chunk..]);
    assert_eq!(p1.claim(true, id, chunks).unwrap(), None, "none left");
    assert_eq!(a.lost(1), None);
    assert!(!a.is_done(s), "the send ends with the receiver's Fin");
}

/// A sender that took chunks of a shared copy and died before writing them: the
/// receiver does not wait for it forever. It asks for the data as on a socket
/// (`Cts`, after its `Share`), and its receive fails naming the rank when the
/// link ends.
#[test]
fn a_sender_dead_in_the_middle_of_a_shared_copy_fails_the_receive_naming_it() {
    let now = Instant::now();
    let (mut p0, mut p1, _) = pipe(1 << 12);
    (p0.mem, p1.mem, p1.peer_takes) = (Some(true), Some(true), 2);
    p1.peer_alive.set(false);
    let end = p1.eof.clone();
    let mut b = Core::new(1, 2, limits(16, 1 << 20), now);
    b.add_conn(0, p1, now, false);
    let len = 1usize << 20;
    let data = vec![9u8; len];
    let mut addr = Header::new(Kind::Addr);
    let at = data.as_ptr() as u64;
    (addr.tag, addr.context, addr.id, addr.len) = ((at >> 32) as u32, at as u32, 5, len as u64);
    let mut rts = Header::new(Kind::Rts);
    (rts.tag, rts.id, rts.len) = (1, 5, len as u64);
    p0.write_all(&addr.encode()).unwrap();
    p0.write_all(&rts.encode()).unwrap();
    let r = b.post_recv(any(), RecvBuf::Owned(vec![0; len]));
    b.on_readable(0);
    b.on_writable(0);
    assert!(!b.is_done(r));
    let mut out = vec![0u8; 4 * HEADER];
    let n = p0.read(&mut out).unwrap();
    let kinds: Vec<(Kind, u32)> = out[..n]
        .chunks(HEADER)
        .map(|f| Header::decode(f.try_into().unwrap()).unwrap())
        .map(|h| (h.kind, h.id))
        .collect();
    assert_eq!(kinds, [(Kind::Share, 5), (Kind::Cts, 5)]);
    end.set(true);
    b.on_read_closed(0);
    let e = b.take(r).expect("failed").expect_err("failed");
    assert!(e.to_string().contains("rank 0"), "{e}");
}

#[test]
fn a_full_unexpected_buffer_pauses_the_link_and_loses_nothing() {
    // 10 messages of 100 bytes against a 250-byte bound.
    let (mut a, mut b, _) = pair(limits(100, 250), 128);
    let sends: Vec<ReqId> = (0..10u8)
        .map(|i| a.post_send(1, 0, 0, SendBuf::Owned(vec![i; 100])))
        .collect();
    settle(&mut a, &mut b);
    let acct = b.accounting();
    assert!(acct.unexpected_bytes <= 250, "{acct:?}");
    assert!(acct.stalls > 0);
    assert!(!a.is_done(sends[9]), "the sender waits");
    for i in 0..10u8 {
        let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        settle(&mut a, &mut b);
        assert_eq!(received(b.take(r)).1, vec![i; 100]);
    }
    assert!(b.accounting().unexpected_peak <= 250);
    assert!(sends.iter().all(|&s| a.is_done(s)));
}

/// MPI_Ssend to oneself completes only once a receive takes the message.
#[test]
fn a_synchronous_send_to_ourselves_waits_for_our_receive() {
    let (mut a, _b, _) = pair(limits(100, 1 << 20), 1 << 12);
    let s = a.post_ssend(0, 3, 0, SendBuf::Owned(vec![5; 10]));
    assert!(!a.is_done(s), "completed with no receive posted");
    let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    let (st, d) = received(a.take(r));
    assert_eq!((st.source, st.tag, d), (0, 3, vec![5; 10]));
    assert!(matches!(a.take(s), Some(Ok(Outcome::Sent))));
    // With the receive posted first, at once.
    let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    let s = a.post_ssend(0, 4, 0, SendBuf::Owned(vec![6; 3]));
    assert!(matches!(a.take(s), Some(Ok(Outcome::Sent))));
    assert_eq!(received(a.take(r)).1, vec![6; 3]);
}

#[test]
fn a_short_buffer_fails_and_the_message_stays() {
    let (mut a, mut b, _) = pair(limits(100, 1 << 20), 1 << 12);
    a.post_send(1, 9, 0, SendBuf::Owned(vec![5; 50]));
    settle(&mut a, &mut b);
    let r = b.post_recv(any(), RecvBuf::Owned(vec![0; 10]));
    assert!(matches!(
        b.take(r),
        Some(Err(Error::Truncated {
            len: 50,
            capacity: 10,
            ..
        }))
    ));
    assert_eq!(b.iprobe(&any()).unwrap().unwrap().len, 50);
    let r = b.post_recv(any(), RecvBuf::Owned(vec![0; 64]));
    assert_eq!(&received(b.take(r)).1[..50], &[5; 50]);
}

/// What a matched probe takes no later receive can match, eager or rendezvous,
/// and its request gets the bytes.
#[test]
fn a_matched_probe_takes_the_message_out_of_matching() {
    let (mut a, mut b, _) = pair(limits(100, 1 << 20), 1 << 12);
    assert!(matches!(b.improbe(&any()), Ok(None)));
    let big: Vec<u8> = (0..5000).map(|i| i as u8).collect();
    let s1 = a.post_send(1, 1, 0, SendBuf::Owned(vec![1; 10]));
    let s2 = a.post_send(1, 2, 0, SendBuf::Owned(big.clone()));
    let s3 = a.post_send(1, 1, 0, SendBuf::Owned(vec![3; 7]));
    settle(&mut a, &mut b);
    let (st, m1) = b.improbe(&any()).unwrap().unwrap();
    assert_eq!((st.source, st.tag, st.len), (0, 1, 10));
    // A receive posted now takes the next message, not the probed one.
    let r = b.post_recv(
        Pattern {
            tag: Some(1),
            ..any()
        },
        RecvBuf::Alloc(Vec::new()),
    );
    assert_eq!(received(b.take(r)).1, vec![3; 7]);
    assert_eq!(received(b.take(m1)).1, vec![1; 10]);
    // The rendezvous one: announced only, its data comes once probed.
    assert!(!a.is_done(s2));
    let (st, m2) = b.improbe(&any()).unwrap().unwrap();
    assert_eq!(st.len, 5000);
    settle(&mut a, &mut b);
    assert_eq!(received(b.take(m2)).1, big);
    assert!([s1, s2, s3].iter().all(|&s| a.is_done(s)));
    assert!(matches!(b.improbe(&any()), Ok(None)));
    assert_eq!(b.accounting().unexpected_bytes, 0);
}

#[test]
fn cancel_takes_back_an_unmatched_receive_only() {
    let (mut a, mut b, _) = pair(limits(100, 1 << 20), 1 << 12);
    let r = b.post_recv(any(), RecvBuf::Owned(vec![1, 2]));
    assert!(b.cancel(r));
    assert!(matches!(b.take(r), Some(Ok(Outcome::Cancelled(Some(v)))) if v == [1, 2]));
    let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    a.post_send(1, 0, 0, SendBuf::Owned(vec![3]));
    settle(&mut a, &mut b);
    assert!(!b.cancel(r));
    assert_eq!(received(b.take(r)).1, vec![3]);
}

/// Two ranks that dialled each other at once have two links; a peer leaving
/// closes both, in any order. The end of one while the other still carries its
/// last message lost that message, and failed the receive waiting for it.
#[test]
fn a_peer_closing_one_of_two_links_loses_nothing_sent_on_the_other() {
    let now = Instant::now();
    let (p0, p1, _) = pipe(1 << 12);
    let (q0, q1, _) = pipe(1 << 12);
    let (p_end, q_end) = (p0.eof.clone(), q0.eof.clone());
    let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
    let mut b = Core::new(1, 2, limits(100, 1 << 20), Instant::now());
    let q = a.add_conn(1, q0, now, false);
    let p = a.add_conn(1, p0, now, false);
    b.add_conn(0, p1, now, false); // b's first link: its sends go on p
    b.add_conn(0, q1, now, false);
    let s = b.post_send(0, 5, 0, SendBuf::Owned(vec![7; 50]));
    for c in b.conn_ids() {
        b.on_writable(c);
    }
    assert!(matches!(b.take(s), Some(Ok(Outcome::Sent))));
    // b leaves: a sees q end before it reads what waits on p.
    q_end.set(true);
    a.on_readable(q);
    assert_eq!(a.lost(1), None);
    let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    a.on_readable(p);
    let (st, d) = received(a.take(r));
    assert_eq!((st.source, st.tag, d), (1, 5, vec![7; 50]));
    // The last link ends: now b is gone, and a receive from it says so.
    p_end.set(true);
    a.on_readable(p);
    let from_b = Pattern {
        source: Some(1),
        ..any()
    };
    let r = a.post_recv(from_b, RecvBuf::Alloc(Vec::new()));
    match a.take(r) {
        Some(Err(Error::PeerLost { rank: 1, reason })) => {
            assert!(reason.contains("closed its link"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

/// Two ranks dialled each other at once; the peer took our dial (its acceptor's part
/// ended first) and sent its last message on it, then left, while our side of that
/// handshake was still under way. Its other link ending must not lose the peer yet:
/// the message comes on the link the handshake makes. And a peer whose handshake
/// ends without a link is lost then, with the reason its link gave.
#[test]
fn a_peer_whose_link_is_still_in_its_handshake_is_not_lost_when_its_other_link_ends() {
    let now = Instant::now();
    let (p0, p1, _) = pipe(1 << 12);
    let p_end = p0.eof.clone();
    let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
    let mut b = Core::new(1, 2, limits(100, 1 << 20), Instant::now());
    let p = a.add_conn(1, p0, now, false);
    // a's dial of b is in its handshake; b has both links, sends on the other one
    // (q, which a does not have yet), and leaves.
    a.set_handshaking([1].into_iter().collect());
    let (q0, q1, _) = pipe(1 << 12);
    b.add_conn(0, q1, now, false);
    b.add_conn(0, p1, now, false);
    let s = b.post_send(0, 5, 0, SendBuf::Owned(vec![9; 40]));
    for c in b.conn_ids() {
        b.on_writable(c);
    }
    assert!(matches!(b.take(s), Some(Ok(Outcome::Sent))));
    p_end.set(true);
    a.on_readable(p);
    assert_eq!(
        a.lost(1),
        None,
        "lost while a link to it was in its handshake"
    );
    let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    assert!(
        a.take(r).is_none(),
        "the receive failed before the link came"
    );
    // The handshake ends with a link: the message is there.
    let q = a.add_conn(1, q0, now, false);
    a.set_handshaking(Default::default());
    a.on_readable(q);
    let (st, d) = received(a.take(r));
    assert_eq!((st.source, st.tag, d), (1, 5, vec![9; 40]));
    assert_eq!(a.lost(1), None);

    // Again, but the handshake fails: lost then, naming why its link ended.
    let (p0, _p1, _) = pipe(1 << 12);
    let p_end = p0.eof.clone();
    let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
    let p = a.add_conn(1, p0, now, false);
    a.set_handshaking([1].into_iter().collect());
    p_end.set(true);
    a.on_readable(p);
    assert_eq!(a.lost(1), None);
    a.set_handshaking(Default::default());
    assert!(
        a.lost(1).is_some_and(|why| why.contains("closed its link")),
        "{:?}",
        a.lost(1)
    );
}

/// A peer's last message and the end of its stream come in one readiness (its
/// data, then its close, before we read): both are handled in that one turn,
/// since the poller reports no further readiness for the end.
#[test]
fn a_last_message_and_the_close_in_one_readiness_are_both_read() {
    let now = Instant::now();
    let (p0, p1, _) = pipe(1 << 16);
    let end = p0.eof.clone();
    let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
    let mut b = Core::new(1, 2, limits(100, 1 << 20), Instant::now());
    let c = a.add_conn(1, p0, now, false);
    let d = b.add_conn(0, p1, now, false);
    let s = b.post_send(0, 5, 0, SendBuf::Owned(vec![7; 50]));
    b.on_writable(d);
    assert!(matches!(b.take(s), Some(Ok(Outcome::Sent))));
    end.set(true);
    let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    a.on_read_closed(c);
    let (st, data) = received(a.take(r));
    assert_eq!((st.source, st.tag, data), (1, 5, vec![7; 50]));
    match a.lost(1) {
        Some(reason) => assert!(reason.contains("closed its link"), "{reason}"),
        None => panic!("the end of the stream was left unread"),
    }
}

/// Relay first, then upgrade: a direct link comes up beside the relayed one, on
/// each side at its own time. Messages sent before, across and after the move
/// (eager and rendezvous) are received in the order sent, whichever link the
/// receiver reads first, and the relayed link is closed on both sides.
#[test]
fn a_relayed_link_moves_to_a_direct_one_without_reordering() {
    let msg = |from: u32, i: u32| -> Vec<u8> {
        let len = if i % 7 == 3 {
            500
        } else {
            8 + (i as usize % 50)
        };
        let mut m = vec![from as u8; len];
        m[..4].copy_from_slice(&i.to_le_bytes());
        m
    };
    for read_new_first in [false, true] {
        let now = Instant::now();
        // A small relayed pipe, so that part of what precedes the move is still
        // queued on it when the direct link takes over.
        let (r0, r1, _) = pipe(300);
        let (d0, d1, _) = pipe(1 << 16);
        let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
        let mut b = Core::new(1, 2, limits(100, 1 << 20), Instant::now());
        a.add_conn(1, r0, now, true);
        b.add_conn(0, r1, now, true);
        let mut sends = Vec::new();
        for i in 0..20 {
            sends.push(a.post_send(1, i % 2, 0, SendBuf::Owned(msg(0, i))));
            sends.push(b.post_send(0, i % 2, 0, SendBuf::Owned(msg(1, i))));
        }
        let da = a.add_conn(1, d0, now, false);
        for i in 20..40 {
            sends.push(a.post_send(1, i % 2, 0, SendBuf::Owned(msg(0, i))));
        }
        let db = b.add_conn(0, d1, now, false);
        for i in 20..40 {
            sends.push(b.post_send(0, i % 2, 0, SendBuf::Owned(msg(1, i))));
        }
        let ra: Vec<ReqId> = (0..40)
            .map(|_| a.post_recv(any(), RecvBuf::Alloc(Vec::new())))
            .collect();
        let rb: Vec<ReqId> = (0..40)
            .map(|_| b.post_recv(any(), RecvBuf::Alloc(Vec::new())))
            .collect();
        if read_new_first {
            for _ in 0..10 {
                a.on_readable(da);
                b.on_readable(db);
            }
            assert!(a.take(ra[0]).is_none() && b.take(rb[0]).is_none());
        }
        settle(&mut a, &mut b);
        for (core, recvs, from) in [(&mut a, &ra, 1u32), (&mut b, &rb, 0)] {
            let got: Vec<u32> = recvs
                .iter()
                .map(|&r| {
                    let (st, d) = received(core.take(r));
                    assert_eq!(st.source, from);
                    let i = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                    assert_eq!(d, msg(from, i), "message {i} damaged");
                    i
                })
                .collect();
            assert_eq!(
                got,
                (0..40).collect::<Vec<_>>(),
                "read_new_first {read_new_first}"
            );
            let acct = core.accounting();
            assert_eq!((acct.upgrades, acct.conns), (1, 1), "{acct:?}");
        }
        for s in sends {
            assert!(
                matches!(a.take(s).or_else(|| b.take(s)), Some(Ok(Outcome::Sent))),
                "send {s} not done"
            );
        }
    }
}

#[test]
fn a_malformed_header_loses_that_peer_naming_it() {
    let (mut a, mut b, to0) = pair(limits(100, 1 << 20), 1 << 12);
    let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    let s = a.post_send(1, 0, 0, SendBuf::Owned(vec![0; 1000]));
    // Rank 1 "sends" garbage: an unknown kind.
    let mut h = Header::new(Kind::Eager).encode();
    h[0] = 77;
    to0.borrow_mut().extend(h);
    a.on_readable(0);
    for id in [r, s] {
        match a.take(id) {
            Some(Err(Error::PeerLost { rank: 1, reason })) => {
                assert!(reason.contains("unknown frame kind 77"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
    // Later calls fail at once.
    let s = a.post_send(1, 0, 0, SendBuf::Owned(vec![1]));
    assert!(matches!(
        a.take(s),
        Some(Err(Error::PeerLost { rank: 1, .. }))
    ));
    let _ = &mut b;
}

#[test]
fn an_absurd_length_and_a_stray_clear_to_send_are_protocol_errors() {
    for bad in [
        {
            let mut h = Header::new(Kind::Rts);
            h.len = u64::MAX;
            h.encode()
        },
        {
            let mut h = Header::new(Kind::Cts);
            h.id = 12345;
            h.encode()
        },
        {
            let mut h = Header::new(Kind::Data);
            h.id = 1;
            h.len = 5;
            h.encode()
        },
    ] {
        let (mut a, _b, to0) = pair(limits(100, 1 << 20), 1 << 12);
        to0.borrow_mut().extend(bad);
        a.on_readable(0);
        assert!(
            a.lost(1).is_some_and(|r| r.contains("protocol error")),
            "{:?}",
            a.lost(1)
        );
    }
}

#[test]
fn silence_past_the_liveness_time_loses_the_peer_and_heartbeats_prevent_it() {
    let mut l = limits(100, 1 << 20);
    l.liveness = Duration::from_secs(3);
    let (mut a, mut b, _) = pair(l, 1 << 12);
    let t0 = Instant::now();
    // Both tick every second: heartbeats keep the link alive.
    for s in 1..=10 {
        let now = t0 + Duration::from_secs(s);
        a.tick(now);
        b.tick(now);
        // What each read counts as heard "now" in real time; move it to `now`.
        for c in a.conn_ids() {
            a.on_readable(c);
        }
        for c in b.conn_ids() {
            b.on_readable(c);
        }
        a.heard.values_mut().for_each(|t| *t = (*t).max(now));
        b.heard.values_mut().for_each(|t| *t = (*t).max(now));
    }
    assert!(a.lost(1).is_none());
    // Rank 1 goes silent: rank 0 gives up after the liveness time.
    a.tick(t0 + Duration::from_secs(14));
    assert!(
        a.lost(1).is_some_and(|r| r.contains("sent nothing for")),
        "{:?}",
        a.lost(1)
    );
}

/// A relayed link that ends, or goes silent, names the relay proxy as well as the
/// rank: the proxy may be what died or froze.
#[test]
fn a_relayed_link_that_ends_or_goes_silent_names_the_relay_proxy() {
    let now = Instant::now();
    let limits = limits(100, 1 << 20);
    for silent in [false, true] {
        let (p0, _p1, _) = pipe(1 << 12);
        let end = p0.eof.clone();
        let mut a = Core::new(0, 2, limits, now);
        let c = a.add_conn(1, p0, now, true);
        if silent {
            a.tick(now + limits.liveness + Duration::from_secs(1));
        } else {
            end.set(true);
            a.on_readable(c);
        }
        let reason = a.lost(1).unwrap_or_default().to_string();
        assert!(reason.contains("relay proxy"), "{reason}");
        assert!(
            reason.contains(if silent { "frozen" } else { "ended" }),
            "{reason}"
        );
    }
}

/// A shell frame (a shared-memory acceptance, say) and then the end of its link come
/// in one readiness: the link is not read past the frame until the shell has handled
/// it, so the end finds the link the shell made, and the peer is not lost.
#[test]
fn the_end_of_a_link_right_after_a_shell_frame_waits_for_the_shell() {
    let now = Instant::now();
    let (p0, p1, _) = pipe(1 << 12);
    let end = p0.eof.clone();
    let mut a = Core::new(0, 2, limits(100, 1 << 20), now);
    let mut b = Core::new(1, 2, limits(100, 1 << 20), now);
    let ca = a.add_conn(1, p0, now, false);
    let cb = b.add_conn(0, p1, now, false);
    b.send_shell(cb, 2, vec![1, 2, 3]);
    b.on_writable(cb);
    end.set(true);
    // The poller says the peer shut its side: read on to the end, as the engine does.
    a.on_read_closed(ca);
    assert_eq!(a.lost(1), None, "read past the shell frame");
    let frames = a.take_shell();
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0].what, frames[0].payload.clone()),
        (2, vec![1, 2, 3])
    );
    // The shell makes the better link, then the old one is read on to its end.
    let (q0, _q1, _) = pipe(1 << 12);
    a.add_conn_via(1, q0, now, Via::Memory);
    a.shell_done(ca);
    assert_eq!(a.lost(1), None);
    assert_eq!(a.link_via(1), Some(Via::Memory));
}

/// The frames shared memory added, from a peer that lies: a shell frame above its
/// limit, an address or a shared copy on a link that cannot read the peer's memory,
/// a copy finished for a request that does not exist. Each loses that peer naming the protocol error.
#[test]
fn bad_shell_address_and_finish_frames_are_protocol_errors() {
    for (kind, id, len) in [
        (Kind::Shell, 1, SHELL_MAX + 1),
        (Kind::Addr, 3, 10),
        (Kind::Fin, 77, 10),
        (Kind::Share, 3, 1 << 20),
    ] {
        let (mut a, _b, to0) = pair(limits(100, 1 << 20), 1 << 12);
        let mut h = Header::new(kind);
        h.id = id;
        h.len = len;
        to0.borrow_mut().extend(h.encode());
        a.on_readable(0);
        assert!(
            a.lost(1).is_some_and(|r| r.contains("protocol error")),
            "{kind:?}: {:?}",
            a.lost(1)
        );
    }
}

/// Someone holding the job's secret opens a second link as rank 1 and announces a
/// 4 GiB eager message on it: that link closes; rank 1's real link, and what it
/// carries, go on.
#[test]
fn a_protocol_error_on_one_of_two_links_closes_that_link_only() {
    let now = Instant::now();
    let (p0, p1, _) = pipe(1 << 12);
    let (q0, _q1, to_q) = pipe(1 << 12);
    let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
    let mut b = Core::new(1, 2, limits(100, 1 << 20), Instant::now());
    let p = a.add_conn(1, p0, now, false);
    let q = a.add_conn(1, q0, now, false);
    b.add_conn(0, p1, now, false);
    let mut h = Header::new(Kind::Eager);
    h.len = 4 << 30;
    to_q.borrow_mut().extend(h.encode());
    a.on_readable(q);
    assert_eq!(a.lost(1), None);
    assert!(!a.conn_ids().contains(&q), "the lying link is still open");
    // Both ways on the real link.
    let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    let s = b.post_send(0, 9, 0, SendBuf::Owned(vec![3; 40]));
    let back = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    let s2 = a.post_send(1, 4, 0, SendBuf::Owned(vec![5; 20]));
    settle(&mut a, &mut b);
    assert!(matches!(b.take(s), Some(Ok(Outcome::Sent))));
    assert!(matches!(a.take(s2), Some(Ok(Outcome::Sent))));
    let (st, d) = received(a.take(r));
    assert_eq!((st.source, st.tag, d), (1, 9, vec![3; 40]));
    let (st, d) = received(b.take(back));
    assert_eq!((st.source, st.tag, d), (0, 4, vec![5; 20]));
    assert!(a.conn_ids().contains(&p));
}

/// A blocking send's short way (`send_now`) writes what the link takes at once and
/// queues the rest; sends that follow keep their order behind it, whichever way
/// they go, and it steps aside where it does not apply.
#[test]
fn sends_written_at_once_keep_their_order_with_queued_ones() {
    let (mut a, mut b, _) = pair(limits(100, 1 << 20), 40);
    // To ourselves, and above the eager limit: the usual way.
    assert!(a.send_now(0, 1, 0, b"me").is_none());
    assert!(a.send_now(1, 1, 0, &[7u8; 101]).is_none());
    // A header (24 bytes) and 30 bytes: 40 go now, 14 are queued.
    let first: Vec<u8> = (0..30).collect();
    assert_eq!(a.send_now(1, 1, 0, &first), Some(()));
    // Something is queued: the next one goes the usual way, behind it.
    assert!(a.send_now(1, 2, 0, b"second").is_none());
    let second = a.post_send(1, 2, 0, SendBuf::Owned(b"second".to_vec()));
    settle(&mut a, &mut b);
    assert!(matches!(a.take(second), Some(Ok(Outcome::Sent))));
    // The queue is empty again: written at once, whole.
    assert_eq!(a.send_now(1, 3, 0, b"third"), Some(()));
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        settle(&mut a, &mut b);
        let (st, data) = received(b.take(r));
        got.push((st.tag, data));
    }
    assert_eq!(
        got,
        vec![(1, first), (2, b"second".to_vec()), (3, b"third".to_vec())]
    );
    // A lost peer: the usual way, which fails the send naming it.
    a.fail_peer(1, "gone");
    assert!(a.send_now(1, 4, 0, b"late").is_none());
}

/// `send_now_parts` (a collective's signature, then its flit where it lies) sends
/// the two parts as one message wherever the link cuts them: inside the frame's
/// header, inside the prefix, inside the body, or not at all; the allowance lets a
/// message pass the eager limit by that much only.
#[test]
fn a_message_sent_from_two_parts_arrives_whole_wherever_the_link_cuts_it() {
    let prefix: Vec<u8> = (100..124).collect();
    let body: Vec<u8> = (0..60).collect();
    let whole = [prefix.as_slice(), body.as_slice()].concat();
    for cap in [1, 10, 24, 30, 47, 48, 49, 60, 100, 108, 200] {
        let (mut a, mut b, _) = pair(limits(70, 1 << 20), cap);
        assert!(a.send_now_parts(1, 5, 0, &prefix, &body, 0).is_none());
        assert!(a
            .send_now_parts(1, 5, 0, &prefix, &body[..70 - 24 + 1], 0)
            .is_none());
        assert_eq!(a.send_now_parts(1, 5, 0, &prefix, &body, 14), Some(()));
        let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        settle(&mut a, &mut b);
        let (st, data) = received(b.take(r));
        assert_eq!((st.tag, &data), (5, &whole), "link of {cap} bytes");
    }
}

/// A split receive lands a message's head in its own bytes and the rest straight in
/// the caller's buffer: copied from the sender's memory, streamed through a link
/// that cuts it anywhere (across the head's end too), or taken from the unexpected
/// messages. A message of another length lands whole, and a detached receive no
/// longer writes into what it was lent.
#[test]
fn a_split_receive_lands_its_body_in_the_lent_buffer_whatever_the_path() {
    const HEAD: usize = 24;
    let data: Vec<u8> = (0..HEAD + 50_000).map(|i| (i * 13 + 5) as u8).collect();
    // (reads the peer's memory, eager limit, pipe capacity, posted before the
    // message comes, posted while it is still coming). Posted after it came whole,
    // it is taken from the unexpected messages; posted while an eager one is still
    // coming, it is claimed and the message moved in once complete.
    for (mem, eager, cap, early, midway) in [
        (Some(true), 16, 1 << 12, true, false),
        (Some(true), 16, 1 << 12, false, false),
        (None, 16, 61, true, false),
        (None, 1 << 20, 1 << 12, true, false),
        (None, 1 << 20, 97, true, false),
        (None, 1 << 20, 1 << 12, false, false),
        (None, 1 << 20, 1 << 12, false, true),
    ] {
        let case =
            format!("memory {mem:?}, eager {eager}, pipe {cap}, early {early}, midway {midway}");
        let now = Instant::now();
        let (mut p0, mut p1, _) = pipe(cap);
        p0.mem = mem;
        p1.mem = mem;
        let mut a = Core::new(0, 2, limits(eager, 1 << 20), now);
        let mut b = Core::new(1, 2, limits(eager, 1 << 20), now);
        a.add_conn(1, p0, now, false);
        b.add_conn(0, p1, now, false);
        let mut body = vec![0u8; data.len() - HEAD];
        let post = |b: &mut Core<Pipe>, body: &mut [u8]| {
            // SAFETY: `body` outlives the receive (taken below).
            #[allow(unsafe_code)]
            let raw = unsafe { RawBuf::from_mut(body) };
            b.post_recv(any(), RecvBuf::Split(Split::new(HEAD, raw)))
        };
        let s = a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
        let r = if early {
            let r = post(&mut b, &mut body);
            settle(&mut a, &mut b);
            r
        } else if midway {
            forward(&mut a, &mut b, 3);
            let r = post(&mut b, &mut body);
            assert!(!b.is_done(r), "{case}: still coming");
            settle(&mut a, &mut b);
            r
        } else {
            settle(&mut a, &mut b);
            let r = post(&mut b, &mut body);
            settle(&mut a, &mut b);
            r
        };
        let (st, head) = received(b.take(r));
        assert_eq!(st.len, data.len(), "{case}");
        assert_eq!(head, data[..HEAD], "{case}: only the head comes back");
        assert!(
            body == data[HEAD..],
            "{case}: the body is in the lent buffer"
        );
        assert!(a.take(s).is_some_and(|r| r.is_ok()), "{case}");
    }

    // Another length: whole, the lent buffer untouched.
    let (mut a, mut b, _) = pair(limits(1 << 20, 1 << 20), 1 << 12);
    let mut body = vec![0u8; 100];
    #[allow(unsafe_code)]
    let raw = unsafe { RawBuf::from_mut(&mut body) };
    let r = b.post_recv(any(), RecvBuf::Split(Split::new(HEAD, raw)));
    a.post_send(1, 1, 0, SendBuf::Owned(data[..HEAD + 99].to_vec()));
    settle(&mut a, &mut b);
    let (st, whole) = received(b.take(r));
    assert_eq!((st.len, &whole[..]), (HEAD + 99, &data[..HEAD + 99]));
    assert!(body.iter().all(|&x| x == 0));

    // Detached after matching, halfway through: the rest lands elsewhere.
    let (mut a, mut b, _) = pair(limits(1 << 20, 1 << 20), 1 << 12);
    let mut body = vec![0u8; data.len() - HEAD];
    #[allow(unsafe_code)]
    let raw = unsafe { RawBuf::from_mut(&mut body) };
    let r = b.post_recv(any(), RecvBuf::Split(Split::new(HEAD, raw)));
    a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
    forward(&mut a, &mut b, 1);
    let landed = body.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    assert!(landed > 0 && landed < body.len(), "halfway: {landed} bytes");
    b.detach(r);
    settle(&mut a, &mut b);
    assert!(
        body[landed..].iter().all(|&x| x == 0),
        "written after detach"
    );
}

/// A sealed link over a pipe, opening large records in place as the engine's
/// encrypted links do, or (`in_place` false) claiming it does not.
struct SealedPipe {
    s: crate::seal::Sealed<Pipe>,
    in_place: bool,
}

impl Read for SealedPipe {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.s.read(out)
    }
}

impl Write for SealedPipe {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.s.write(data)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

impl LinkIo for SealedPipe {
    fn read_direct(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        self.s.read_in_place(dst)
    }
    fn reads_in_place(&self) -> bool {
        self.in_place
    }
    fn pending(&self) -> bool {
        self.s.pending()
    }
}

/// Over an encrypted link, a split receive detached halfway through a large message
/// leaves the link working: the next message arrives.
#[test]
fn a_split_receive_detached_midway_on_a_sealed_link_keeps_the_link() {
    const HEAD: usize = 24;
    let (ka, kb) = crate::seal::tests::pair_keys();
    let now = Instant::now();
    let (p0, p1, _) = pipe(1 << 12);
    let mut a = Core::new(0, 2, limits(1 << 20, 1 << 20), now);
    let mut b = Core::new(1, 2, limits(1 << 20, 1 << 20), now);
    let sealed = |p, k| SealedPipe {
        s: crate::seal::Sealed::new(p, k, "peer".into()),
        in_place: true,
    };
    a.add_conn(1, sealed(p0, ka), now, false);
    b.add_conn(0, sealed(p1, kb), now, false);
    let data: Vec<u8> = (0..HEAD + 200_000).map(|i| (i * 13 + 5) as u8).collect();
    let mut body = vec![0u8; data.len() - HEAD];
    #[allow(unsafe_code)]
    let raw = unsafe { RawBuf::from_mut(&mut body) };
    let r = b.post_recv(any(), RecvBuf::Split(Split::new(HEAD, raw)));
    a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
    // Past the first record (64 KiB, read through the link's buffer with the frame's
    // header), into the second: where it is opened in place, part of it is in the
    // body by now.
    forward(&mut a, &mut b, 24);
    assert!(!b.is_done(r), "still arriving");
    b.detach(r);
    drop(body);
    let after = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    a.post_send(1, 2, 0, SendBuf::Owned(data[..1000].to_vec()));
    settle(&mut a, &mut b);
    let (st, got) = received(b.take(after));
    assert_eq!((st.tag, &got[..]), (2, &data[..1000]));
}

/// Ranks 0 and 1 linked by pipes whose ends read each other's memory as `mem`
/// says (see [`Pipe::mem`]), eager limit 16 bytes; and rank 0's lends.
#[allow(clippy::type_complexity)]
fn memory_pair(
    mem: Option<bool>,
) -> (
    Core<Pipe>,
    Core<Pipe>,
    Rc<RefCell<[std::collections::HashSet<u64>; 2]>>,
) {
    let now = Instant::now();
    let (mut p0, mut p1, _) = pipe(1 << 12);
    p0.mem = mem;
    p1.mem = mem;
    let lends = p0.lends.clone();
    let mut a = Core::new(0, 2, limits(16, 1 << 20), now);
    let mut b = Core::new(1, 2, limits(16, 1 << 20), now);
    a.add_conn(1, p0, now, false);
    b.add_conn(0, p1, now, false);
    (a, b, lends)
}

/// A message lent in two parts (a collective's signature, then a body the caller
/// lends) arrives whole whatever the link and receive: copied from where its parts
/// lie where the link reads the peer's memory (the lend then ends with the copy), in
/// one buffer of ours where it does not or where the kernel refuses.
#[test]
fn a_lent_message_arrives_whole_and_its_lend_ends() {
    const HEAD: usize = 32;
    let head: Vec<u8> = (0..HEAD).map(|i| (i * 7 + 1) as u8).collect();
    let body: Vec<u8> = (0..70_001).map(|i| (i * 13 + 5) as u8).collect();
    let whole = [head.clone(), body.clone()].concat();
    for (mem, split, early) in [
        (Some(true), false, true),
        (Some(true), true, true),
        (Some(true), true, false),
        (Some(false), false, true),
        (None, false, true),
        (None, true, false),
    ] {
        let case = format!("memory {mem:?}, split {split}, posted first {early}");
        let (mut a, mut b, lends) = memory_pair(mem);
        let mut got = vec![0u8; body.len()];
        let post = |b: &mut Core<Pipe>, got: &mut [u8]| {
            if split {
                // SAFETY: `got` outlives the receive (taken below).
                #[allow(unsafe_code)]
                let raw = unsafe { RawBuf::from_mut(got) };
                b.post_recv(any(), RecvBuf::Split(Split::new(HEAD, raw)))
            } else {
                b.post_recv(any(), RecvBuf::Alloc(Vec::new()))
            }
        };
        let r = early.then(|| post(&mut b, &mut got));
        // SAFETY: `body` outlives the send, which completes below.
        #[allow(unsafe_code)]
        let lent = unsafe { RawBuf::from_ref(&body) };
        let s = a.post_send(
            1,
            1,
            0,
            SendBuf::Lent {
                head: head.clone(),
                body: lent,
                lend: None,
            },
        );
        settle(&mut a, &mut b);
        let r = r.unwrap_or_else(|| post(&mut b, &mut got));
        settle(&mut a, &mut b);
        let (st, data) = received(b.take(r));
        assert_eq!(st.len, whole.len(), "{case}");
        if split {
            assert_eq!(data, head, "{case}");
            assert!(got == body, "{case}: the body in place");
        } else {
            assert!(data == whole, "{case}");
        }
        assert!(a.take(s).is_some_and(|r| r.is_ok()), "{case}");
        assert!(lends.borrow()[0].is_empty(), "{case}: the lend ended");
    }
}

/// A lent message whose send is detached before the receiver copies it (the
/// sender's call failed, its caller may reuse the body) is taken back: the
/// receiver's copy is thrown away and its receive fails naming the sender, whether
/// it copies from the sender's memory or asks for the data; the link goes on.
#[test]
fn a_lent_message_taken_back_fails_its_receive_and_keeps_the_link() {
    for mem in [Some(true), Some(false)] {
        let (mut a, mut b, lends) = memory_pair(mem);
        let mut body = vec![9u8; 50_000];
        // SAFETY: `body` outlives the lend, which the detach below ends.
        #[allow(unsafe_code)]
        let lent = unsafe { RawBuf::from_ref(&body) };
        let s = a.post_send(
            1,
            1,
            0,
            SendBuf::Lent {
                head: vec![1; 32],
                body: lent,
                lend: None,
            },
        );
        // The announcement crosses; then the sender's call fails.
        forward(&mut a, &mut b, 3);
        a.detach(s);
        assert!(lends.borrow()[0].is_empty(), "{mem:?}: taken back at once");
        body.fill(0xEE);
        let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        settle(&mut a, &mut b);
        match b.take(r) {
            Some(Err(Error::Withdrawn { rank: 0 })) => {}
            Some(Ok(_)) => panic!("{mem:?}: received bytes the sender had taken back"),
            other => panic!("{mem:?}: {other:?}"),
        }
        // The detached send's request is gone (nothing left behind), and the link
        // goes on.
        assert_eq!(a.reqs.len(), 0, "{mem:?}: the sender's request is freed");
        let s2 = a.post_send(1, 2, 0, SendBuf::Owned(vec![4; 40_000]));
        let r2 = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        settle(&mut a, &mut b);
        assert_eq!(received(b.take(r2)).1, vec![4; 40_000], "{mem:?}");
        assert!(a.take(s2).is_some_and(|r| r.is_ok()), "{mem:?}");
    }
}

/// A receiver declared lost (it may still be alive, a straggler) that then copies a
/// message announced to it before finds the copy thrown away: the sender freed the
/// message with the link, and the lend went with it.
#[test]
fn a_straggler_does_not_take_freed_memory_for_a_message() {
    let (mut a, mut b, _) = memory_pair(Some(true));
    // The caller's buffer (kept here, so that the test's own copy reads live memory):
    // once the send has failed, the caller reuses it.
    let mut mine = vec![7u8; 50_000];
    // SAFETY: `mine` outlives the send, which fails below.
    #[allow(unsafe_code)]
    let raw = unsafe { RawBuf::from_ref(&mine) };
    let s = a.post_send(1, 1, 0, SendBuf::Raw(raw));
    forward(&mut a, &mut b, 3);
    a.fail_peer(1, "no word from it for 30 s");
    assert!(matches!(a.take(s), Some(Err(Error::PeerLost { .. }))));
    mine.fill(0xEE);
    let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
    for c in b.conn_ids() {
        b.on_readable(c);
    }
    match b.take(r) {
        Some(Err(Error::Withdrawn { rank: 0 })) => {}
        Some(Ok(_)) => panic!("took freed memory for the message"),
        other => panic!("{other:?}"),
    }
}
