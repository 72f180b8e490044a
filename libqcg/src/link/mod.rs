//! The link makers: how a connection to a peer comes to exist, one module per
//! technique of the broker's plan (`broker/src/plan.rs` names them): [`direct`] (and
//! port-range), reversed (the target dials back: a rendezvous, then the listener in
//! the engine accepts it), [`punched`], traversed (our SYN forwarded and injected at the
//! target; the dial is [`punched::from_our_port`]) and [`relayed`]. Each hands the engine a
//! connected socket on which the job handshake ([`crate::handshake`]) completed.

pub(crate) mod direct;
pub(crate) mod punched;
pub(crate) mod race;
pub(crate) mod relayed;

use crate::comm::{Comm, Inner};
use crate::control::Control;
use crate::error::{Error, Result};
use crate::handshake;
use punched::{from_our_port, Dial, FromOurPort, PUNCH_LAG};
use qcg_wire::{ErrorKind, ProcName, Request, Response};
use relayed::meet;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Time allowed for one TCP connect of a plan's attempt.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed for the job handshake on a new connection.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a lookup waits for a peer that has not registered yet.
const LOOKUP_PATIENCE: Duration = Duration::from_secs(60);

/// Where a plan's race stands ([`attempt`] reads it).
const OPEN: u8 = 0;
/// A relayed link exists: the direct attempts still running go on, and the first
/// of them to complete its handshake replaces it (relay first, then upgrade).
const RELAYED: u8 = 1;
/// A direct link exists, or every attempt failed: what comes later is dropped.
const DECIDED: u8 = 2;

/// For tests only: `QCG_TEST_LINK_DELAY=<technique>:<ms>` holds every attempt of
/// that technique for that long before its handshake, so that a slower technique
/// completes after a faster one (e.g. a direct link after the relay). Off when unset.
fn test_delay(t: qcg_wire::Technique) -> Option<Duration> {
    let v = std::env::var("QCG_TEST_LINK_DELAY").ok()?;
    let (name, ms) = v.split_once(':')?;
    (name == t.to_string()).then_some(())?;
    ms.parse().ok().map(Duration::from_millis)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Says what an I/O error of a step means, naming a time-out as one.
pub(crate) fn io_error(e: &std::io::Error, what: &str, limit: Duration) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("{what} timed out after {:.0} s", limit.as_secs_f64())
        }
        _ => format!("{what}: {e}"),
    }
}

