//! The dialer's shell: the sockets, helper requests and handshakes that carry out
//! what the [`super::dialer::Dialer`] decides, driven by the engine's readiness loop.
//! Nothing here blocks and nothing here starts a thread: a connect is a non-blocking
//! socket in epoll, a request to the helper is a non-blocking line of its own (one per
//! request, so a slow rendezvous never holds up a lookup), a handshake is
//! [`crate::handshake::Initiator`] or [`Acceptor`] fed as bytes arrive, and every
//! wait is a timer the loop sleeps toward.
//!
//! It also takes our part of links other ranks make (the grid's notices): connecting
//! back, punching toward the peer, meeting it at a relay. Those links reach the
//! dialer as links that arrived ([`Event::LinkArrived`]).
//!
//! Every handshake it starts asks the engine's wish to seal the link ([`Sealing`]:
//! the plan's `encrypt`, recorded here when a lookup answers, else the process's
//! policy), and a handshake's keys go with its connection to the engine
//! ([`Out::Attach`]), which seals the link ([`crate::seal`]).
//!
//! Sockets from our listener's port (punched, traversed) follow
//! [`super::punched`]'s rules: a punch sends a new SYN after each [`try_time`] and
//! dials again after a refusal or while our other socket holds the 4-tuple; a
//! traversal sends one SYN and a refusal ends it.

use super::dialer::{Action, Dialer, Event, Role, Sock};
use super::punched::{try_time, Dial, FIRST_TRY, PUNCH_LAG};
use super::{io_error, CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT};
use crate::handshake::{Acceptor, Initiator, Step, Wish};
use crate::seal::Keys;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};
use qcg_wire::{ErrorKind, Notice, ProcName, Request, Response, Technique};
use slab::Slab;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Tokens of the shell's sockets start here (above the engine's handshakes).
pub(crate) const DIAL_BASE: usize = 1 << 42;
/// Tokens of requests to the helper start here.
pub(crate) const ASK_BASE: usize = 1 << 43;
/// Pause before dialling again after a refusal or while the 4-tuple is taken.
const RETRY_PAUSE: Duration = Duration::from_millis(20);
/// Time a request to the helper may take (it may wait on the frontal and broker).
const ASK_TIME: Duration = Duration::from_secs(60);

/// What the shell needs to know of the process.
pub(crate) struct Config {
    pub(crate) job: String,
    pub(crate) secret: [u8; 32],
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) helper: PathBuf,
    /// Our listener's address (punches dial from its port).
    pub(crate) local: SocketAddr,
    /// Where link reports go (the reporter thread's queue).
    pub(crate) reports: Option<std::sync::mpsc::Sender<Request>>,
}

/// What the broker's plans said about sealing links, by peer (the engine's, shared
/// with its listener's handshakes).
pub(crate) type PlanSeals = Arc<Mutex<HashMap<u32, Option<bool>>>>;

/// Which links we want sealed ([`crate::seal`]): the wish handshakes ask, and where
/// the wish of a plan goes when a lookup answers.
pub(crate) struct Sealing {
    pub(crate) wish: Wish,
    pub(crate) plans: PlanSeals,
}

/// What the engine does after a step of the shell (with the shell unlocked).
pub(crate) enum Out {
    /// A handshaken connection to `peer` is a link now, sealed with `keys` if the
    /// handshake made them (once attached, tell the shell: [`Shell::arrived`]).
    Attach {
        peer: u32,
        stream: TcpStream,
        relayed: bool,
        keys: Option<Keys>,
    },
    /// A dial ended with a link (`technique`: how we made it; `None`: the peer did).
    Made {
        peer: u32,
        technique: Option<Technique>,
    },
    /// A dial failed: why each attempt did.
    Failed { peer: u32, attempts: Vec<String> },
}

/// Who a connection is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// An attempt of the dialer's.
    Dial(Sock),
    /// Our part of the peer's link (a notice): relayed or not, and until when.
    Notice { relayed: bool, until: Instant },
}

/// How a connection is dialled.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// A plain connect (a listener, a proxy).
    Plain(SocketAddr),
    /// From our listener's port.
    OurPort { to: SocketAddr, dial: Dial, n: u32 },
}

