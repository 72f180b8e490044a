//! Sends: posting them (eager or announced) and writing what is queued on a link.

use super::*;

impl<C: LinkIo> Core<C> {
    /// Posts a send of `buf` to `dest` (a job rank) with `tag` in `context`. The
    /// caller makes sure a link exists first (or `dest` is us).
    pub fn post_send(&mut self, dest: u32, tag: u32, context: u32, buf: SendBuf) -> ReqId {
        self.post_send_mode(dest, tag, context, buf, false, 0)
    }

    /// A blocking send's short way: an eager message to a peer whose link has
    /// nothing queued is written at once, with no request made. `None` when it
    /// does not apply (ourselves, a message above the eager limit, a link with a
    /// queue, a lost peer, a link that takes nothing now): then post it
    /// ([`Core::post_send`]). What the link does not take at once (a socket or ring
    /// with less room than the message) is copied and queued: the send is done
    /// either way, as an eager send is once the engine holds its bytes.
    pub fn send_now(&mut self, dest: u32, tag: u32, context: u32, data: &[u8]) -> Option<()> {
        self.send_now_parts(dest, tag, context, &[], data, 0)
    }

    /// [`Core::send_now`] of the message `prefix` then `body`, written from where
    /// they lie (a collective's signature and its flit, in the schedule's buffer),
    /// up to `allowance` bytes above the eager limit as [`Core::post_send_allowing`].
    /// What the link does not take at once is copied and queued.
    pub fn send_now_parts(
        &mut self,
        dest: u32,
        tag: u32,
        context: u32,
        prefix: &[u8],
        body: &[u8],
        allowance: usize,
    ) -> Option<()> {
        let len = prefix.len() + body.len();
        if dest == self.me || len > self.limits.eager + allowance {
            return None;
        }
        let c = *self.links.get(&dest)?.first()?;
        let conn = self.conns.get_mut(c)?;
        if !conn.out.is_empty() || conn.io.pending() {
            return None;
        }
        let mut h = Header::new(Kind::Eager);
        h.tag = tag;
        h.context = context;
        h.len = len as u64;
        let head = h.encode();
        let written = if prefix.is_empty() {
            conn.io.write_frame(&head, body)
        } else {
            conn.io.write_vectored(&[
                IoSlice::new(&head),
                IoSlice::new(prefix),
                IoSlice::new(body),
            ])
        };
        let n = match written {
            Ok(n) if n > 0 => n,
            // Full, or failing: the usual way queues it, or fails the peer naming why.
            _ => return None,
        };
        conn.last_tx = self.now;
        self.acct.moved += n as u64;
        super::count_ordered(&mut self.sent_seq, dest);
        let whole = HEADER + len;
        if n < whole {
            // The rest, from the first byte the link did not take (the frame's own
            // header is resent from `off` as usual).
            let data = if n <= HEADER {
                [prefix, body].concat()
            } else {
                let k = n - HEADER;
                if k < prefix.len() {
                    [&prefix[k..], body].concat()
                } else {
                    body[k - prefix.len()..].to_vec()
                }
            };
            let off = if n <= HEADER { n } else { HEADER };
            conn.out.push_back(Out {
                head,
                body: Some(SendBuf::Owned(data)),
                off,
                req: None,
            });
        } else if !conn.io.pending() {
            return Some(());
        }
        self.flush(c);
        Some(())
    }

    /// Posts a send that goes at once up to `allowance` bytes above the eager limit
    /// (a collective's flit, sized by its model to the limit, carries the call's
    /// signature at its head).
    pub fn post_send_allowing(
        &mut self,
        dest: u32,
        tag: u32,
        context: u32,
        buf: SendBuf,
        allowance: usize,
    ) -> ReqId {
        self.post_send_mode(dest, tag, context, buf, false, allowance)
    }

    /// Posts a synchronous send (MPI's `MPI_Ssend`): announced first (`Rts`)
    /// whatever its size, so it completes only after the receiver matched it with
    /// a receive and said so (`Cts`). To ourselves, it completes when a receive of
    /// ours takes it (as under MPI, without one posted it never does).
    pub fn post_ssend(&mut self, dest: u32, tag: u32, context: u32, buf: SendBuf) -> ReqId {
        self.post_send_mode(dest, tag, context, buf, true, 0)
    }

