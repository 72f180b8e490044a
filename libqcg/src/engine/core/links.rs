//! The links of a [`Core`]: adding them (and moving to a better one), polling
//! those the poller does not watch, shell frames, closing, losing a peer, liveness.

use super::*;

impl<C: LinkIo> Core<C> {
    /// Whether we have a link to `peer`.
    pub fn has_link(&self, peer: u32) -> bool {
        self.links.get(&peer).is_some_and(|c| !c.is_empty())
    }

    /// Whether we have a link to `peer` that does not go through a relay proxy.
    pub fn has_direct_link(&self, peer: u32) -> bool {
        self.links.get(&peer).is_some_and(|v| {
            v.iter()
                .any(|&c| self.conns.get(c).is_some_and(|c| c.via != Via::Relay))
        })
    }

    /// Why `peer` is gone, if it is.
    pub fn lost(&self, peer: u32) -> Option<&str> {
        self.lost.get(&peer).map(String::as_str)
    }

    /// Adds a connection to `peer` whose handshake is done (`relayed`: through a
    /// relay proxy). Returns its handle; the caller then reports readiness for it
    /// ([`Core::on_readable`]). See [`Core::add_conn_via`].
    pub fn add_conn(&mut self, peer: u32, io: C, now: Instant, relayed: bool) -> ConnId {
        let via = if relayed { Via::Relay } else { Via::Net };
        self.add_conn_via(peer, io, now, via)
    }

    /// Adds a connection to `peer` carried by `via`.
    ///
    /// We send on a peer's first connection. A better one that comes up (a direct
    /// link beside a relayed one, shared memory beside TCP) takes over: `Moved` closes
    /// our stream on the worse links, `Resume` opens it on the new one with the count
    /// of messages sent before, and the peer holds what comes on the new link until
    /// it has handled that many. The peer does the same on its side, and once both
    /// `Moved` have crossed, the worse link is closed. A worse link that comes up
    /// after a better one is never used by us.
    pub fn add_conn_via(&mut self, peer: u32, io: C, now: Instant, via: Via) -> ConnId {
        let polled = io.polled();
        let id = self.conns.insert(Conn {
            io,
            peer,
            rx: Rx::Header,
            stage: vec![0u8; STAGE].into_boxed_slice(),
            start: 0,
            end: 0,
            out: VecDeque::new(),
            last_tx: now,
            via,
            gate: None,
            moved_in: false,
            moved_out: false,
            hup: false,
            shell_hold: false,
            heard: now,
            handled: 0,
        });
        if polled {
            self.polled.push(id);
        }
        let first = self.links.get(&peer).and_then(|v| v.first().copied());
        let first_via = first.and_then(|f| self.conns.get(f)).map(|f| f.via);
        self.heard.insert(peer, now);
        let links = self.links.entry(peer).or_default();
        match first_via {
            Some(best) if via > best => {
                links.insert(0, id);
                // Every worse link to the peer is done with (two that crossed
                // included): each hears so, and closes once the peer says it too.
                let worse: Vec<ConnId> = links
                    .iter()
                    .copied()
                    .filter(|&c| {
                        self.conns
                            .get(c)
                            .is_some_and(|c| c.via < via && !c.moved_out)
                    })
                    .collect();
                for old in worse {
                    self.move_off(old);
                }
                let mut h = Header::new(Kind::Resume);
                h.len = self.sent_seq.get(peer as usize).copied().unwrap_or(0);
                self.queue(id, Out::control(h));
                if via == Via::Memory {
                    self.acct.memory_links += 1;
                } else {
                    self.acct.upgrades += 1;
                }
            }
            Some(best) if via < best => {
                links.push(id);
                self.move_off(id);
            }
            _ => links.push(id),
        }
        id
    }