enum Phase {
    /// Not dialled yet (a punch's pause, a rendezvous under way).
    Idle(Option<Instant>),
    /// Connecting until then (a try of a dial from our port, or the whole connect).
    Connecting(Instant),
    /// At a relay proxy: the token is sent, the pairing's `K` awaited.
    Meeting,
    /// Connected (and paired): the dialer decides when its handshake starts.
    Opened,
    Initiating(Box<Initiator>),
    Accepting(Box<Acceptor>),
}

struct Conn {
    peer: u32,
    owner: Owner,
    target: Target,
    /// The relay token, when this meets the peer at a proxy.
    token: Option<String>,
    stream: Option<TcpStream>,
    phase: Phase,
    out: Vec<u8>,
    got: Vec<u8>,
    need: usize,
    last_error: String,
    /// The keys of a handshake done, until the connection is a link.
    keys: Option<Keys>,
    /// The round trip a handshake done as the initiator measured.
    rtt: Option<Duration>,
}

/// What an answer from the helper is for.
#[derive(Clone, Copy, Debug)]
enum Purpose {
    Lookup(u32),
    /// The rendezvous (or SYN watch) of the attempt on connection `key`.
    Rendezvous(usize, Technique),
}

struct Ask {
    stream: UnixStream,
    out: Vec<u8>,
    got: Vec<u8>,
    purpose: Purpose,
    until: Instant,
}

/// The dials of one process and the I/O that carries them out.
pub(crate) struct Shell {
    cfg: Option<Config>,
    sealing: Option<Sealing>,
    pub(crate) dialer: Dialer,
    conns: Slab<Conn>,
    /// The connection of each socket the dialer named.
    by_sock: HashMap<Sock, usize>,
    asks: Slab<Ask>,
    out: Vec<Out>,
}

impl Shell {
    /// The peers a handshake is under way with: a link to them may still come up.
    pub(crate) fn handshaking(&self) -> std::collections::HashSet<u32> {
        self.conns
            .iter()
            .filter(|(_, c)| matches!(c.phase, Phase::Initiating(_) | Phase::Accepting(_)))
            .map(|(_, c)| c.peer)
            .collect()
    }
}

impl Default for Shell {
    fn default() -> Self {
        Shell {
            cfg: None,
            sealing: None,
            dialer: Dialer::new(),
            conns: Slab::new(),
            by_sock: HashMap::new(),
            asks: Slab::new(),
            out: Vec::new(),
        }
    }
}