    pub(super) fn post_send_mode(
        &mut self,
        dest: u32,
        tag: u32,
        context: u32,
        buf: SendBuf,
        sync: bool,
        allowance: usize,
    ) -> ReqId {
        let len = buf.len();
        if dest == self.me {
            let id = self.new_req(ReqState::Send { dest, held: None });
            let data = match buf.contiguous() {
                SendBuf::Owned(v) => v,
                other => other.as_slice().to_vec(),
            };
            match self.deliver_local(tag, context, data) {
                Some(key) if sync => {
                    self.sync_local.insert(key, id);
                }
                _ => self.complete(id, Ok(Outcome::Sent)),
            }
            return id;
        }
        if let Some(_reason) = self.lost.get(&dest) {
            let e = self.lost_error(dest);
            let id = self.new_req(ReqState::Send { dest, held: None });
            self.complete(id, Err(e));
            return id;
        }
        let Some(&c) = self.links.get(&dest).and_then(|v| v.first()) else {
            let id = self.new_req(ReqState::Send { dest, held: None });
            self.complete(
                id,
                Err(Error::PeerLost {
                    rank: dest,
                    reason: "no link to it".into(),
                }),
            );
            return id;
        };
        let id = self.new_req(ReqState::Send { dest, held: None });
        let mut h = Header::new(Kind::Eager);
        h.tag = tag;
        h.context = context;
        h.id = id as u32;
        h.len = len as u64;
        let out = if len <= self.limits.eager + allowance && !sync {
            Out {
                head: h.encode(),
                body: Some(buf.contiguous()),
                off: 0,
                req: Some(id),
            }
        } else {
            h.kind = Kind::Rts;
            let reads = len > 0 && self.conns.get(c).is_some_and(|x| x.io.reads_peer());
            // A two-part message is lent on where the receiver can copy it from here
            // (and the link can lend now); else copied into one buffer.
            let buf = match buf {
                SendBuf::Lent { head, body, .. } if reads && head.len() < LEND_HEAD => {
                    match self.conns.get_mut(c).and_then(|x| x.io.lend()) {
                        Some(n) => SendBuf::Lent {
                            head,
                            body,
                            lend: Some(n),
                        },
                        None => SendBuf::Lent {
                            head,
                            body,
                            lend: None,
                        }
                        .contiguous(),
                    }
                }
                other => other.contiguous(),
            };
            // A one-part buffer the receiver copies from here is checked the same
            // way, under a lend that ends with the send or the link.
            let buf = match buf {
                b @ SendBuf::Lent { .. } => b,
                b if reads => match self.conns.get_mut(c).and_then(|x| x.io.lend()) {
                    Some(n) => SendBuf::Checked(Box::new(b), n),
                    None => b,
                },
                b => b,
            };
            let (addr, lent) = match &buf {
                SendBuf::Lent {
                    head,
                    body,
                    lend: Some(n),
                } => (
                    head.as_ptr() as u64,
                    Some((body.as_slice().as_ptr() as u64, *n, head.len())),
                ),
                SendBuf::Checked(b, n) => {
                    let at = b.as_slice().as_ptr() as u64;
                    (at, Some((at, *n, 0)))
                }
                other => (other.as_slice().as_ptr() as u64, None),
            };
            if let Some(Req {
                state: ReqState::Send { held, .. },
                ..
            }) = self.reqs.get_mut(id)
            {
                *held = Some(buf);
            }
            if reads {
                // The receiver may copy it from here (see `clear_to_send`).
                let mut a = Header::new(Kind::Addr);
                a.tag = (addr >> 32) as u32;
                a.context = addr as u32;
                a.id = id as u32;
                a.len = len as u64;
                self.queue(c, Out::control(a));
                if let Some((body, n, head_len)) = lent {
                    let mut l = Header::new(Kind::Lend);
                    l.tag = (body >> 32) as u32;
                    l.context = body as u32;
                    l.id = id as u32;
                    l.len = n | ((head_len as u64) << 30);
                    self.queue(c, Out::control(l));
                }
            }
            Out {
                head: h.encode(),
                body: None,
                off: 0,
                req: None,
            }
        };
        super::count_ordered(&mut self.sent_seq, dest);
        self.queue(c, out);
        id
    }

    /// A send to ourselves: matched here and now.
    /// Returns the unexpected message's key when no receive took it.
    pub(super) fn deliver_local(&mut self, tag: u32, context: u32, data: Vec<u8>) -> Option<usize> {
        let env = Envelope {
            source: self.me,
            tag,
            context,
            len: data.len() as u64,
        };
        while let Some((_, rid)) = self.queues.arrive(&env) {
            if self.too_small(rid, &env) {
                continue;
            }
            self.matched(rid, &env);
            if let Some(ReqState::Recv { buf, .. }) = self.reqs.get_mut(rid).map(|r| &mut r.state) {
                buf.fill(data);
            }
            self.complete_recv(rid);
            return None;
        }
        let key = self.unexp.insert(Unex {
            env,
            body: UnexBody::Eager {
                data,
                complete: true,
            },
            claimed: None,
        });
        self.queues.file(env, key);
        Some(key)
    }

