//! Receives and the reading side: matching, the rendezvous, reading and handling
//! what a link brings (frames, payloads), and pausing a link when the unexpected
//! buffer is full.

use super::*;

impl<C: LinkIo> Core<C> {
    /// Fails `rid` if its buffer cannot hold `env`'s message; true if it did.
    pub(super) fn too_small(&mut self, rid: ReqId, env: &Envelope) -> bool {
        let cap = match self.reqs.get(rid).map(|r| &r.state) {
            Some(ReqState::Recv { buf, .. }) => buf.capacity(),
            _ => return true,
        };
        match cap {
            Some(cap) if (cap as u64) < env.len => {
                self.complete(
                    rid,
                    Err(Error::Truncated {
                        from: env.source,
                        tag: env.tag,
                        len: env.len,
                        capacity: cap,
                    }),
                );
                true
            }
            _ => false,
        }
    }

    /// Marks `rid` as matched with `env` and sizes its buffer.
    pub(super) fn matched(&mut self, rid: ReqId, env: &Envelope) {
        if let Some(ReqState::Recv { buf, matched, .. }) =
            self.reqs.get_mut(rid).map(|r| &mut r.state)
        {
            buf.prepare(env.len as usize);
            *matched = Some(Status {
                source: env.source,
                tag: env.tag,
                len: env.len as usize,
            });
        }
    }

    /// Posts a receive.
    pub fn post_recv(&mut self, pattern: Pattern, buf: RecvBuf) -> ReqId {
        let cap = buf.capacity();
        let id = self.new_req(ReqState::Recv { buf, matched: None });
        if let Some((env, _)) = self.queues.peek(&pattern) {
            if let Some(cap) = cap {
                if (cap as u64) < env.len {
                    let env = *env;
                    self.too_small(id, &env);
                    return id;
                }
            }
        }
        match self.queues.post(pattern, id) {
            Some((env, key)) => self.take_unexpected(id, env, key),
            None => {
                if let Some(e) = self.hopeless(&pattern) {
                    self.queues.cancel(id);
                    self.complete(id, Err(e));
                }
            }
        }
        id
    }

    /// Why a receive with this pattern can never match, if it cannot.
    pub(super) fn hopeless(&self, p: &Pattern) -> Option<Error> {
        match p.source {
            Some(s) if s != self.me && self.lost.contains_key(&s) => Some(self.lost_error(s)),
            None if self.size > 1 && self.lost.len() as u32 >= self.size - 1 => {
                let rank = self.lost.keys().min().copied().unwrap_or(0);
                Some(Error::PeerLost {
                    rank,
                    reason: "every other rank is gone".into(),
                })
            }
            _ => None,
        }
    }

    /// Receive `rid` matched the unexpected message `key`.
    pub(super) fn take_unexpected(&mut self, rid: ReqId, env: Envelope, key: usize) {
        self.matched(rid, &env);
        let Some(u) = self.unexp.get_mut(key) else {
            return;
        };
        match &mut u.body {
            UnexBody::Eager {
                complete: false, ..
            } => u.claimed = Some(rid),
            UnexBody::Eager { complete: true, .. } => {
                let u = self.unexp.remove(key);
                if let Some(sid) = self.sync_local.remove(&key) {
                    self.complete(sid, Ok(Outcome::Sent));
                }
                if let UnexBody::Eager { data, .. } = u.body {
                    if env.source != self.me {
                        self.acct.unexpected_bytes -= data.len();
                    }
                    if let Some(ReqState::Recv { buf, .. }) =
                        self.reqs.get_mut(rid).map(|r| &mut r.state)
                    {
                        buf.fill(data);
                    }
                }
                self.complete_recv(rid);
                self.resume_stalled();
            }
            UnexBody::Stalled { conn } => {
                let c = *conn;
                self.unexp.remove(key);
                self.stalled.retain(|&s| s != c);
                if let Some(conn) = self.conns.get_mut(c) {
                    conn.rx = Rx::Payload {
                        to: Sink::Req(rid),
                        len: env.len as usize,
                        have: 0,
                    };
                }
                self.pump(c);
            }
            UnexBody::Rts { id } => {
                let id = *id;
                self.unexp.remove(key);
                self.clear_to_send(env.source, id, rid, env.len);
            }
        }
    }