    /// The connections the poller does not watch, each with (readable, writable):
    /// the shell asks them every turn and reports what they say.
    pub fn poll_links(&mut self) -> bool {
        let mut any = false;
        for i in 0..self.polled.len() {
            let Some(&c) = self.polled.get(i) else { break };
            let Some(conn) = self.conns.get(c) else {
                continue;
            };
            let (r, w) = conn.io.ready();
            if r {
                any = true;
                // One small message per turn, handed on at once: looking for the
                // next record would cost a miss first (the writer zeroed its word
                // last), on the path of this one's answer (see `ShmLink::read`).
                if self.take_small(c) == Some(false) {
                    self.pump(c);
                }
            }
            if w && self.conns.get(c).is_some_and(|x| !x.out.is_empty()) {
                any = true;
                self.flush(c);
            }
        }
        any
    }

    /// Whether every connection is polled (in shared memory): the poller's
    /// descriptors then carry nothing urgent.
    pub fn all_polled(&self) -> bool {
        self.polled.len() == self.conns.len()
    }

    /// Raises (or lowers) the sleep flag of every polled connection.
    ///
    /// Raised, it is fenced: a writer publishes its record with a sequentially
    /// consistent swap, then loads our flag; we store the flag, fence, then look at
    /// its ring (`polled_ready`). One of the two sees the other's store.
    pub fn polled_sleep(&self, on: bool) {
        for &c in &self.polled {
            if let Some(conn) = self.conns.get(c) {
                conn.io.set_sleeping(on);
            }
        }
        if on {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Whether a polled link has something to do now (checked before sleeping).
    pub fn polled_ready(&self) -> bool {
        self.polled.iter().any(|&c| {
            self.conns.get(c).is_some_and(|conn| {
                let (r, w) = conn.io.ready();
                r || (w && !conn.out.is_empty())
            })
        })
    }

    /// Sends a shell frame (`what`, `payload`) on connection `c`.
    pub fn send_shell(&mut self, c: ConnId, what: u32, payload: Vec<u8>) {
        let mut h = Header::new(Kind::Shell);
        h.id = what;
        h.len = payload.len() as u64;
        self.queue(
            c,
            Out {
                head: h.encode(),
                body: Some(SendBuf::Owned(payload)),
                off: 0,
                req: None,
            },
        );
    }

    /// Whether shell frames were read since the last [`Core::take_shell`].
    pub fn has_shell(&self) -> bool {
        !self.shell.is_empty()
    }

    /// Shell frames read since the last call.
    /// The connections they came on read nothing more until [`Core::shell_done`].
    pub fn take_shell(&mut self) -> Vec<ShellFrame> {
        std::mem::take(&mut self.shell)
    }

    /// The shell handled the frames read on `c`: it is read on.
    pub fn shell_done(&mut self, c: ConnId) {
        if let Some(conn) = self.conns.get_mut(c) {
            if conn.shell_hold {
                conn.shell_hold = false;
                self.pump(c);
            }
        }
    }

    /// Holds connection `c` for the shell (a shell frame was read on it).
    pub(super) fn hold_for_shell(&mut self, c: ConnId) {
        if let Some(conn) = self.conns.get_mut(c) {
            conn.shell_hold = true;
        }
    }

    /// What carries connection `c`.
    pub fn conn_via(&self, c: ConnId) -> Option<Via> {
        self.conns.get(c).map(|c| c.via)
    }

    /// What carries the link we send to `peer` on.
    pub fn link_via(&self, peer: u32) -> Option<Via> {
        let c = *self.links.get(&peer)?.first()?;
        self.conn_via(c)
    }

    /// We send nothing more on `c`, and tell the peer so.
    pub(super) fn move_off(&mut self, c: ConnId) {
        if let Some(o) = self.conns.get_mut(c) {
            o.moved_out = true;
        }
        self.queue(c, Out::control(Header::new(Kind::Moved)));
        self.retire_if_done(c);
    }

    /// Closes a link both sides moved away from, once our `Moved` is out.
    pub(super) fn retire_if_done(&mut self, c: ConnId) {
        let Some(conn) = self.conns.get(c) else {
            return;
        };
        if conn.moved_in
            && conn.moved_out
            && conn.out.is_empty()
            && !conn.io.pending()
            && matches!(conn.rx, Rx::Header)
            && conn.start == conn.end
        {
            self.forget_conn(c);
        }
    }

    /// One more ordered frame from `peer` handled on connection `c`: lets go a
    /// link waiting for it.
    pub(super) fn handled_one(&mut self, c: ConnId, peer: u32) {
        // Counted on the connection (no map on a message's way); summed per peer
        // only when a link waits at its gate.
        if let Some(conn) = self.conns.get_mut(c) {
            conn.handled += 1;
        }
        if self.gated.is_empty() {
            return;
        }
        let n = self.recv_count(peer);
        let ready: Vec<ConnId> = self
            .gated
            .iter()
            .copied()
            .filter(|&g| {
                self.conns
                    .get(g)
                    .is_some_and(|x| x.peer == peer && x.gate.is_none_or(|want| want <= n))
            })
            .collect();
        for g in ready {
            self.gated.retain(|&x| x != g);
            if let Some(conn) = self.conns.get_mut(g) {
                conn.rx = Rx::Header;
            }
            self.pump(g);
        }
    }

    /// Ordered frames (`Eager`, `Rts`) from `peer` handled so far, on every link
    /// it had.
    pub(super) fn recv_count(&self, peer: u32) -> u64 {
        let live: u64 = self.links.get(&peer).map_or(0, |v| {
            v.iter()
                .filter_map(|&c| self.conns.get(c))
                .map(|c| c.handled)
                .sum()
        });
        self.recv_seq.get(&peer).copied().unwrap_or(0) + live
    }

    /// The peer of a connection.
    pub fn conn_peer(&self, c: ConnId) -> Option<u32> {
        self.conns.get(c).map(|c| c.peer)
    }

    /// The connection's stream (for the shell's registration).
    pub fn conn_io(&mut self, c: ConnId) -> Option<&mut C> {
        self.conns.get_mut(c).map(|c| &mut c.io)
    }

    /// The connection we send to `peer` on (its first), if there is one.
    pub fn link_io(&self, peer: u32) -> Option<&C> {
        let c = *self.links.get(&peer)?.first()?;
        self.conns.get(c).map(|c| &c.io)
    }

    /// The process is leaving (its own sends are out and its side of every link is
    /// shut): from now on what arrives is read and dropped, and a link is closed
    /// quietly when its peer closes its side. Reading on keeps the kernel from
    /// resetting links whose peers are still sending to us, which would destroy data
    /// of ours they have not read yet.
    pub fn drain(&mut self) {
        self.draining = true;
        for c in self.conn_ids() {
            self.pump(c);
        }
    }

    pub(super) fn pump_draining(&mut self, c: ConnId) {
        loop {
            let Some(conn) = self.conns.get_mut(c) else {
                return;
            };
            conn.start = 0;
            conn.end = 0;
            match conn.io.read(&mut conn.stage) {
                Ok(n) if n > 0 => continue,
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                _ => {
                    self.forget_conn(c);
                    return;
                }
            }
        }
    }

    /// The peer closed its side of `c`. When it has other links to us (both ends
    /// dialled at once) and `c` holds no half-read message and nothing of ours to
    /// send, only `c` goes: the peer's other links may still carry its last messages,
    /// and it is gone when the last of them ends. The same when a handshake with it
    /// is under way: the peer may have taken that connection for a link already and
    /// sent on it (its acceptor's part ends before our initiator's), so it is lost
    /// only if the handshake ends without a link ([`Core::set_handshaking`]).
    /// Otherwise the peer is lost.
    pub(super) fn closed_by_peer(&mut self, c: ConnId, peer: u32) {
        let Some(conn) = self.conns.get(c) else {
            return;
        };
        let idle = matches!(conn.rx, Rx::Header) && conn.start == conn.end && conn.out.is_empty();
        let others = self
            .links
            .get(&peer)
            .is_some_and(|v| v.iter().any(|&x| x != c));
        if !(idle && others) {
            let why = match self.relay_of(c) {
                Some(proxy) => format!(
                    "its link through the relay proxy {proxy} ended (the proxy closed it or \
                     died, or the rank left)"
                ),
                None => "it closed its link".to_string(),
            };
            if idle && self.handshaking.contains(&peer) {
                self.forget_conn(c);
                self.closing.insert(peer, why);
                return;
            }
            return self.fail_peer(peer, &why);
        }
        self.forget_conn(c);
    }

    /// The peers a handshake is under way with, as the dialer says after each of
    /// its steps. A peer whose last link closed meanwhile is lost now if its
    /// handshake ended without a link.
    pub fn set_handshaking(&mut self, peers: std::collections::HashSet<u32>) {
        self.handshaking = peers;
        if self.closing.is_empty() {
            return;
        }
        let done: Vec<u32> = self
            .closing
            .keys()
            .copied()
            .filter(|p| !self.handshaking.contains(p))
            .collect();
        for peer in done {
            let Some(why) = self.closing.remove(&peer) else {
                continue;
            };
            if self.links.get(&peer).is_none_or(|v| v.is_empty()) {
                self.fail_peer(peer, &why);
            }
        }
    }

    /// The relay proxy connection `c` goes through, if it is relayed.
    pub(super) fn relay_of(&self, c: ConnId) -> Option<String> {
        let conn = self.conns.get(c).filter(|x| x.via == Via::Relay)?;
        Some(
            conn.io
                .remote()
                .unwrap_or_else(|| "(address unknown)".into()),
        )
    }

    /// Says an error of connection `c` as what failed: the link, or the relay proxy
    /// it goes through.
    pub(super) fn link_failure(&self, c: ConnId, e: &io::Error) -> String {
        match self.relay_of(c) {
            Some(proxy) => format!("its link through the relay proxy {proxy} failed: {e}"),
            None => format!("link error: {e}"),
        }
    }

    /// Drops connection `c` alone (its peer keeps its other links, if any).
    pub(super) fn forget_conn(&mut self, c: ConnId) {
        if self.conns.contains(c) {
            let conn = self.conns.remove(c);
            if let Some(v) = self.links.get_mut(&conn.peer) {
                v.retain(|&x| x != c);
            }
            *self.recv_seq.entry(conn.peer).or_default() += conn.handled;
        }
        self.polled.retain(|&s| s != c);
        self.stalled.retain(|&s| s != c);
        self.gated.retain(|&s| s != c);
    }

    /// Closes every connection to `peer` and fails every request that needs it.
    pub fn fail_peer(&mut self, peer: u32, reason: &str) {
        if self.lost.contains_key(&peer) {
            return;
        }
        tracing::debug!(rank = peer, %reason, "link lost");
        self.lost.insert(peer, reason.to_string());
        let conns = self.links.remove(&peer).unwrap_or_default();
        let mut failed: Vec<ReqId> = Vec::new();
        for c in &conns {
            let conn = self.conns.remove(*c);
            failed.extend(conn.out.iter().filter_map(|o| o.req));
            if let Rx::Payload {
                to: Sink::Req(rid), ..
            } = conn.rx
            {
                failed.push(rid);
            }
            self.stalled.retain(|s| s != c);
            self.gated.retain(|s| s != c);
            self.polled.retain(|s| s != c);
        }
        self.peer_addr.retain(|(p, _), _| *p != peer);
        self.peer_lend.retain(|(p, _), _| *p != peer);
        // Messages from it that will never be whole.
        let partial: Vec<usize> = self
            .unexp
            .iter()
            .filter(|(_, u)| {
                u.env.source == peer && !matches!(u.body, UnexBody::Eager { complete: true, .. })
            })
            .map(|(k, _)| k)
            .collect();
        for k in partial {
            let u = self.unexp.remove(k);
            if let UnexBody::Eager { data, .. } = &u.body {
                self.acct.unexpected_bytes -= data.len();
            }
            if let Some(rid) = u.claimed {
                failed.push(rid);
            }
        }
        let unexp = &self.unexp;
        self.queues.retain_unexpected(|&k| unexp.contains(k));
        failed.extend(
            self.expect
                .iter()
                .filter(|((p, _), _)| *p == peer)
                .map(|(_, r)| *r),
        );
        self.expect.retain(|(p, _), _| *p != peer);
        failed.extend(self.reqs.iter().filter_map(|(id, r)| match &r.state {
            ReqState::Send { dest, .. } if *dest == peer => Some(id),
            _ => None,
        }));
        let everyone_gone = self.size > 1 && self.lost.len() as u32 >= self.size - 1;
        failed
            .extend(self.queues.remove_posted(|p| {
                p.source == Some(peer) || (p.source.is_none() && everyone_gone)
            }));
        failed.sort_unstable();
        failed.dedup();
        for rid in failed {
            if !self.is_done(rid) {
                let e = if everyone_gone && self.lost.len() > 1 {
                    Error::PeerLost {
                        rank: peer,
                        reason: format!("{reason} (and every other rank is gone)"),
                    }
                } else {
                    self.lost_error(peer)
                };
                self.complete(rid, Err(e));
            }
        }
        self.resume_stalled();
    }

    /// Housekeeping at `now`: heartbeats on quiet links, and peers that went silent
    /// for longer than the liveness limit are lost.
    pub fn tick(&mut self, now: Instant) {
        let beat = self.limits.liveness / 3;
        let quiet: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                !c.moved_out && c.out.is_empty() && now.saturating_duration_since(c.last_tx) >= beat
            })
            .map(|(id, _)| id)
            .collect();
        for c in quiet {
            self.queue(
                c,
                Out {
                    head: Header::new(Kind::Heartbeat).encode(),
                    body: None,
                    off: 0,
                    req: None,
                },
            );
        }
        let paused: Vec<u32> = self
            .stalled
            .iter()
            .filter_map(|&c| self.conn_peer(c))
            .collect();
        for (_, conn) in &self.conns {
            let t = self.heard.entry(conn.peer).or_insert(conn.heard);
            *t = (*t).max(conn.heard);
        }
        let silent: Vec<(u32, Duration)> = self
            .heard
            .iter()
            .filter(|(p, _)| self.has_link(**p) && !paused.contains(p))
            .map(|(p, t)| (*p, now.saturating_duration_since(*t)))
            .filter(|(_, d)| *d >= self.limits.liveness)
            .collect();
        for (p, d) in silent {
            let relay = self
                .links
                .get(&p)
                .and_then(|v| v.first())
                .and_then(|&c| self.relay_of(c));
            let what = match relay {
                Some(proxy) => format!(
                    "the rank or the relay proxy {proxy} that carries its link is frozen or \
                     unreachable"
                ),
                None => "it is frozen or unreachable".to_string(),
            };
            self.fail_peer(
                p,
                &format!(
                    "it sent nothing for {:.1} s (not even a heartbeat; the limit is {} s): {what}",
                    d.as_secs_f64(),
                    self.limits.liveness.as_secs()
                ),
            );
        }
    }

    /// Closes every connection (at exit: peers see the links end).
    pub fn close_all(&mut self) {
        self.polled.clear();
        self.conns.clear();
        self.links.clear();
        self.stalled.clear();
    }

    /// Whether everything queued for sending has been handed to the kernel.
    pub fn flushed(&self) -> bool {
        self.conns
            .iter()
            .all(|(_, c)| c.out.is_empty() && !c.io.pending())
    }

    /// Every connection, for the shell.
    pub fn conn_ids(&self) -> Vec<ConnId> {
        self.conns.iter().map(|(id, _)| id).collect()
    }
}