impl Comm {
    /// Makes the link to `dest`: its plan's attempts race ([`race`]), the first to
    /// complete the job handshake is the link. When that is the relay, the direct
    /// attempts still running go on in their threads, and the first of them to
    /// complete moves the link off the proxy (the engine switches without reordering,
    /// see `Core::add_conn`). Otherwise attempts still running drop what they make
    /// before its handshake; one that was handshaken already (or a reversal the peer
    /// completes anyway) is one more connection to the peer, which the engine reads
    /// like the others.
    pub(crate) fn link(&self, dest: u32) -> Result<()> {
        let gate = lock(&self.inner.dialing).entry(dest).or_default().clone();
        let _dialing = lock(&gate);
        if self.inner.engine.core().has_link(dest) {
            return Ok(());
        }
        let plan = self.lookup(dest)?;
        self.inner.engine.note_plan_seal(dest, plan.encrypt);
        tracing::debug!(dest, plan = ?plan.attempts.iter().map(|a| a.technique).collect::<Vec<_>>(), "dialing");
        let me = ProcName::new(&self.inner.env.job, self.inner.env.rank);
        let outcome =
            |technique, r: &std::result::Result<Option<Duration>, String>| Request::Report {
                from: me.clone(),
                target: plan.target.clone(),
                technique,
                ok: r.is_ok(),
                rtt_us: r.as_ref().ok().copied().flatten().map(micros),
                upgrade: false,
            };
        let mut failures = vec![String::new(); plan.attempts.len()];
        let mut race = race::Race::new(plan.attempts.iter().map(|a| a.technique).collect());
        // The common case (inside a cluster, an open one) costs no thread: a plan
        // that starts with a dial tries it here for one stagger first. If it does not
        // answer by then, the race below starts it again beside the others; if it is
        // refused, the race goes on without it.
        if let Some(a) = plan.attempts.first().filter(|a| {
            matches!(
                a.technique,
                qcg_wire::Technique::Direct | qcg_wire::Technique::PortRange
            ) && test_delay(a.technique).is_none()
        }) {
            match TcpStream::connect_timeout(&a.addr, race::STAGGER) {
                Ok(stream) => {
                    let r = handshake_as(stream, &self.inner, dest, Role::Initiator).and_then(
                        |(s, rtt)| {
                            self.inner
                                .engine
                                .add_link(dest, s, false)
                                .map(|()| rtt)
                                .map_err(|e| format!("cannot add the link to the engine: {e}"))
                        },
                    );
                    self.report(outcome(a.technique, &r));
                    match r {
                        Ok(_) => {
                            tracing::debug!(dest, technique = %a.technique, addr = %a.addr, "link made");
                            lock(&self.inner.techniques).insert(dest, a.technique);
                            return Ok(());
                        }
                        Err(e) => {
                            failures[0] = format!("{} to {}: {e}", a.technique, a.addr);
                            race.failed(0);
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => race.first_had_its_stagger(),
                Err(e) => {
                    self.report(outcome(a.technique, &Err(String::new())));
                    failures[0] = format!(
                        "{} to {}: {}",
                        a.technique,
                        a.addr,
                        io_error(&e, "connect", race::STAGGER)
                    );
                    race.failed(0);
                }
            }
        }
        let won = Arc::new(AtomicU8::new(OPEN));
        let (tx, rx) = std::sync::mpsc::channel();
        loop {
            while let Some(i) = race.start(Instant::now()) {
                let (inner, a, to_us, won) = (
                    self.inner.clone(),
                    plan.attempts[i].clone(),
                    tx.clone(),
                    won.clone(),
                );
                let (from, target) = (me.clone(), plan.target.clone());
                let spawned =
                    std::thread::Builder::new()
                        .name("qcg-link".into())
                        .spawn(move || {
                            let r = attempt(&inner, &a, dest, &won);
                            // Decided without us: still say how a real try ended (the
                            // broker learns what the clusters let through from it).
                            if let Err(std::sync::mpsc::SendError((_, Err(e)))) = to_us.send((i, r))
                            {
                                if e != OVERTAKEN && e != UPGRADED {
                                    let (technique, ok) = (a.technique, false);
                                    let req = Request::Report {
                                        from,
                                        target,
                                        technique,
                                        ok,
                                        rtt_us: None,
                                        upgrade: false,
                                    };
                                    report(&inner, req);
                                }
                            }
                        });
                if let Err(e) = spawned {
                    let _ = tx.send((i, Err(format!("cannot start a thread for it: {e}"))));
                }
            }
            if race.lost() {
                break;
            }
            let got = match race.next_check() {
                Some(t) => rx.recv_timeout(t.saturating_duration_since(Instant::now())),
                None => rx
                    .recv()
                    .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected),
            };
            let (i, r) = match got {
                Ok(x) => x,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            };
            let a = &plan.attempts[i];
            if r.as_ref().is_err_and(|e| e == OVERTAKEN || e == UPGRADED) {
                // Another attempt claimed the race; its answer is on its way.
                race.failed(i);
                continue;
            }
            self.report(outcome(a.technique, &r));
            match r {
                Ok(_) => {
                    tracing::debug!(dest, technique = %a.technique, addr = %a.addr, "link made");
                    lock(&self.inner.techniques).insert(dest, a.technique);
                    return Ok(());
                }
                Err(e) => {
                    tracing::debug!(dest, technique = %a.technique, error = %e, "attempt failed");
                    failures[i] = format!("{} to {}: {e}", a.technique, a.addr);
                    race.failed(i);
                }
            }
        }
        won.store(DECIDED, Ordering::SeqCst);
        failures.retain(|f| !f.is_empty());
        if failures.is_empty() {
            failures.push("the plan was empty".into());
        }
        Err(Error::NoLink {
            rank: dest,
            attempts: failures,
        })
    }

    /// Reports an attempt's outcome off the critical path of the first message.
    fn report(&self, req: Request) {
        report(&self.inner, req);
    }

    fn lookup(&self, dest: u32) -> Result<qcg_wire::Plan> {
        let req = Request::Lookup {
            from: ProcName::new(&self.inner.env.job, self.inner.env.rank),
            target: ProcName::new(&self.inner.env.job, dest),
        };
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            match self.inner.control.request(&req) {
                Ok(Response::Plan(p)) => return Ok(p),
                Ok(other) => {
                    return Err(Error::Helper {
                        socket: self.inner.env.helper.clone(),
                        message: format!("unexpected answer to lookup: {other:?}"),
                    })
                }
                // The peer may simply not have started yet.
                Err(Error::Refused { reply, .. })
                    if reply.kind == ErrorKind::UnknownProcess
                        && start.elapsed() < LOOKUP_PATIENCE =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Hands a report to the reporter thread (if the communicator still has one).
fn report(inner: &Inner, req: Request) {
    if let Some(r) = lock(&inner.reports).as_ref() {
        let _ = r.tx.send(req);
    }
}

/// What an attempt that lost the race says (never reported: the link exists).
const OVERTAKEN: &str = "another attempt made the link first";
/// What an attempt that replaced the relayed link says (it reported itself).
const UPGRADED: &str = "moved the link off the relay";

/// Claims the race for attempt `technique` once its link is handshaken: `Ok` if it
/// made the link, `Err(OVERTAKEN)` if another did first, `Err(UPGRADED)` if it
/// replaces a relayed link (reported here: the race is over for the caller).
fn claim(
    inner: &Inner,
    won: &AtomicU8,
    dest: u32,
    technique: qcg_wire::Technique,
    rtt: Option<Duration>,
) -> std::result::Result<Option<Duration>, String> {
    if technique == qcg_wire::Technique::Relayed {
        return match won.compare_exchange(OPEN, RELAYED, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => Ok(rtt),
            Err(_) => Err(OVERTAKEN.into()),
        };
    }
    match won.swap(DECIDED, Ordering::SeqCst) {
        OPEN => Ok(rtt),
        RELAYED => {
            tracing::debug!(dest, %technique, "link moved off the relay");
            lock(&inner.techniques).insert(dest, technique);
            let req = Request::Report {
                from: ProcName::new(&inner.env.job, inner.env.rank),
                target: ProcName::new(&inner.env.job, dest),
                technique,
                ok: true,
                rtt_us: rtt.map(micros),
                upgrade: true,
            };
            report(inner, req);
            Err(UPGRADED.into())
        }
        _ => Err(OVERTAKEN.into()),
    }
}

/// One attempt of a plan: a link to `dest`, or why not. `won` says where the race
/// stands: once it is decided, what this attempt makes is dropped before its
/// handshake; while only a relay holds the link, a direct attempt goes on.
fn attempt(
    inner: &Arc<Inner>,
    attempt: &qcg_wire::Attempt,
    dest: u32,
    won: &AtomicU8,
) -> std::result::Result<Option<Duration>, String> {
    use qcg_wire::Technique::*;
    let me = ProcName::new(&inner.env.job, inner.env.rank);
    let target = ProcName::new(&inner.env.job, dest);
    let over = || {
        let state = won.load(Ordering::SeqCst);
        state == DECIDED
            || (state == RELAYED && attempt.technique == Relayed)
            || inner.closed.load(Ordering::SeqCst)
    };
    let rendezvous = |technique| -> std::result::Result<Response, String> {
        inner
            .control
            .request(&Request::Rendezvous {
                from: me.clone(),
                target: target.clone(),
                technique,
            })
            .map_err(|e| e.to_string())
    };
    let stream = match attempt.technique {
        Direct | PortRange => direct::dial(attempt.addr, CONNECT_TIMEOUT)?,
        Reversed => {
            rendezvous(Reversed)?;
            // The target dials our listener; the acceptor makes the link.
            let until = Instant::now() + CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT;
            while Instant::now() < until {
                if over() {
                    return Err(OVERTAKEN.into());
                }
                if inner.engine.core().has_direct_link(dest) {
                    // The link may be another attempt's: the first to claim the race
                    // names the technique.
                    return claim(inner, won, dest, Reversed, None);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            return Err("the target did not connect back in time".into());
        }
        Punched | Traversed => {
            if attempt.technique == Punched {
                rendezvous(Punched)?;
            } else {
                inner
                    .control
                    .request(&Request::WatchSyn {
                        from: me.clone(),
                        target: target.clone(),
                        local: inner.local,
                        remote: attempt.addr,
                    })
                    .map_err(|e| e.to_string())?;
            }
            let dial = match attempt.technique {
                Punched => Dial::Punch,
                _ => Dial::Traverse,
            };
            let done = || over() || inner.engine.core().has_direct_link(dest);
            match from_our_port(inner.local, attempt.addr, dial, &done)? {
                FromOurPort::Connected(s) => s,
                // The peer dialled us at the same time, and the socket its
                // rendezvous asked of us made the link on this 4-tuple.
                FromOurPort::Done if !over() => {
                    return claim(inner, won, dest, attempt.technique, None)
                }
                FromOurPort::Done => return Err(OVERTAKEN.into()),
            }
        }
        Relayed => match rendezvous(Relayed)? {
            Response::Relay { proxy, token } => meet(proxy, &token)?,
            other => {
                return Err(format!(
                    "unexpected answer to a relay rendezvous: {other:?}"
                ))
            }
        },
    };
    if let Some(d) = test_delay(attempt.technique) {
        std::thread::sleep(d);
    }
    if over() {
        // Dropped before the handshake: the target never takes it for a link.
        return Err(OVERTAKEN.into());
    }
    let role = match attempt.technique {
        Punched | Traversed => Role::Either,
        _ => Role::Initiator,
    };
    let (s, rtt) = handshake_as(stream, inner, dest, role)?;
    // Handshaken: the target may already read it as a link, so it is kept (closing
    // it could look like our end to a target that has no other link to us yet). The
    // first attempt to get here claims the race and names the technique.
    inner
        .engine
        .add_link(dest, s, attempt.technique == Relayed)
        .map_err(|e| format!("cannot add the link to the engine: {e}"))?;
    claim(inner, won, dest, attempt.technique, rtt)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A thread with its own line to the helper that sends link reports, so that a new
/// link's first message does not wait for the broker to note the outcome.
pub(crate) struct Reporter {
    pub(crate) tx: std::sync::mpsc::Sender<Request>,
    pub(crate) thread: std::thread::JoinHandle<()>,
}

pub(crate) fn reporter(helper: &std::path::Path) -> Option<Reporter> {
    let control = Control::connect(helper).ok()?;
    let (tx, rx) = std::sync::mpsc::channel::<Request>();
    let thread = std::thread::Builder::new()
        .name("qcg-report".into())
        .spawn(move || {
            for req in rx {
                if let Err(e) = control.request(&req) {
                    tracing::debug!(error = %e, "link report not delivered");
                }
            }
        })
        .ok()?;
    Some(Reporter { tx, thread })
}

fn handshake_error(e: handshake::HandshakeError) -> String {
    match e {
        handshake::HandshakeError::Io(io) => io_error(&io, "handshake", HANDSHAKE_TIMEOUT),
        other => format!("handshake: {other}"),
    }
}

/// Which side of the job handshake a connection takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Initiator,
    Acceptor,
    /// A simultaneous open's: the ranks decide ([`handshake::initiate_either`]).
    Either,
}

/// Runs the job handshake on a fresh connection with `peer`; the stream is ready for
/// data afterwards (sealed if the handshake says so).
fn handshake_as(
    mut s: TcpStream,
    inner: &Inner,
    peer: u32,
    role: Role,
) -> std::result::Result<(crate::engine::NewLink, Option<Duration>), String> {
    let env = &inner.env;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .and_then(|_| s.set_write_timeout(Some(HANDSHAKE_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let (job, secret, me, size) = (&env.job, &env.secret, env.rank, env.size);
    let seal = inner.engine.wants_seal(peer);
    let linked = match role {
        Role::Initiator => handshake::initiate(&mut s, job, secret, me, peer, seal),
        Role::Either => handshake::initiate_either(&mut s, job, secret, me, peer, size, seal),
        Role::Acceptor => handshake::accept(&mut s, job, secret, me, size, seal),
    }
    .map_err(handshake_error)?;
    if linked.peer != peer {
        return Err(format!(
            "handshake: expected rank {peer}, got rank {}",
            linked.peer
        ));
    }
    s.set_read_timeout(None)
        .and_then(|_| s.set_write_timeout(None))
        .and_then(|_| s.set_nodelay(true))
        .map_err(|e| e.to_string())?;
    let link = crate::engine::NewLink {
        stream: s,
        keys: linked.keys,
    };
    Ok((link, linked.rtt))
}

/// Acts on a notice from the grid: our part of a link another rank is making.
fn on_notice(inner: &Arc<Inner>, notice: qcg_wire::Notice) {
    use qcg_wire::Notice;
    let relayed = matches!(notice, Notice::Relay { .. });
    let (from, result) = match notice {
        Notice::ConnectBack { from, addr } => (
            from.clone(),
            TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
                .map_err(|e| e.to_string())
                .and_then(|s| handshake_as(s, inner, from.rank, Role::Initiator))
                .map(|(s, _)| s),
        ),
        Notice::Punch { from, addr } => (from.clone(), {
            // Let the initiator's SYN leave first: behind real firewalls either order
            // works, but where nothing blocks (one host), our SYN reaching its listener
            // first would take the 4-tuple its own dial needs.
            std::thread::sleep(PUNCH_LAG);
            // If we dial the peer too (both needed the link at once), our own punch
            // may hold the 4-tuple and make the link: then this one has nothing to do.
            let done = || {
                inner.closed.load(Ordering::SeqCst)
                    || inner.engine.core().has_direct_link(from.rank)
            };
            match from_our_port(inner.local, addr, Dial::Punch, &done) {
                Ok(FromOurPort::Done) => return,
                Ok(FromOurPort::Connected(s)) => {
                    handshake_as(s, inner, from.rank, Role::Either).map(|(s, _)| s)
                }
                Err(e) => Err(e),
            }
        }),
        Notice::Relay { from, proxy, token } => (
            from.clone(),
            meet(proxy, &token)
                .and_then(|s| handshake_as(s, inner, from.rank, Role::Acceptor))
                .map(|(s, _)| s),
        ),
        Notice::Inject { .. } => return,
    };
    if from.job != inner.env.job || from.rank >= inner.env.size {
        tracing::warn!(%from, "ignored a notice about a process of another job");
        return;
    }
    match result {
        Ok(s) => {
            if let Err(e) = inner.engine.add_link(from.rank, s, relayed) {
                tracing::warn!(peer = from.rank, error = %e, "could not add a link to the engine");
            }
        }
        Err(e) => tracing::warn!(peer = from.rank, error = %e, "could not take our part of a link"),
    }
}

/// Reads notices from the helper until it hangs up; each is handled on its own thread.
pub(crate) fn notice_loop(
    inner: std::sync::Weak<Inner>,
    mut stream: std::os::unix::net::UnixStream,
) {
    loop {
        let n = match qcg_wire::frame::read_frame_sync::<Response, _>(&mut stream) {
            Ok(Some(Response::Notice(n))) => n,
            Ok(Some(_)) => continue,
            _ => return,
        };
        let Some(inner) = inner.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let _ = std::thread::Builder::new()
            .name("qcg-notice".into())
            .spawn(move || on_notice(&inner, n));
    }
}

/// Subscribes to the grid's notices for `process` on a line of its own.
pub(crate) fn subscribe(
    helper: &std::path::Path,
    process: ProcName,
) -> Result<std::os::unix::net::UnixStream> {
    std::os::unix::net::UnixStream::connect(helper)
        .and_then(|mut s| {
            qcg_wire::frame::write_frame_sync(&mut s, &Request::Subscribe { process })
                .map_err(std::io::Error::other)?;
            match qcg_wire::frame::read_frame_sync::<Response, _>(&mut s) {
                Ok(Some(Response::Ok)) => Ok(s),
                other => Err(std::io::Error::other(format!("subscribe: {other:?}"))),
            }
        })
        .map_err(|e| Error::Helper {
            socket: helper.to_path_buf(),
            message: format!("cannot subscribe to notices: {e}"),
        })
}