    /// Tells `peer` to send the data of its request `id` into our receive `rid`.
    /// Over a link that reads the peer's memory, copies the data from where the
    /// sender keeps it instead (one copy) and says `Fin`.
    pub(super) fn clear_to_send(&mut self, peer: u32, id: u32, rid: ReqId, len: u64) {
        /// Why a lent message's copy was thrown away.
        const WITHDRAWN: &str = "the lend was taken back";
        let Some(&c) = self.links.get(&peer).and_then(|v| v.first()) else {
            self.expect.insert((peer, id), rid);
            return;
        };
        if let Some(addr) = self.peer_addr.remove(&(peer, id)) {
            let lent = self.peer_lend.remove(&(peer, id));
            let share = self.open_share(c, id, rid, addr, lent, len);
            let mut helped = 0;
            let Core { conns, reqs, .. } = self;
            let copied = match (conns.get_mut(c), reqs.get_mut(rid).map(|r| &mut r.state)) {
                (Some(conn), Some(ReqState::Recv { buf, .. })) if conn.io.reads_peer() => {
                    // Where the message lies: one piece, or a lent message's two.
                    let at = match lent {
                        Some((body, _, head)) => {
                            [(addr, head), (body, (len as usize).saturating_sub(head))]
                        }
                        None => [(addr, len as usize), (0, 0)],
                    };
                    let read = match (share, buf.parts(len as usize)) {
                        (Some(src), _) => {
                            let dst = &mut buf.slice()[..len as usize];
                            shared_copy(&mut conn.io, id, src, dst).map(|n| helped = n)
                        }
                        (None, Some((head, body))) => {
                            read_pieces(&mut conn.io, &at, &mut [head, body])
                        }
                        (None, None) => {
                            let dst = &mut buf.slice()[..len as usize];
                            read_pieces(&mut conn.io, &at, &mut [dst])
                        }
                    };
                    match (read, lent) {
                        // A lent message's bytes are good only if the lend still
                        // stands now that they are copied.
                        (r, Some((_, n, _))) if !conn.io.peer_lends(n) => {
                            drop(r);
                            Err(io::Error::other(WITHDRAWN))
                        }
                        (r, _) => r,
                    }
                }
                _ => Err(io::ErrorKind::Unsupported.into()),
            };
            if copied.as_ref().is_err_and(|e| e.to_string() == WITHDRAWN) {
                // The sender's request (detached) ends with this `Fin` as with any.
                let mut h = Header::new(Kind::Fin);
                h.id = id;
                h.len = len;
                self.queue(c, Out::control(h));
                self.complete(rid, Err(Error::Withdrawn { rank: peer }));
                return;
            }
            match copied {
                Ok(()) => {
                    self.acct.moved += len;
                    self.acct.single_copies += 1;
                    self.acct.shared_chunks += u64::from(helped);
                    let mut h = Header::new(Kind::Fin);
                    h.id = id;
                    h.len = len;
                    self.queue(c, Out::control(h));
                    self.complete_recv(rid);
                    return;
                }
                // The sender died: the link's end fails the receive, naming it.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
                Err(e) => {
                    if !self.single_copy_refused {
                        self.single_copy_refused = true;
                        tracing::info!(
                            rank = peer,
                            error = %e,
                            "cannot read a peer's memory (cross-memory attach); large messages \
                             inside the node stream through shared memory instead"
                        );
                    }
                }
            }
        }
        self.expect.insert((peer, id), rid);
        let mut h = Header::new(Kind::Cts);
        h.id = id;
        h.len = len;
        self.queue(
            c,
            Out {
                head: h.encode(),
                body: None,
                off: 0,
                req: None,
            },
        );
    }

    /// Whether the copy of the peer's large message `id` (at `addr`, `lent` as its
    /// `Lend` said) into receive `rid` is shared with the peer: it is when the
    /// message lies in one piece and goes into one, and the link can. If so, opens
    /// our share slot and tells the peer where the message goes (`Share`), and
    /// returns where it lies.
    fn open_share(
        &mut self,
        c: ConnId,
        id: u32,
        rid: ReqId,
        addr: u64,
        lent: Option<(u64, u64, usize)>,
        len: u64,
    ) -> Option<u64> {
        if !self.sharing || len < SHARE_MIN as u64 {
            return None;
        }
        let src = match lent {
            None => addr,
            Some((body, _, 0)) => body,
            Some(_) => return None,
        };
        let conn = self.conns.get_mut(c)?;
        let Some(ReqState::Recv { buf, .. }) = self.reqs.get_mut(rid).map(|r| &mut r.state) else {
            return None;
        };
        if !conn.io.shares() || buf.parts(len as usize).is_some() {
            return None;
        }
        let dst = buf.slice().get_mut(..len as usize)?.as_mut_ptr() as u64;
        conn.io.open_share(id);
        let mut h = Header::new(Kind::Share);
        h.tag = (dst >> 32) as u32;
        h.context = dst as u32;
        h.id = id;
        h.len = len;
        self.queue(c, Out::control(h));
        Some(src)
    }