/// For tests only: `QCG_TEST_LINK_DELAY=<technique>:<ms>` holds every attempt of
/// that technique for that long before its handshake, so that a slower technique
/// completes after a faster one (e.g. a direct link after the relay). Off when unset.
fn test_delay() -> Option<(Technique, Duration)> {
    let v = std::env::var("QCG_TEST_LINK_DELAY").ok()?;
    let (name, ms) = v.split_once(':')?;
    let t = Technique::ALL.into_iter().find(|t| t.to_string() == name)?;
    Some((t, Duration::from_millis(ms.parse().ok()?)))
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Shell {
    /// Gives the shell what it needs to dial (until then, it dials nothing).
    pub(crate) fn configure(&mut self, cfg: Config, sealing: Sealing) {
        if let Some(h) = test_delay() {
            self.dialer.hold(h.0, h.1);
        }
        self.cfg = Some(cfg);
        self.sealing = Some(sealing);
    }

    /// Whether we want the link with `peer` sealed (see [`Sealing`]).
    fn wants_seal(&self, peer: u32) -> bool {
        self.sealing.as_ref().is_some_and(|s| (s.wish)(peer))
    }

    pub(crate) fn configured(&self) -> bool {
        self.cfg.is_some()
    }

    /// Sends the grid the outcome of one attempt at a link to `peer` (through the
    /// reporter's queue; nothing when the process has no helper): made (`ok`), its
    /// handshake's round trip, whether it moved the link off the relay. The
    /// engine reports its shared-memory moves here too.
    pub(crate) fn report(
        &self,
        peer: u32,
        technique: Technique,
        ok: bool,
        rtt: Option<Duration>,
        upgrade: bool,
    ) {
        let Some(cfg) = &self.cfg else { return };
        if let Some(tx) = &cfg.reports {
            let _ = tx.send(Request::Report {
                from: ProcName::new(&cfg.job, cfg.rank),
                target: ProcName::new(&cfg.job, peer),
                technique,
                ok,
                rtt_us: rtt.map(micros),
                upgrade,
            });
        }
    }

    /// Ends everything under way and dials no more (the process is leaving).
    pub(crate) fn stop(&mut self, reg: &Registry) {
        for mut c in self.conns.drain() {
            if let Some(mut s) = c.stream.take() {
                let _ = reg.deregister(&mut s);
            }
        }
        for mut a in self.asks.drain() {
            let _ = reg.deregister(&mut a.stream);
        }
        self.by_sock.clear();
        self.dialer = Dialer::new();
        self.cfg = None;
        self.sealing = None;
    }

    /// Starts a dial to `peer`.
    pub(crate) fn dial(&mut self, peer: u32, now: Instant) {
        self.dialer.dial(peer, now);
    }

    /// When the shell has something to do without readiness.
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        let mut t = self.dialer.next_timer();
        let mut at = |x: Instant| t = Some(t.map_or(x, |t: Instant| t.min(x)));
        for (_, c) in &self.conns {
            match c.phase {
                Phase::Idle(Some(w)) => at(w),
                Phase::Connecting(u) if matches!(c.target, Target::OurPort { .. }) => at(u),
                _ => {}
            }
            if let Owner::Notice { until, .. } = c.owner {
                at(until)
            }
        }
        for (_, a) in &self.asks {
            at(a.until)
        }
        t
    }

    /// Takes our part of a link the peer makes. `direct`: a direct link to the
    /// peer exists already (a punch toward it has nothing to do).
    pub(crate) fn notice(&mut self, n: Notice, direct: bool, reg: &Registry, now: Instant) {
        let Some(cfg) = &self.cfg else { return };
        let (from, relayed, target, token, start) = match n {
            Notice::ConnectBack { from, addr } => (from, false, Target::Plain(addr), None, None),
            Notice::Punch { from, addr } => {
                if direct {
                    return;
                }
                let target = Target::OurPort {
                    to: addr,
                    dial: Dial::Punch,
                    n: 0,
                };
                // Let the initiator's SYN leave first: behind real firewalls either
                // order works, but where nothing blocks (one host), our SYN reaching
                // its listener first would take the 4-tuple its own dial needs.
                (from, false, target, None, Some(now + PUNCH_LAG))
            }
            Notice::Relay { from, proxy, token } => {
                (from, true, Target::Plain(proxy), Some(token), None)
            }
            Notice::Inject { .. } => return,
        };
        if from.job != cfg.job || from.rank >= cfg.size || from.rank == cfg.rank {
            tracing::warn!(%from, "ignored a notice about a process of another job");
            return;
        }
        let wait = if relayed {
            CONNECT_TIMEOUT * 2 + HANDSHAKE_TIMEOUT
        } else {
            CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT
        };
        let key = self.conns.insert(Conn {
            peer: from.rank,
            owner: Owner::Notice {
                relayed,
                until: now + wait,
            },
            target,
            token,
            stream: None,
            phase: Phase::Idle(start),
            out: Vec::new(),
            got: Vec::new(),
            need: 0,
            last_error: String::new(),
            keys: None,
            rtt: None,
        });
        if start.is_none() {
            self.connect(key, reg, now);
        }
    }

    /// A link to `peer` was attached that the dialer did not hand over: it ends
    /// punches toward the peer that have not connected, and tells the dialer.
    pub(crate) fn arrived(&mut self, peer: u32, relayed: bool, reg: &Registry, now: Instant) {
        if !relayed {
            let idle: Vec<usize> = self
                .conns
                .iter()
                .filter(|(_, c)| {
                    c.peer == peer
                        && matches!(c.owner, Owner::Notice { relayed: false, .. })
                        && matches!(c.target, Target::OurPort { .. })
                        && matches!(c.phase, Phase::Idle(_) | Phase::Connecting(_))
                })
                .map(|(k, _)| k)
                .collect();
            for k in idle {
                self.drop_conn(k, reg);
            }
        }
        self.dialer
            .handle(Event::LinkArrived { peer, relayed }, now);
        self.run(reg, now);
    }

    /// Handles readiness of the shell's tokens and what time made due; returns what
    /// the engine must do.
    pub(crate) fn step(&mut self, ready: &[Token], reg: &Registry, now: Instant) -> Vec<Out> {
        for &t in ready {
            if t.0 >= ASK_BASE {
                self.pump_ask(t.0 - ASK_BASE, reg, now);
            } else if t.0 >= DIAL_BASE {
                self.pump(t.0 - DIAL_BASE, reg, now);
            }
        }
        // Timers.
        let late_asks: Vec<usize> = self
            .asks
            .iter()
            .filter(|(_, a)| now >= a.until)
            .map(|(k, _)| k)
            .collect();
        for k in late_asks {
            self.ask_failed(k, "the helper did not answer in time".into(), reg, now);
        }
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for k in keys {
            let Some(c) = self.conns.get_mut(k) else {
                continue;
            };
            if let Owner::Notice { until, .. } = c.owner {
                if now >= until {
                    let what = format!("timed out ({})", c.last_error);
                    self.notice_failed(k, &what, reg);
                    continue;
                }
            }
            match c.phase {
                Phase::Idle(Some(w)) if now >= w => self.connect(k, reg, now),
                Phase::Connecting(u) if now >= u => {
                    if let Target::OurPort { dial, n, to } = c.target {
                        // Unanswered: a new SYN on a new socket (a traversal's one
                        // try lasts until the dialer's time-out).
                        if dial == Dial::Punch {
                            c.last_error = io_error(
                                &std::io::ErrorKind::TimedOut.into(),
                                "connect",
                                try_time(FIRST_TRY, n),
                            );
                            c.target = Target::OurPort { to, dial, n: n + 1 };
                            self.close_stream(k, reg);
                            self.connect(k, reg, now);
                        }
                    }
                }
                _ => {}
            }
        }
        self.run(reg, now);
        std::mem::take(&mut self.out)
    }

    /// Runs the dialer's actions until it has none.
    fn run(&mut self, reg: &Registry, now: Instant) {
        loop {
            let actions = self.dialer.poll(now);
            if actions.is_empty() {
                return;
            }
            for a in actions {
                self.act(a, reg, now);
            }
        }
    }

    fn act(&mut self, a: Action, reg: &Registry, now: Instant) {
        let Some(cfg) = &self.cfg else { return };
        let me = ProcName::new(&cfg.job, cfg.rank);
        match a {
            Action::Lookup { peer } => {
                // Logged as the dial starts: no link to the peer existed.
                tracing::debug!(dest = peer, step = "lookup", "dialing");
                let req = Request::Lookup {
                    from: me,
                    target: ProcName::new(&cfg.job, peer),
                };
                if let Err(e) = self.ask(&req, Purpose::Lookup(peer), reg, now) {
                    let ev = Event::LookupFailed {
                        peer,
                        error: e,
                        retry: false,
                    };
                    self.dialer.handle(ev, now);
                }
            }
            Action::Open {
                sock,
                peer,
                attempt,
            } => {
                let t = attempt.technique;
                let target = match t {
                    Technique::Punched => Target::OurPort {
                        to: attempt.addr,
                        dial: Dial::Punch,
                        n: 0,
                    },
                    Technique::Traversed => Target::OurPort {
                        to: attempt.addr,
                        dial: Dial::Traverse,
                        n: 0,
                    },
                    _ => Target::Plain(attempt.addr),
                };
                let key = self.conns.insert(Conn {
                    peer,
                    owner: Owner::Dial(sock),
                    target,
                    token: None,
                    stream: None,
                    phase: Phase::Idle(None),
                    out: Vec::new(),
                    got: Vec::new(),
                    need: 0,
                    last_error: String::new(),
                    keys: None,
                    rtt: None,
                });
                self.by_sock.insert(sock, key);
                let target = ProcName::new(&cfg.job, peer);
                let req = match t {
                    Technique::Direct | Technique::PortRange => None,
                    Technique::Traversed => Some(Request::WatchSyn {
                        from: me,
                        target,
                        local: cfg.local,
                        remote: attempt.addr,
                    }),
                    technique => Some(Request::Rendezvous {
                        from: me,
                        target,
                        technique,
                    }),
                };
                match req {
                    None => self.connect(key, reg, now),
                    Some(req) => {
                        if let Err(e) = self.ask(&req, Purpose::Rendezvous(key, t), reg, now) {
                            self.open_failed(key, e, reg, now);
                        }
                    }
                }
            }
            Action::Handshake { sock, peer, role } => {
                let Some(&key) = self.by_sock.get(&sock) else {
                    return;
                };
                let seal = self.wants_seal(peer);
                let (i, hello) = Initiator::new(
                    &cfg.job,
                    &cfg.secret,
                    cfg.rank,
                    peer,
                    role == Role::Either,
                    seal,
                );
                let c = &mut self.conns[key];
                (c.keys, c.rtt) = (None, None);
                c.need = i.first_need();
                c.got.clear();
                c.out = hello;
                c.phase = Phase::Initiating(Box::new(i));
                self.pump(key, reg, now);
            }
            Action::Link {
                sock,
                peer,
                relayed,
            } => {
                if let Some(key) = self.by_sock.remove(&sock) {
                    let mut c = self.conns.remove(key);
                    if let Some(mut s) = c.stream.take() {
                        let _ = reg.deregister(&mut s);
                        self.out.push(Out::Attach {
                            peer,
                            stream: s,
                            relayed,
                            keys: c.keys.take(),
                        });
                    }
                }
            }
            Action::Close { sock } => {
                if let Some(key) = self.by_sock.remove(&sock) {
                    self.drop_conn(key, reg);
                }
            }
            Action::Report {
                peer,
                technique,
                ok,
                rtt,
                upgrade,
            } => {
                match (ok, upgrade) {
                    (true, false) => tracing::debug!(dest = peer, %technique, "link made"),
                    (true, true) => {
                        tracing::debug!(dest = peer, %technique, "link moved off the relay")
                    }
                    (false, _) => tracing::debug!(dest = peer, %technique, "attempt failed"),
                }
                self.report(peer, technique, ok, rtt, upgrade);
            }
            Action::Made {
                peer, technique, ..
            } => self.out.push(Out::Made { peer, technique }),
            Action::Failed { peer, attempts } => {
                self.out.push(Out::Failed { peer, attempts });
            }
        }
    }

    /// Sends `req` to the helper on a line of its own.
    fn ask(
        &mut self,
        req: &Request,
        purpose: Purpose,
        reg: &Registry,
        now: Instant,
    ) -> Result<(), String> {
        let cfg = self.cfg.as_ref().ok_or("not configured")?;
        let helper = cfg.helper.display().to_string();
        let out = qcg_wire::frame::encode(req).map_err(|e| e.to_string())?;
        let mut stream = UnixStream::connect(&cfg.helper)
            .map_err(|e| format!("cannot reach the helper at {helper}: {e}"))?;
        let entry = self.asks.vacant_entry();
        let key = entry.key();
        reg.register(
            &mut stream,
            Token(ASK_BASE + key),
            Interest::READABLE | Interest::WRITABLE,
        )
        .map_err(|e| format!("cannot watch the helper's line: {e}"))?;
        entry.insert(Ask {
            stream,
            out,
            got: Vec::new(),
            purpose,
            until: now + ASK_TIME,
        });
        self.pump_ask(key, reg, now);
        Ok(())
    }

    fn pump_ask(&mut self, key: usize, reg: &Registry, now: Instant) {
        let Some(a) = self.asks.get_mut(key) else {
            return;
        };
        let r: Result<Option<Response>, String> = (|| {
            while !a.out.is_empty() {
                match a.stream.write(&a.out) {
                    Ok(n) => {
                        a.out.drain(..n);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::NotConnected
                        ) =>
                    {
                        return Ok(None)
                    }
                    Err(e) => return Err(format!("the helper's line: {e}")),
                }
            }
            let mut buf = [0u8; 4096];
            loop {
                match qcg_wire::frame::decode::<Response>(&a.got) {
                    Ok(Some((r, _))) => return Ok(Some(r)),
                    Ok(None) => {}
                    Err(e) => return Err(format!("the helper's answer: {e}")),
                }
                match a.stream.read(&mut buf) {
                    Ok(0) => return Err("the helper closed the connection".into()),
                    Ok(n) => a.got.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("the helper's line: {e}")),
                }
            }
        })();
        match r {
            Ok(None) => {}
            Ok(Some(resp)) => {
                let mut a = self.asks.remove(key);
                let _ = reg.deregister(&mut a.stream);
                self.answered(a.purpose, resp, reg, now);
            }
            Err(e) => self.ask_failed(key, e, reg, now),
        }
    }

    fn ask_failed(&mut self, key: usize, error: String, reg: &Registry, now: Instant) {
        let mut a = self.asks.remove(key);
        let _ = reg.deregister(&mut a.stream);
        match a.purpose {
            Purpose::Lookup(peer) => self.dialer.handle(
                Event::LookupFailed {
                    peer,
                    error,
                    retry: false,
                },
                now,
            ),
            Purpose::Rendezvous(k, _) => self.open_failed(k, error, reg, now),
        }
    }

    fn answered(&mut self, purpose: Purpose, resp: Response, reg: &Registry, now: Instant) {
        let refusal =
            |what: &str, reply: &qcg_wire::ErrorReply| format!("the grid refused {what}: {reply}");
        match (purpose, resp) {
            (Purpose::Lookup(peer), Response::Plan(p)) => {
                tracing::debug!(dest = peer, plan = ?p.attempts.iter().map(|a| a.technique).collect::<Vec<_>>(), encrypt = ?p.encrypt, "plan");
                // What the plan says of sealing is our wish for this peer's link
                // (the handshakes of the dial ask it).
                if let Some(s) = &self.sealing {
                    let mut plans = s.plans.lock().unwrap_or_else(|e| e.into_inner());
                    plans.insert(peer, p.encrypt);
                }
                self.dialer.handle(
                    Event::Plan {
                        peer,
                        attempts: p.attempts,
                    },
                    now,
                )
            }
            (Purpose::Lookup(peer), Response::Error(reply)) => {
                let retry = reply.kind == ErrorKind::UnknownProcess;
                let error = refusal("lookup", &reply);
                self.dialer
                    .handle(Event::LookupFailed { peer, error, retry }, now)
            }
            (Purpose::Lookup(peer), other) => self.dialer.handle(
                Event::LookupFailed {
                    peer,
                    error: format!("unexpected answer to lookup: {other:?}"),
                    retry: false,
                },
                now,
            ),
            (Purpose::Rendezvous(k, t), resp) => {
                if !self.conns.contains(k) {
                    return;
                }
                match (t, resp) {
                    (_, Response::Error(reply)) => {
                        let what = if t == Technique::Traversed {
                            "watch_syn"
                        } else {
                            "rendezvous"
                        };
                        let error = refusal(what, &reply);
                        match self.conns[k].owner {
                            // Registered with the broker, not yet known to its
                            // cluster: the dial tries again shortly.
                            Owner::Dial(sock) if reply.kind == ErrorKind::UnknownProcess => {
                                self.by_sock.remove(&sock);
                                self.drop_conn(k, reg);
                                self.dialer.handle(Event::PeerUnknown { sock, error }, now);
                            }
                            _ => self.open_failed(k, error, reg, now),
                        }
                    }
                    // The target dials our listener; the acceptor makes the link.
                    (Technique::Reversed, _) => {}
                    (Technique::Relayed, Response::Relay { proxy, token }) => {
                        let c = &mut self.conns[k];
                        c.target = Target::Plain(proxy);
                        c.token = Some(token);
                        self.connect(k, reg, now);
                    }
                    (Technique::Relayed, other) => self.open_failed(
                        k,
                        format!("unexpected answer to a relay rendezvous: {other:?}"),
                        reg,
                        now,
                    ),
                    _ => self.connect(k, reg, now),
                }
            }
        }
    }

    /// Dials connection `key` (a new socket, for a punch's next try).
    fn connect(&mut self, key: usize, reg: &Registry, now: Instant) {
        let local = self.cfg.as_ref().map(|c| c.local);
        let c = &mut self.conns[key];
        let made = match c.target {
            Target::Plain(addr) => TcpStream::connect(addr).map(|s| (s, now + CONNECT_TIMEOUT)),
            Target::OurPort { to, dial, n } => {
                let first = match dial {
                    Dial::Punch => FIRST_TRY,
                    Dial::Traverse => CONNECT_TIMEOUT,
                };
                from_port(local, to).map(|s| (s, now + try_time(first, n)))
            }
        };
        match made {
            Ok((mut s, until)) => {
                if let Err(e) = reg.register(
                    &mut s,
                    Token(DIAL_BASE + key),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    return self.open_failed(
                        key,
                        format!("cannot watch the socket: {e}"),
                        reg,
                        now,
                    );
                }
                c.stream = Some(s);
                c.phase = Phase::Connecting(until);
            }
            Err(e) => self.connect_failed(key, e, reg, now),
        }
    }

    /// A connect failed: a punch dials again after a pause, anything else fails.
    fn connect_failed(&mut self, key: usize, e: std::io::Error, reg: &Registry, now: Instant) {
        self.close_stream(key, reg);
        let c = &mut self.conns[key];
        let limit = match c.target {
            Target::OurPort { n, dial, .. } => try_time(
                if dial == Dial::Punch {
                    FIRST_TRY
                } else {
                    CONNECT_TIMEOUT
                },
                n,
            ),
            Target::Plain(_) => CONNECT_TIMEOUT,
        };
        let text = io_error(&e, "connect", limit);
        let again = match c.target {
            // Our other socket holds the 4-tuple: it is the one that will make the
            // link (or gives it up); wait for it.
            Target::OurPort { .. } if e.kind() == std::io::ErrorKind::AddrNotAvailable => true,
            Target::OurPort {
                dial: Dial::Punch, ..
            } => true,
            _ => false,
        };
        if again {
            c.last_error = text;
            c.phase = Phase::Idle(Some(now + RETRY_PAUSE));
            return;
        }
        let text = match (c.target, c.token.is_some()) {
            (Target::Plain(addr), true) => format!("proxy {addr}: {e}"),
            (Target::OurPort { .. }, _) => format!("simultaneous open failed: {text}"),
            _ => text,
        };
        self.open_failed(key, text, reg, now);
    }

    /// Moves connection `key` on as far as its readiness allows.
    fn pump(&mut self, key: usize, reg: &Registry, now: Instant) {
        let Some(c) = self.conns.get_mut(key) else {
            return;
        };
        if let Phase::Connecting(_) = c.phase {
            let Some(s) = c.stream.as_ref() else { return };
            match s.take_error() {
                Ok(Some(e)) | Err(e) => return self.connect_failed(key, e, reg, now),
                Ok(None) => {}
            }
            match s.peer_addr() {
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotConnected
                        || e.raw_os_error() == Some(libc_einprogress()) =>
                {
                    return
                }
                Err(e) => return self.connect_failed(key, e, reg, now),
            }
            // Connected.
            if let Some(token) = &c.token {
                let mut out = b"QCGR".to_vec();
                out.extend_from_slice(token.as_bytes());
                c.out = out;
                c.need = 1;
                c.phase = Phase::Meeting;
            } else {
                match c.owner {
                    Owner::Dial(sock) => {
                        c.phase = Phase::Opened;
                        self.dialer.handle(Event::Opened { sock }, now);
                        return;
                    }
                    Owner::Notice { .. } => {
                        let cfg = self.cfg.as_ref().expect("configured before notices");
                        let either = matches!(c.target, Target::OurPort { .. });
                        let seal = self.sealing.as_ref().is_some_and(|s| (s.wish)(c.peer));
                        let (i, hello) =
                            Initiator::new(&cfg.job, &cfg.secret, cfg.rank, c.peer, either, seal);
                        c.need = i.first_need();
                        c.out = hello;
                        c.phase = Phase::Initiating(Box::new(i));
                    }
                }
            }
        }
        let r = self.io(key);
        match r {
            Ok(false) => {}
            Ok(true) => self.step_done(key, reg, now),
            Err(e) => {
                let c = &self.conns[key];
                let what = match c.phase {
                    Phase::Meeting => {
                        let proxy = match c.target {
                            Target::Plain(a) => a.to_string(),
                            _ => String::new(),
                        };
                        format!("proxy {proxy}: no pairing: {e}")
                    }
                    _ => format!("handshake: {e}"),
                };
                match (c.owner, &c.phase) {
                    (Owner::Dial(sock), Phase::Meeting) => {
                        self.by_sock.remove(&sock);
                        self.drop_conn(key, reg);
                        self.dialer
                            .handle(Event::OpenFailed { sock, error: what }, now);
                    }
                    (Owner::Dial(sock), _) => {
                        self.by_sock.remove(&sock);
                        self.drop_conn(key, reg);
                        self.dialer
                            .handle(Event::HandshakeFailed { sock, error: what }, now);
                    }
                    (Owner::Notice { .. }, _) => self.notice_failed(key, &what, reg),
                }
            }
        }
    }

    /// Writes what is queued and reads what the step needs; `Ok(true)` once the
    /// step is complete (the pairing's byte arrived, or the handshake is done).
    fn io(&mut self, key: usize) -> Result<bool, String> {
        let c = &mut self.conns[key];
        loop {
            let Some(s) = c.stream.as_mut() else {
                return Ok(false);
            };
            while !c.out.is_empty() {
                match s.write(&c.out) {
                    Ok(n) => {
                        c.out.drain(..n);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(e.to_string()),
                }
            }
            match &c.phase {
                Phase::Meeting | Phase::Initiating(_) | Phase::Accepting(_) => {}
                _ => return Ok(false),
            }
            if c.need == 0 {
                return Ok(true);
            }
            let mut buf = vec![0u8; c.need - c.got.len().min(c.need)];
            match s.read(&mut buf) {
                Ok(0) => return Err("closed by the other end".into()),
                Ok(n) => c.got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.to_string()),
            }
            if c.got.len() < c.need {
                continue;
            }
            let got = std::mem::take(&mut c.got);
            let step = match &mut c.phase {
                Phase::Meeting => {
                    if got[0] != b'K' {
                        return Err("refused the token".into());
                    }
                    return Ok(true);
                }
                Phase::Initiating(i) => i.feed(&got),
                Phase::Accepting(a) => a.feed(&got),
                _ => return Ok(false),
            }
            .map_err(|e| e.to_string())?;
            match step {
                Step::Need(n) => c.need = n,
                Step::Reply(r, n) => {
                    c.out = r;
                    c.need = n;
                }
                Step::Done(r, linked) => {
                    c.out = r;
                    c.need = 0;
                    c.keys = linked.keys;
                    c.rtt = linked.rtt;
                }
            }
        }
    }

    /// A step of connection `key` completed.
    fn step_done(&mut self, key: usize, reg: &Registry, now: Instant) {
        let c = &mut self.conns[key];
        match (&c.phase, c.owner) {
            (Phase::Meeting, Owner::Dial(sock)) => {
                c.phase = Phase::Opened;
                self.dialer.handle(Event::Opened { sock }, now);
            }
            (Phase::Meeting, Owner::Notice { .. }) => {
                // Met at the relay: the peer initiates, we accept.
                let cfg = self.cfg.as_ref().expect("configured before notices");
                let wish = match &self.sealing {
                    Some(s) => s.wish.clone(),
                    None => Arc::new(|_| false),
                };
                let a = Acceptor::new(&cfg.job, &cfg.secret, cfg.rank, cfg.size, wish);
                c.need = a.first_need();
                c.phase = Phase::Accepting(Box::new(a));
                self.pump(key, reg, now);
            }
            (Phase::Initiating(_), Owner::Dial(sock)) => {
                let rtt = c.rtt;
                c.phase = Phase::Opened;
                self.dialer.handle(Event::Handshaken { sock, rtt }, now);
            }
            (_, Owner::Notice { relayed, .. }) => {
                let peer = c.peer;
                let mut c = self.conns.remove(key);
                if let Some(mut s) = c.stream.take() {
                    let _ = reg.deregister(&mut s);
                    self.out.push(Out::Attach {
                        peer,
                        stream: s,
                        relayed,
                        keys: c.keys.take(),
                    });
                }
            }
            _ => {}
        }
    }

    fn open_failed(&mut self, key: usize, error: String, reg: &Registry, now: Instant) {
        let owner = self.conns[key].owner;
        match owner {
            Owner::Dial(sock) => {
                self.by_sock.remove(&sock);
                self.drop_conn(key, reg);
                self.dialer.handle(Event::OpenFailed { sock, error }, now);
            }
            Owner::Notice { .. } => self.notice_failed(key, &error, reg),
        }
    }

    fn notice_failed(&mut self, key: usize, why: &str, reg: &Registry) {
        let peer = self.conns[key].peer;
        tracing::warn!(peer, error = %why, "could not take our part of a link");
        if let Owner::Dial(sock) = self.conns[key].owner {
            self.by_sock.remove(&sock);
        }
        self.drop_conn(key, reg);
    }

    fn close_stream(&mut self, key: usize, reg: &Registry) {
        if let Some(mut s) = self.conns[key].stream.take() {
            let _ = reg.deregister(&mut s);
        }
    }

    fn drop_conn(&mut self, key: usize, reg: &Registry) {
        if self.conns.contains(key) {
            self.close_stream(key, reg);
            self.conns.remove(key);
        }
    }
}

fn libc_einprogress() -> i32 {
    115
}

/// A non-blocking socket dialling `to` from our listener's address and port.
fn from_port(local: Option<SocketAddr>, to: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Socket, Type};
    let local = local.ok_or_else(|| std::io::Error::other("no listener address"))?;
    let s = Socket::new(Domain::for_address(local), Type::STREAM, None)?;
    s.set_nonblocking(true)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&local.into())?;
    match s.connect(&to.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc_einprogress()) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(s.into()))
}