    pub(super) fn queue(&mut self, c: ConnId, mut out: Out) {
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        if conn.out.is_empty() && !conn.io.pending() {
            // Nothing ahead of it: written from here, as `flush` would write it, but
            // without the queue's round (a window of small `MPI_Isend`s, say).
            let r = {
                let body = out.body.as_ref().map_or(&[][..], SendBuf::as_slice);
                conn.io
                    .write_vectored(&[IoSlice::new(&out.head), IoSlice::new(body)])
            };
            if let Some(n) = r.ok().filter(|&n| n > 0) {
                conn.last_tx = self.now;
                self.acct.moved += n as u64;
                if n == out.len() {
                    if conn.io.pending() {
                        self.flush(c);
                    } else {
                        self.retire_if_done(c);
                    }
                    if let Some(r) = out.req {
                        self.complete(r, Ok(Outcome::Sent));
                    }
                    return;
                }
                out.off = n;
            }
            // Else the usual way: a full link waits for room, and a failing one
            // fails the peer naming why (`flush` meets the error again).
        }
        conn.out.push_back(out);
        if conn.out.len() == 1 {
            self.flush(c);
        }
    }

    /// The connection can be written: sends what is queued.
    pub fn on_writable(&mut self, c: ConnId) {
        self.flush(c);
    }

    pub(super) fn flush(&mut self, c: ConnId) {
        // Kept in the core between flushes: a message costs no allocation.
        let mut done = std::mem::take(&mut self.done);
        let result = loop {
            let Some(conn) = self.conns.get_mut(c) else {
                return;
            };
            if conn.out.is_empty() {
                if !conn.io.pending() {
                    break Ok(());
                }
                match conn.io.flush() {
                    Ok(()) => continue,
                    Err(e) if would_block(&e) => break Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => break Err(self.link_failure(c, &e)),
                }
            }
            // On the stack: a flush per message must not cost an allocation, and
            // one message (the usual case) fills two slices, not `IOVECS`.
            let r = if conn.out.len() == 1 {
                let mut slices = [IoSlice::new(&[]); 2];
                let k = gather(&conn.out, &mut slices);
                conn.io.write_vectored(&slices[..k])
            } else {
                let mut slices = [IoSlice::new(&[]); IOVECS];
                let k = gather(&conn.out, &mut slices);
                conn.io.write_vectored(&slices[..k])
            };
            match r {
                Ok(0) => break Err("the link accepts no more bytes".to_string()),
                Ok(mut n) => {
                    conn.last_tx = self.now;
                    self.acct.moved += n as u64;
                    while n > 0 {
                        let Some(front) = conn.out.front_mut() else {
                            break;
                        };
                        let left = front.len() - front.off;
                        if n >= left {
                            n -= left;
                            if let Some(o) = conn.out.pop_front() {
                                if let Some(r) = o.req {
                                    done.push(r);
                                }
                            }
                        } else {
                            front.off += n;
                            n = 0;
                        }
                    }
                }
                Err(e) if would_block(&e) => break Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(self.link_failure(c, &e)),
            }
        };
        for &r in &done {
            self.complete(r, Ok(Outcome::Sent));
        }
        done.clear();
        self.done = done;
        if result.is_ok() {
            self.retire_if_done(c);
        }
        if let Err(reason) = result {
            if let Some(p) = self.conn_peer(c) {
                self.fail_peer(p, &reason);
            }
        }
    }
}

/// Fills `slices` with what `out` still has to write, whole messages only; how many
/// slices it used.
fn gather<'a>(out: &'a std::collections::VecDeque<Out>, slices: &mut [IoSlice<'a>]) -> usize {
    let mut k = 0;
    for o in out {
        if k + 2 > slices.len() {
            break;
        }
        if o.off < HEADER {
            slices[k] = IoSlice::new(&o.head[o.off..]);
            k += 1;
            if let Some(b) = &o.body {
                slices[k] = IoSlice::new(b.as_slice());
                k += 1;
            }
        } else if let Some(b) = &o.body {
            slices[k] = IoSlice::new(&b.as_slice()[o.off - HEADER..]);
            k += 1;
        }
    }
    k
}