    /// The receiver of our large message `h.id` copies it from our memory and
    /// shares the copy (`Share`): we write chunks of it into its buffer, at the
    /// address it gave, until none is left to take. A message of ours no longer
    /// held, or not as the receiver describes it (taken back, say), is left to the
    /// receiver alone, whose copy of it then fails its check.
    fn help_copy(&mut self, c: ConnId, peer: u32, h: &Header) {
        let Core {
            conns,
            reqs,
            help_refused,
            ..
        } = self;
        let Some(conn) = conns.get_mut(c) else {
            return;
        };
        let Some(ReqState::Send {
            dest,
            held: Some(buf),
        }) = reqs.get(h.id as usize).map(|r| &r.state)
        else {
            return;
        };
        let src = buf.as_slice();
        if *help_refused || *dest != peer || src.len() as u64 != h.len || src.len() < SHARE_MIN {
            return;
        }
        let dst = (u64::from(h.tag) << 32) | u64::from(h.context);
        let (chunk, chunks) = share_geometry(src.len());
        while let Ok(Some(i)) = conn.io.claim(false, h.id, chunks) {
            let off = i as usize * chunk;
            let piece = &src[off..(off + chunk).min(src.len())];
            let wrote = conn.io.write_peer(dst + off as u64, piece);
            conn.io.helped(i, wrote.is_ok());
            if let Err(e) = wrote {
                // The kernel refuses writes to the peer (a ptrace policy): the
                // receiver copies that chunk itself, and we stop offering.
                if e.kind() == io::ErrorKind::PermissionDenied {
                    *help_refused = true;
                    tracing::info!(
                        rank = peer,
                        error = %e,
                        "cannot write a peer's memory (cross-memory attach); receivers \
                         inside the node copy large messages alone"
                    );
                }
                break;
            }
        }
    }

    /// The oldest unexpected message `pattern` accepts, left in place. An error if
    /// none is there and none can come.
    pub fn iprobe(&self, pattern: &Pattern) -> Result<Option<Status>, Error> {
        if let Some((env, _)) = self.queues.peek(pattern) {
            return Ok(Some(Status {
                source: env.source,
                tag: env.tag,
                len: env.len as usize,
            }));
        }
        match self.hopeless(pattern) {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// A matched probe (MPI's `MPI_Improbe`): the oldest unexpected message
    /// `pattern` accepts, taken out of matching at once so that no other receive
    /// can have it, and a receive request that gets its bytes (in a buffer of the
    /// message's length: rendezvous data is asked for now). `None` if no such
    /// message is there; an error if none can come.
    pub fn improbe(&mut self, pattern: &Pattern) -> Result<Option<(Status, ReqId)>, Error> {
        let Some((env, key)) = self.queues.take(pattern) else {
            return match self.hopeless(pattern) {
                Some(e) => Err(e),
                None => Ok(None),
            };
        };
        let id = self.new_req(ReqState::Recv {
            buf: RecvBuf::Alloc(Vec::new()),
            matched: None,
        });
        self.take_unexpected(id, env, key);
        let st = Status {
            source: env.source,
            tag: env.tag,
            len: env.len as usize,
        };
        Ok(Some((st, id)))
    }

    /// The connection can be read: reads and handles everything available.
    pub fn on_readable(&mut self, c: ConnId) {
        self.pump(c);
    }

    /// Readiness that says the peer shut its side of `c` (after what it sent
    /// last, which may still wait to be read): reads on to the end.
    pub fn on_read_closed(&mut self, c: ConnId) {
        if let Some(conn) = self.conns.get_mut(c) {
            conn.hup = true;
        }
        self.pump(c);
    }

    /// The short way of a small message on a link that carries records (see
    /// [`LinkIo::peek_frame`]): when the next record is a whole eager message and
    /// a posted receive takes it, the receive is matched from the record's header
    /// and its payload copied straight into its buffer, with nothing staged.
    /// `Some(true)`: one was taken; `Some(false)`: the usual reading must handle
    /// what is there ([`Core::pump`]); `None`: nothing is there.
    pub(super) fn take_small(&mut self, c: ConnId) -> Option<bool> {
        let conn = self.conns.get_mut(c)?;
        if self.draining
            || conn.shell_hold
            || conn.gate.is_some()
            || !matches!(conn.rx, Rx::Header)
            || conn.start != conn.end
        {
            return Some(false);
        }
        let (head, rec) = match conn.io.peek_frame() {
            Peek::Nothing => return None,
            Peek::Other => return Some(false),
            Peek::Frame { head, len } => (head, len),
        };
        let peer = conn.peer;
        // What does not decode, or is not one whole eager message, goes the usual
        // way (which names a protocol error).
        let Ok(h) = Header::decode(&head) else {
            return Some(false);
        };
        if h.kind != Kind::Eager || h.len != (rec - HEADER) as u64 {
            return Some(false);
        }
        let env = Envelope {
            source: peer,
            tag: h.tag,
            context: h.context,
            len: h.len,
        };
        let rid = loop {
            // No receive takes it: the usual way files it as unexpected.
            let Some((_, rid)) = self.queues.arrive(&env) else {
                return Some(false);
            };
            if !self.too_small(rid, &env) {
                break rid;
            }
        };
        self.matched(rid, &env);
        let now = self.now;
        let Core { conns, reqs, .. } = self;
        let conn = conns.get_mut(c)?;
        let dst: &mut [u8] = match reqs.get_mut(rid).map(|r| &mut r.state) {
            Some(ReqState::Recv { buf, .. }) => &mut buf.slice()[..h.len as usize],
            _ => &mut [],
        };
        conn.io.take_frame(HEADER, dst);
        conn.heard = now;
        self.acct.moved += rec as u64;
        self.complete_recv(rid);
        self.handled_one(c, peer);
        Some(true)
    }

    /// Reads connection `c` until it would block or is paused.
    pub(super) fn pump(&mut self, c: ConnId) {
        if self.draining {
            return self.pump_draining(c);
        }
        loop {
            if let Err(reason) = self.consume(c) {
                self.fail_conn(c, &reason);
                return;
            }
            let Some(conn) = self.conns.get_mut(c) else {
                return;
            };
            let peer = conn.peer;
            let r = match conn.rx {
                _ if conn.shell_hold => return,
                Rx::Stalled { .. } | Rx::Gated => return,
                Rx::Payload { to, len, have }
                    if conn.start == conn.end
                        && len - have >= DIRECT
                        && !(conn.io.reads_in_place()
                            && matches!(to, Sink::Req(rid) if matches!(
                                self.reqs.get(rid).map(|r| &r.state),
                                Some(ReqState::Recv { buf: RecvBuf::Split(_), .. })
                            ))) =>
                {
                    let dst: &mut [u8] = match to {
                        Sink::Req(rid) => match self.reqs.get_mut(rid).map(|r| &mut r.state) {
                            Some(ReqState::Recv { buf, .. }) => buf.window(have, len),
                            _ => return,
                        },
                        Sink::Unex(key) => match self.unexp.get_mut(key).map(|u| &mut u.body) {
                            Some(UnexBody::Eager { data, .. }) => &mut data[have..len],
                            _ => return,
                        },
                        Sink::Shell(key) => match self.shell_partial.get_mut(key) {
                            Some(f) => &mut f.payload[have..len],
                            None => return,
                        },
                    };
                    let want = dst.len();
                    match conn.io.read_direct(dst) {
                        Ok(n) if n > 0 => {
                            conn.rx = Rx::Payload {
                                to,
                                len,
                                have: have + n,
                            };
                            Ok((n, want))
                        }
                        other => other.map(|n| (n, want)),
                    }
                }
                _ => {
                    if conn.start == conn.end {
                        conn.start = 0;
                        conn.end = 0;
                    } else if conn.start > 0 && conn.stage.len() - conn.end < HEADER {
                        conn.stage.copy_within(conn.start..conn.end, 0);
                        conn.end -= conn.start;
                        conn.start = 0;
                    }
                    let want = conn.stage.len() - conn.end;
                    let end = conn.end;
                    match conn.io.read(&mut conn.stage[end..]) {
                        Ok(n) => {
                            conn.end += n;
                            Ok((n, want))
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            match r {
                Ok((0, _)) => {
                    self.closed_by_peer(c, peer);
                    return;
                }
                Ok((n, want)) => {
                    self.acct.moved += n as u64;
                    let now = self.now;
                    let hup = match self.conns.get_mut(c) {
                        Some(x) => {
                            x.heard = now;
                            x.hup
                        }
                        None => false,
                    };
                    if n < want && !hup {
                        // Drained for now (a short read on a stream socket); handle
                        // what came and wait for the next readiness. Not when the
                        // peer has shut its side: its last bytes and the end come in
                        // one readiness, and the end must be read too.
                        if let Err(reason) = self.consume(c) {
                            self.fail_conn(c, &reason);
                            return;
                        }
                        self.finish_direct(c);
                        return;
                    }
                    self.finish_direct(c);
                }
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let why = self.link_failure(c, &e);
                    self.fail_peer(peer, &why);
                    return;
                }
            }
        }
    }

    /// A protocol error on connection `c`: when its peer has other links, closes
    /// `c` alone and fails only what was on it (its queued sends, the message it was
    /// filling); the peer's last link takes the peer with it.
    pub(super) fn fail_conn(&mut self, c: ConnId, reason: &str) {
        let Some(peer) = self.conn_peer(c) else {
            return;
        };
        if self.links.get(&peer).is_none_or(|v| v.len() < 2) {
            return self.fail_peer(peer, reason);
        }
        tracing::warn!(rank = peer, %reason, "closed one link of this peer; its other links go on");
        let mut failed: Vec<ReqId> = Vec::new();
        if let Some(conn) = self.conns.get(c) {
            failed.extend(conn.out.iter().filter_map(|o| o.req));
            match conn.rx {
                Rx::Payload {
                    to: Sink::Req(rid), ..
                } => failed.push(rid),
                Rx::Payload {
                    to: Sink::Unex(key),
                    ..
                }
                | Rx::Stalled { key } => {
                    if self.unexp.contains(key) {
                        let u = self.unexp.remove(key);
                        if let UnexBody::Eager { data, .. } = &u.body {
                            self.acct.unexpected_bytes -= data.len();
                        }
                        failed.extend(u.claimed);
                        let unexp = &self.unexp;
                        self.queues.retain_unexpected(|&k| unexp.contains(k));
                    }
                }
                Rx::Payload {
                    to: Sink::Shell(key),
                    ..
                } => {
                    if self.shell_partial.contains(key) {
                        self.shell_partial.remove(key);
                    }
                }
                Rx::Header | Rx::Gated => {}
            }
        }
        self.stalled.retain(|&s| s != c);
        self.gated.retain(|&s| s != c);
        self.forget_conn(c);
        for rid in failed {
            if !self.is_done(rid) {
                let e = Error::PeerLost {
                    rank: peer,
                    reason: format!("one of its links broke the protocol: {reason}"),
                };
                self.complete(rid, Err(e));
            }
        }
        self.resume_stalled();
    }

    /// After a direct read: completes the payload if it is whole.
    pub(super) fn finish_direct(&mut self, c: ConnId) {
        if let Some(Conn {
            rx: Rx::Payload { to, len, have },
            ..
        }) = self.conns.get(c)
        {
            if have == len {
                let to = *to;
                if let Some(conn) = self.conns.get_mut(c) {
                    conn.rx = Rx::Header;
                }
                self.payload_done(to);
            }
        }
    }

    /// Handles what is staged on connection `c`.
    pub(super) fn consume(&mut self, c: ConnId) -> Result<(), String> {
        loop {
            let Some(conn) = self.conns.get_mut(c) else {
                return Ok(());
            };
            let avail = conn.end - conn.start;
            match conn.rx {
                _ if conn.shell_hold => return Ok(()),
                Rx::Stalled { .. } | Rx::Gated => return Ok(()),
                Rx::Header => {
                    if avail < HEADER {
                        return Ok(());
                    }
                    let mut b = [0u8; HEADER];
                    b.copy_from_slice(&conn.stage[conn.start..conn.start + HEADER]);
                    let peer = conn.peer;
                    let h = Header::decode(&b).map_err(|e| format!("protocol error: {e}"))?;
                    if h.kind.ordered() {
                        if let Some(want) = conn.gate {
                            if self.recv_count(peer) < want {
                                // Messages sent before the move are still on their way.
                                if let Some(conn) = self.conns.get_mut(c) {
                                    conn.rx = Rx::Gated;
                                }
                                self.gated.push(c);
                                return Ok(());
                            }
                            if let Some(conn) = self.conns.get_mut(c) {
                                conn.gate = None;
                            }
                        }
                    }
                    let Some(conn) = self.conns.get_mut(c) else {
                        return Ok(());
                    };
                    conn.start += HEADER;
                    self.on_header(c, peer, h)?;
                    if h.kind.ordered() {
                        self.handled_one(c, peer);
                    } else if h.kind == Kind::Moved {
                        self.retire_if_done(c);
                    }
                }
                Rx::Payload { to, len, have } => {
                    if have == len {
                        conn.rx = Rx::Header;
                        self.payload_done(to);
                        continue;
                    }
                    if avail == 0 {
                        return Ok(());
                    }
                    let n = avail.min(len - have);
                    let dst: &mut [u8] = match to {
                        Sink::Req(rid) => match self.reqs.get_mut(rid).map(|r| &mut r.state) {
                            // Perhaps fewer than n bytes: the loop brings the rest.
                            Some(ReqState::Recv { buf, .. }) => buf.window(have, have + n),
                            _ => return Err("a payload for a request that is gone".into()),
                        },
                        Sink::Unex(key) => match self.unexp.get_mut(key).map(|u| &mut u.body) {
                            Some(UnexBody::Eager { data, .. }) => &mut data[have..have + n],
                            _ => return Err("a payload for a message that is gone".into()),
                        },
                        Sink::Shell(key) => match self.shell_partial.get_mut(key) {
                            Some(f) => &mut f.payload[have..have + n],
                            None => return Err("a payload for a frame that is gone".into()),
                        },
                    };
                    let n = dst.len();
                    dst.copy_from_slice(&conn.stage[conn.start..conn.start + n]);
                    conn.start += n;
                    conn.rx = Rx::Payload {
                        to,
                        len,
                        have: have + n,
                    };
                }
            }
        }
    }

    pub(super) fn payload_done(&mut self, to: Sink) {
        match to {
            Sink::Req(rid) => self.complete_recv(rid),
            Sink::Shell(key) => {
                if self.shell_partial.contains(key) {
                    let f = self.shell_partial.remove(key);
                    self.hold_for_shell(f.conn);
                    self.shell.push(f);
                }
            }
            Sink::Unex(key) => {
                let Some(u) = self.unexp.get_mut(key) else {
                    return;
                };
                if let UnexBody::Eager { complete, .. } = &mut u.body {
                    *complete = true;
                }
                if let Some(rid) = u.claimed {
                    let u = self.unexp.remove(key);
                    if let UnexBody::Eager { data, .. } = u.body {
                        self.acct.unexpected_bytes -= data.len();
                        if let Some(ReqState::Recv { buf, .. }) =
                            self.reqs.get_mut(rid).map(|r| &mut r.state)
                        {
                            buf.fill(data);
                        }
                    }
                    self.complete_recv(rid);
                    self.resume_stalled();
                }
            }
        }
    }

    pub(super) fn on_header(&mut self, c: ConnId, peer: u32, h: Header) -> Result<(), String> {
        let env = Envelope {
            source: peer,
            tag: h.tag,
            context: h.context,
            len: h.len,
        };
        let set_rx = |core: &mut Self, rx: Rx| {
            if let Some(conn) = core.conns.get_mut(c) {
                conn.rx = rx;
            }
        };
        match h.kind {
            Kind::Heartbeat => {}
            Kind::Shell => {
                if h.len > SHELL_MAX {
                    return Err(format!("protocol error: a shell frame of {} bytes", h.len));
                }
                let f = ShellFrame {
                    peer,
                    conn: c,
                    what: h.id,
                    payload: vec![0u8; h.len as usize],
                };
                if h.len == 0 {
                    self.hold_for_shell(c);
                    self.shell.push(f);
                } else {
                    let key = self.shell_partial.insert(f);
                    set_rx(
                        self,
                        Rx::Payload {
                            to: Sink::Shell(key),
                            len: h.len as usize,
                            have: 0,
                        },
                    );
                }
            }
            Kind::Addr => {
                let reads = self.conns.get(c).is_some_and(|x| x.io.reads_peer());
                if !reads {
                    return Err("protocol error: an address on a link that cannot read it".into());
                }
                if self.peer_addr.len() >= 1 << 20 {
                    return Err("protocol error: over a million addresses announced".into());
                }
                let addr = (u64::from(h.tag) << 32) | u64::from(h.context);
                self.peer_addr.insert((peer, h.id), addr);
            }
            Kind::Lend => {
                if !self.peer_addr.contains_key(&(peer, h.id)) {
                    return Err(format!(
                        "protocol error: a lend for message {} without its address",
                        h.id
                    ));
                }
                let body = (u64::from(h.tag) << 32) | u64::from(h.context);
                let (n, head) = (h.len % (1 << 30), (h.len >> 30) as usize);
                self.peer_lend.insert((peer, h.id), (body, n, head));
            }
            Kind::Share => {
                if !self.conns.get(c).is_some_and(|x| x.io.reads_peer()) {
                    return Err(
                        "protocol error: a shared copy on a link that cannot make one".into(),
                    );
                }
                self.help_copy(c, peer, &h);
            }
            Kind::Withdrawn => {
                let Some(rid) = self.expect.remove(&(peer, h.id)) else {
                    return Err(format!(
                        "protocol error: message {} withdrawn, which no receive asked for",
                        h.id
                    ));
                };
                self.complete(rid, Err(Error::Withdrawn { rank: peer }));
            }
            Kind::Fin => {
                let id = h.id as usize;
                let held = match self.reqs.get_mut(id).map(|r| &mut r.state) {
                    Some(ReqState::Send { dest, held }) if *dest == peer && held.is_some() => {
                        held.take()
                    }
                    _ => {
                        return Err(format!(
                            "protocol error: a copy finished for unknown request {id}"
                        ))
                    }
                };
                if let Some(buf) = held {
                    if buf.len() as u64 != h.len {
                        return Err(format!(
                            "protocol error: a copy of {} bytes finished, the message has {}",
                            h.len,
                            buf.len()
                        ));
                    }
                    if let Some(n) = buf.lend() {
                        self.take_back(peer, n);
                    }
                }
                self.complete(id, Ok(Outcome::Sent));
            }
            Kind::Moved => {
                if let Some(conn) = self.conns.get_mut(c) {
                    conn.moved_in = true;
                }
            }
            Kind::Resume => {
                if let Some(conn) = self.conns.get_mut(c) {
                    if conn.gate.is_some() || conn.moved_in {
                        return Err("protocol error: a second resume on one link".into());
                    }
                    conn.gate = Some(h.len);
                }
            }
            Kind::Eager => {
                if h.len as usize > self.limits.eager.max(STAGE) && h.len > (1 << 30) {
                    return Err(format!(
                        "protocol error: an eager message of {} bytes",
                        h.len
                    ));
                }
                while let Some((_, rid)) = self.queues.arrive(&env) {
                    if self.too_small(rid, &env) {
                        continue;
                    }
                    self.matched(rid, &env);
                    if h.len == 0 {
                        self.complete_recv(rid);
                    } else {
                        set_rx(
                            self,
                            Rx::Payload {
                                to: Sink::Req(rid),
                                len: h.len as usize,
                                have: 0,
                            },
                        );
                    }
                    return Ok(());
                }
                let len = h.len as usize;
                if self.acct.unexpected_bytes > 0
                    && self.acct.unexpected_bytes + len > self.limits.unexpected
                {
                    let key = self.unexp.insert(Unex {
                        env,
                        body: UnexBody::Stalled { conn: c },
                        claimed: None,
                    });
                    self.queues.file(env, key);
                    self.acct.stalls += 1;
                    self.stalled.push(c);
                    set_rx(self, Rx::Stalled { key });
                    return Ok(());
                }
                self.hold(len);
                let key = self.unexp.insert(Unex {
                    env,
                    body: UnexBody::Eager {
                        data: vec![0u8; len],
                        complete: len == 0,
                    },
                    claimed: None,
                });
                self.queues.file(env, key);
                if len > 0 {
                    set_rx(
                        self,
                        Rx::Payload {
                            to: Sink::Unex(key),
                            len,
                            have: 0,
                        },
                    );
                }
            }
            Kind::Rts => {
                while let Some((_, rid)) = self.queues.arrive(&env) {
                    if self.too_small(rid, &env) {
                        continue;
                    }
                    self.matched(rid, &env);
                    self.clear_to_send(peer, h.id, rid, h.len);
                    return Ok(());
                }
                let key = self.unexp.insert(Unex {
                    env,
                    body: UnexBody::Rts { id: h.id },
                    claimed: None,
                });
                self.queues.file(env, key);
            }
            Kind::Cts => {
                let id = h.id as usize;
                let held = match self.reqs.get_mut(id).map(|r| &mut r.state) {
                    Some(ReqState::Send { dest, held }) if *dest == peer && held.is_some() => {
                        held.take()
                    }
                    _ => {
                        return Err(format!(
                            "protocol error: clear-to-send for unknown request {id}"
                        ))
                    }
                };
                let Some(buf) = held else { return Ok(()) };
                if buf.len() as u64 != h.len {
                    return Err(format!(
                        "protocol error: clear-to-send for {} bytes, the message has {}",
                        h.len,
                        buf.len()
                    ));
                }
                let Some(&out_c) = self.links.get(&peer).and_then(|v| v.first()) else {
                    return Ok(());
                };
                if let SendBuf::Withdrawn(_) = buf {
                    // Taken back (the call failed) before the receiver could copy it.
                    let mut w = Header::new(Kind::Withdrawn);
                    w.id = h.id;
                    self.queue(out_c, Out::control(w));
                    self.complete(id, Ok(Outcome::Sent));
                    return Ok(());
                }
                // A lent message the receiver could not copy: ours to send now.
                if let Some(n) = buf.lend() {
                    self.take_back(peer, n);
                }
                let buf = buf.contiguous();
                let mut d = Header::new(Kind::Data);
                d.id = h.id;
                d.len = h.len;
                self.queue(
                    out_c,
                    Out {
                        head: d.encode(),
                        body: Some(buf),
                        off: 0,
                        req: Some(id),
                    },
                );
            }
            Kind::Data => {
                let Some(rid) = self.expect.remove(&(peer, h.id)) else {
                    return Err(format!("protocol error: data for unknown request {}", h.id));
                };
                let want = match self.reqs.get(rid).map(|r| &r.state) {
                    Some(ReqState::Recv {
                        matched: Some(st), ..
                    }) => st.len as u64,
                    _ => return Err("protocol error: data for a receive that is gone".into()),
                };
                if want != h.len {
                    return Err(format!(
                        "protocol error: {} bytes of data for a message of {want}",
                        h.len
                    ));
                }
                if h.len == 0 {
                    self.complete_recv(rid);
                } else {
                    set_rx(
                        self,
                        Rx::Payload {
                            to: Sink::Req(rid),
                            len: h.len as usize,
                            have: 0,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    pub(super) fn hold(&mut self, len: usize) {
        self.acct.unexpected_bytes += len;
        self.acct.unexpected_peak = self.acct.unexpected_peak.max(self.acct.unexpected_bytes);
    }

    /// Room was made in the unexpected buffer: lets paused links go on, oldest first.
    pub(super) fn resume_stalled(&mut self) {
        while let Some(&c) = self.stalled.first() {
            let Some(Conn {
                rx: Rx::Stalled { key },
                ..
            }) = self.conns.get(c)
            else {
                self.stalled.remove(0);
                continue;
            };
            let key = *key;
            let len = self.unexp.get(key).map_or(0, |u| u.env.len as usize);
            if self.acct.unexpected_bytes > 0
                && self.acct.unexpected_bytes + len > self.limits.unexpected
            {
                return;
            }
            self.stalled.remove(0);
            self.hold(len);
            if let Some(u) = self.unexp.get_mut(key) {
                u.body = UnexBody::Eager {
                    data: vec![0u8; len],
                    complete: len == 0,
                };
            }
            if let Some(conn) = self.conns.get_mut(c) {
                conn.rx = if len == 0 {
                    Rx::Header
                } else {
                    Rx::Payload {
                        to: Sink::Unex(key),
                        len,
                        have: 0,
                    }
                };
            }
            self.pump(c);
        }
    }
}

/// Copies message `id`, one piece at `src` in the peer's memory, into `dst`,
/// sharing the work with the peer (see `shm`'s "Sharing a large copy"): we take
/// chunks until none is left, wait for those the peer took (each a copy in flight),
/// and copy those it could not. Returns how many chunks the peer wrote. An error
/// when our reads fail (after the peer's chunks are in), when the peer dies with
/// chunks in flight, or when our slot names another message (only a peer writing
/// over the segment does that: then nothing it does can be waited for).
fn shared_copy<L: LinkIo>(io: &mut L, id: u32, src: u64, dst: &mut [u8]) -> io::Result<u32> {
    let len = dst.len();
    let (chunk, chunks) = share_geometry(len);
    let all = u64::MAX >> (64 - chunks);
    let piece = |i: u32| {
        let off = i as usize * chunk;
        (off, (off + chunk).min(len))
    };
    let mut own = 0u64;
    let mut refused = None;
    while let Some(i) = io.claim(true, id, chunks)? {
        own |= 1 << i;
        let (from, to) = piece(i);
        if refused.is_none() {
            refused = io.read_peer(src + from as u64, &mut dst[from..to]).err();
        }
    }
    // Until the peer's chunks are in, it may be writing into `dst`: we wait for
    // them even when our own reads failed.
    let mut turns = 0u32;
    let (wrote, failed) = loop {
        let (done, failed) = io.share_marks();
        if (own | done | failed) & all == all {
            break (done & !own & all, failed & !own & all);
        }
        turns = turns.wrapping_add(1);
        if turns % 1024 == 0 {
            if !io.peer_alive() {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the sender died while copying its part of a message",
                ));
            }
            std::thread::yield_now();
        }
        std::hint::spin_loop();
    };
    if let Some(e) = refused {
        return Err(e);
    }
    for i in (0..chunks).filter(|i| failed & (1 << i) != 0) {
        let (from, to) = piece(i);
        io.read_peer(src + from as u64, &mut dst[from..to])?;
    }
    Ok(wrote.count_ones())
}

/// Copies the peer's memory at `at` (pieces of `(address, length)`, one after the
/// other) into `dst` (pieces of ours, one after the other, as many bytes in all):
/// one cross-memory read per overlap of a piece of each.
fn read_pieces<L: LinkIo>(
    io: &mut L,
    at: &[(u64, usize)],
    dst: &mut [&mut [u8]],
) -> io::Result<()> {
    let (mut i, mut off_src) = (0, 0usize);
    for d in dst.iter_mut() {
        let mut off_dst = 0;
        while off_dst < d.len() {
            let Some(&(addr, n)) = at.get(i) else {
                return Err(io::Error::other("a message longer than its pieces"));
            };
            if off_src == n {
                (i, off_src) = (i + 1, 0);
                continue;
            }
            let k = (n - off_src).min(d.len() - off_dst);
            io.read_peer(addr + off_src as u64, &mut d[off_dst..off_dst + k])?;
            off_src += k;
            off_dst += k;
        }
    }
    Ok(())
}
