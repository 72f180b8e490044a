//! The dialer: how a process makes its links, as a state machine with no sockets,
//! clock or threads. The engine's loop drives it: it tells the dialer what happened
//! ([`Dialer::handle`]: a plan arrived, a socket opened or failed, a handshake ended,
//! a link came from the peer's side) and asks it what to do now
//! ([`Dialer::poll`]`(now)`: look a peer up, open a socket for an attempt, run a
//! handshake, hand a socket to the engine, close one, report an outcome). Time is an
//! input, so the race, the fallback and every time-out are tested in virtual time
//! (the tests at the bottom), two dialers against each other included.
//!
//! One dial per peer. Its plan's attempts race ([`super::race`]); the first to finish
//! its handshake is the link. A relayed link does not end the race: the direct
//! attempts go on, and the first of them to finish moves the link off the relay (an
//! upgrade). A direct link ends it: attempts still opening are closed before their
//! handshake (the peer never takes them for links), those already in their handshake
//! finish and are handed over as one more connection to the peer (closing them could
//! look like our end to a peer that has no other link to us yet).
//!
//! Two ranks that dial each other at once: what the peer's side makes reaches us as
//! [`Event::LinkArrived`] (our listener accepted it, or our part of its reversal,
//! punch or relay made it). ICE resolves such a meeting with a role conflict and a
//! random 64-bit tie-breaker, and libp2p's DCUtR lets the relay connection's dialer
//! lead the upgrade. Ranks are unique and both ends know them, so ours needs neither
//! messages nor randomness: whatever either side makes, both sides read, so the dial
//! ends on the first direct link made from either end (the best technique the pair
//! allows is the one both sides' plans start with, and a relay never ends a dial
//! while a direct attempt runs); where a connection has no caller (a simultaneous
//! open), the lower rank takes the initiator's part of its handshake
//! ([`crate::handshake::initiate_either`]); and one relay serves both: a relayed link
//! from the peer stops ours before it opens.

use super::race::Race;
use super::{CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT};
use qcg_wire::{Attempt, Technique};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// A socket the shell opened for an attempt, named by the dialer.
pub(crate) type Sock = u64;

/// How long a lookup waits for a peer that has not registered yet.
pub(crate) const LOOKUP_PATIENCE: Duration = Duration::from_secs(60);
/// First pause before a lookup is asked again; it doubles up to [`LOOKUP_PAUSE_MAX`].
const LOOKUP_PAUSE: Duration = Duration::from_millis(5);
const LOOKUP_PAUSE_MAX: Duration = Duration::from_millis(200);

/// Which side of the job handshake a dialled connection takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// We called a listener, a proxy's pairing or a peer's reversal.
    Initiator,
    /// A simultaneous open's: the ranks decide.
    Either,
}

/// What the dialer asks of its shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Ask the grid for a plan to reach `peer`; answer with [`Event::Plan`] or
    /// [`Event::LookupFailed`].
    Lookup { peer: u32 },
    /// Start `attempt` toward `peer` on a new socket `sock`; answer with
    /// [`Event::Opened`] (connected and, for a relay, paired) or
    /// [`Event::OpenFailed`]. A reversal opens nothing of ours: it asks the grid and
    /// ends with the peer's link ([`Event::LinkArrived`]).
    Open {
        sock: Sock,
        peer: u32,
        attempt: Attempt,
    },
    /// Run the job handshake on `sock`; answer with [`Event::Handshaken`] or
    /// [`Event::HandshakeFailed`].
    Handshake { sock: Sock, peer: u32, role: Role },
    /// `sock` is a link to `peer` now: hand it to the engine.
    Link {
        sock: Sock,
        peer: u32,
        relayed: bool,
    },
    /// Drop `sock` (an attempt cut off, timed out or done with); nothing answers.
    Close { sock: Sock },
    /// Tell the grid how an attempt ended.
    Report {
        peer: u32,
        technique: Technique,
        ok: bool,
        rtt: Option<Duration>,
        upgrade: bool,
    },
    /// A link to `peer` exists (again on `technique` when we made it, `None` when
    /// the peer's side did): callers waiting for it go on.
    Made {
        peer: u32,
        technique: Option<Technique>,
        relayed: bool,
    },
    /// No link to `peer` could be made: why each attempt failed.
    Failed { peer: u32, attempts: Vec<String> },
}

/// What the shell tells the dialer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    Plan {
        peer: u32,
        attempts: Vec<Attempt>,
    },
    /// The lookup failed; `retry`: the peer may just not have registered yet.
    LookupFailed {
        peer: u32,
        error: String,
        retry: bool,
    },
    Opened {
        sock: Sock,
    },
    OpenFailed {
        sock: Sock,
        error: String,
    },
    /// An attempt's rendezvous was refused because the peer's cluster does not
    /// know it yet (it registered with the broker, and its cluster hears of it a
    /// moment later): failed as [`Event::OpenFailed`], and if every attempt fails
    /// so, the dial looks the peer up again, as a lookup of a peer not yet
    /// registered does.
    PeerUnknown {
        sock: Sock,
        error: String,
    },
    Handshaken {
        sock: Sock,
        rtt: Option<Duration>,
    },
    HandshakeFailed {
        sock: Sock,
        error: String,
    },
    /// A link to `peer` that no attempt of ours handed over: the listener accepted
    /// it, or our part of the peer's reversal, punch or relay made it.
    LinkArrived {
        peer: u32,
        relayed: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Waiting,
    Opening,
    /// Opened, held before its handshake until then (tests only, see [`Dialer::hold`]).
    Held(Instant),
    Handshaking,
    Over,
}

struct Try {
    sock: Sock,
    step: Step,
    /// When the current step times out.
    until: Instant,
}

enum Stage {
    Lookup {
        since: Instant,
        again: Option<Instant>,
        pause: Duration,
        /// The peer's relayed link arrived meanwhile.
        relayed: bool,
    },
    Race(Racing),
}

struct Racing {
    plan: Vec<Attempt>,
    race: Race,
    tries: Vec<Try>,
    failures: Vec<String>,
    /// A relayed link exists: the race goes on for an upgrade.
    relayed: bool,
    /// When the dial started, and its lookup's pause (for a lookup again).
    since: Instant,
    pause: Duration,
    /// An attempt failed because the peer's cluster did not know it yet.
    unknown: bool,
}

/// The dials of one process.
pub(crate) struct Dialer {
    next: Sock,
    dials: BTreeMap<u32, Stage>,
    /// Sockets in their handshake when their dial ended: handed over if it
    /// completes (by peer, with when it times out).
    leftover: HashMap<Sock, (u32, Instant)>,
    /// Tests only: hold every attempt of a technique this long between its socket
    /// opening and its handshake (a slower technique finishes after a faster one).
    hold: Option<(Technique, Duration)>,
    out: Vec<Action>,
}

/// How long opening an attempt may take before it counts as failed.
fn open_time(t: Technique) -> Duration {
    match t {
        // No plan names shared memory (a TCP link moves there, see the engine).
        Technique::Direct
        | Technique::PortRange
        | Technique::Punched
        | Technique::Traversed
        | Technique::SharedMemory => CONNECT_TIMEOUT,
        // The peer connects back and handshakes: the whole link.
        Technique::Reversed => CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT,
        // The proxy's connect, then the wait for the peer's pairing.
        Technique::Relayed => CONNECT_TIMEOUT * 2 + HANDSHAKE_TIMEOUT,
    }
}

/// Whether a link that arrives from the peer may be this attempt's own: our part of
/// the rendezvous made it (a connect-back, or the other socket of a punch on the same
/// 4-tuple).
fn ends_by_arrival(t: Technique) -> bool {
    matches!(
        t,
        Technique::Reversed | Technique::Punched | Technique::Traversed
    )
}

impl Default for Dialer {
    fn default() -> Self {
        Dialer::new()
    }
}

impl Dialer {
    pub(crate) fn new() -> Dialer {
        Dialer {
            next: 1,
            dials: BTreeMap::new(),
            leftover: HashMap::new(),
            hold: None,
            out: Vec::new(),
        }
    }

    /// Tests only: holds every attempt of `t` for `d` before its handshake.
    pub(crate) fn hold(&mut self, t: Technique, d: Duration) {
        self.hold = Some((t, d));
    }

    /// Whether a dial to `peer` is under way (not counting a relayed link's upgrade).
    pub(crate) fn dialing(&self, peer: u32) -> bool {
        match self.dials.get(&peer) {
            Some(Stage::Race(r)) => !r.relayed,
            Some(Stage::Lookup { .. }) => true,
            None => false,
        }
    }

    /// Whether the dialer has anything under way (a dial or a leftover handshake).
    #[cfg(test)]
    pub(crate) fn busy(&self) -> bool {
        !self.dials.is_empty() || !self.leftover.is_empty()
    }

    /// Starts a dial to `peer`, unless one is under way.
    pub(crate) fn dial(&mut self, peer: u32, now: Instant) {
        if self.dials.contains_key(&peer) {
            return;
        }
        self.dials.insert(
            peer,
            Stage::Lookup {
                since: now,
                again: None,
                pause: LOOKUP_PAUSE,
                relayed: false,
            },
        );
        self.out.push(Action::Lookup { peer });
    }

    /// When [`Dialer::poll`] has something to do next without an event.
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
        for stage in self.dials.values() {
            match stage {
                Stage::Lookup { again, .. } => {
                    if let Some(a) = again {
                        at(*a)
                    }
                }
                Stage::Race(r) => {
                    if let Some(c) = r.race.next_check() {
                        at(c)
                    }
                    for tr in &r.tries {
                        match tr.step {
                            Step::Opening | Step::Handshaking => at(tr.until),
                            Step::Held(h) => at(h),
                            Step::Waiting | Step::Over => {}
                        }
                    }
                }
            }
        }
        for (_, until) in self.leftover.values() {
            at(*until)
        }
        t
    }

    /// Takes what happened.
    pub(crate) fn handle(&mut self, ev: Event, now: Instant) {
        match ev {
            Event::Plan { peer, attempts } => {
                if let Some(stage @ Stage::Lookup { .. }) = self.dials.get_mut(&peer) {
                    let (relayed, since, pause) = match stage {
                        Stage::Lookup {
                            relayed,
                            since,
                            pause,
                            ..
                        } => (*relayed, *since, *pause),
                        Stage::Race(_) => (false, now, LOOKUP_PAUSE),
                    };
                    let race = Race::new(attempts.iter().map(|a| a.technique).collect());
                    let n = attempts.len();
                    *stage = Stage::Race(Racing {
                        plan: attempts,
                        race,
                        tries: (0..n)
                            .map(|_| Try {
                                sock: 0,
                                step: Step::Waiting,
                                until: now,
                            })
                            .collect(),
                        failures: Vec::new(),
                        relayed,
                        since,
                        pause,
                        unknown: false,
                    });
                }
            }
            Event::LookupFailed { peer, error, retry } => {
                if let Some(Stage::Lookup {
                    since,
                    again,
                    pause,
                    ..
                }) = self.dials.get_mut(&peer)
                {
                    if retry && now.duration_since(*since) < LOOKUP_PATIENCE {
                        *again = Some(now + *pause);
                        *pause = (*pause * 2).min(LOOKUP_PAUSE_MAX);
                    } else {
                        self.dials.remove(&peer);
                        self.out.push(Action::Failed {
                            peer,
                            attempts: vec![format!("lookup: {error}")],
                        });
                    }
                }
            }
            Event::Opened { sock } => {
                if let Some((peer, i)) = self.find(sock, Step::Opening) {
                    let hold = self.hold;
                    let r = self.racing(peer);
                    let t = r.plan[i].technique;
                    match hold.filter(|&(h, _)| h == t) {
                        Some((_, d)) => r.tries[i].step = Step::Held(now + d),
                        None => self.handshake(peer, i, now),
                    }
                }
            }
            Event::OpenFailed { sock, error } => {
                if let Some((peer, i)) = self.find(sock, Step::Opening) {
                    self.fail(peer, i, error);
                }
            }
            Event::PeerUnknown { sock, error } => {
                if let Some((peer, i)) = self.find(sock, Step::Opening) {
                    self.racing(peer).unknown = true;
                    self.fail(peer, i, error);
                }
            }
            Event::Handshaken { sock, rtt } => {
                if let Some((peer, _)) = self.leftover.remove(&sock) {
                    self.out.push(Action::Link {
                        sock,
                        peer,
                        relayed: false,
                    });
                } else if let Some((peer, i)) = self.find(sock, Step::Handshaking) {
                    self.made(peer, i, rtt, true);
                }
            }
            Event::HandshakeFailed { sock, error } => {
                if self.leftover.remove(&sock).is_none() {
                    if let Some((peer, i)) = self.find(sock, Step::Handshaking) {
                        self.fail(peer, i, error);
                    }
                }
            }
            Event::LinkArrived { peer, relayed } => self.arrived(peer, relayed),
        }
    }

    /// What to do now: what the events asked for, and what time made due.
    pub(crate) fn poll(&mut self, now: Instant) -> Vec<Action> {
        let late: Vec<Sock> = self
            .leftover
            .iter()
            .filter(|(_, (_, until))| now >= *until)
            .map(|(&s, _)| s)
            .collect();
        for sock in late {
            self.leftover.remove(&sock);
            self.out.push(Action::Close { sock });
        }
        let peers: Vec<u32> = self.dials.keys().copied().collect();
        for peer in peers {
            match self.dials.get_mut(&peer) {
                Some(Stage::Lookup { again, .. }) if again.is_some_and(|a| now >= a) => {
                    *again = None;
                    self.out.push(Action::Lookup { peer });
                }
                Some(Stage::Race(_)) => self.advance(peer, now),
                _ => {}
            }
        }
        std::mem::take(&mut self.out)
    }

    fn racing(&mut self, peer: u32) -> &mut Racing {
        match self.dials.get_mut(&peer) {
            Some(Stage::Race(r)) => r,
            _ => unreachable!("a try's dial races"),
        }
    }

    /// The dial and attempt of `sock`, if it is at `step`.
    fn find(&self, sock: Sock, step: Step) -> Option<(u32, usize)> {
        self.dials.iter().find_map(|(&peer, stage)| match stage {
            Stage::Race(r) => r
                .tries
                .iter()
                .position(|t| t.sock == sock && t.step == step)
                .map(|i| (peer, i)),
            Stage::Lookup { .. } => None,
        })
    }

    /// Time-outs, held attempts let go, attempts started, and the end of a lost race.
    fn advance(&mut self, peer: u32, now: Instant) {
        let r = self.racing(peer);
        let mut late = Vec::new();
        let mut let_go = Vec::new();
        for (i, t) in r.tries.iter().enumerate() {
            match t.step {
                Step::Opening | Step::Handshaking if now >= t.until => late.push(i),
                Step::Held(h) if now >= h => let_go.push(i),
                _ => {}
            }
        }
        for i in let_go {
            self.handshake(peer, i, now);
        }
        for i in late {
            let r = self.racing(peer);
            let (t, step) = (r.plan[i].technique, r.tries[i].step);
            let sock = r.tries[i].sock;
            let what = match (step, t) {
                (Step::Handshaking, _) => "handshake",
                (_, Technique::Reversed) => "waiting for the target to connect back",
                (_, Technique::Relayed) => "meeting the peer at the proxy",
                _ => "connect",
            };
            let limit = match step {
                Step::Handshaking => HANDSHAKE_TIMEOUT,
                _ => open_time(t),
            };
            self.out.push(Action::Close { sock });
            self.fail(
                peer,
                i,
                format!("{what} timed out after {:.0} s", limit.as_secs_f64()),
            );
        }
        let Some(Stage::Race(r)) = self.dials.get_mut(&peer) else {
            return;
        };
        while let Some(i) = r.race.start(now) {
            if r.relayed && r.plan[i].technique == Technique::Relayed {
                r.race.failed(i);
                r.tries[i].step = Step::Over;
                continue;
            }
            let sock = self.next;
            self.next += 1;
            r.tries[i] = Try {
                sock,
                step: Step::Opening,
                until: now + open_time(r.plan[i].technique),
            };
            self.out.push(Action::Open {
                sock,
                peer,
                attempt: r.plan[i].clone(),
            });
        }
        if r.race.lost() {
            let r = match self.dials.remove(&peer) {
                Some(Stage::Race(r)) => r,
                _ => return,
            };
            if r.relayed {
                return;
            }
            if r.unknown && now.duration_since(r.since) < LOOKUP_PATIENCE {
                // Its cluster had not heard of the peer yet: ask again shortly.
                self.dials.insert(
                    peer,
                    Stage::Lookup {
                        since: r.since,
                        again: Some(now + r.pause),
                        pause: (r.pause * 2).min(LOOKUP_PAUSE_MAX),
                        relayed: false,
                    },
                );
                return;
            }
            let mut attempts = r.failures;
            if attempts.is_empty() {
                attempts.push("the plan was empty".into());
            }
            self.out.push(Action::Failed { peer, attempts });
        }
    }

    fn handshake(&mut self, peer: u32, i: usize, now: Instant) {
        let r = self.racing(peer);
        let role = match r.plan[i].technique {
            Technique::Punched | Technique::Traversed => Role::Either,
            _ => Role::Initiator,
        };
        let t = &mut r.tries[i];
        t.step = Step::Handshaking;
        t.until = now + HANDSHAKE_TIMEOUT;
        let sock = t.sock;
        self.out.push(Action::Handshake { sock, peer, role });
    }

    /// Attempt `i` of the dial to `peer` failed with `error` (its socket is closed).
    fn fail(&mut self, peer: u32, i: usize, error: String) {
        let r = self.racing(peer);
        let a = &r.plan[i];
        r.tries[i].step = Step::Over;
        r.race.failed(i);
        r.failures
            .push(format!("{} to {}: {error}", a.technique, a.addr));
        let technique = a.technique;
        self.out.push(Action::Report {
            peer,
            technique,
            ok: false,
            rtt: None,
            upgrade: false,
        });
    }

    /// Attempt `i` made the link (its own socket when `ours`, else the link arrived
    /// through our part of its rendezvous).
    fn made(&mut self, peer: u32, i: usize, rtt: Option<Duration>, ours: bool) {
        let r = self.racing(peer);
        let technique = r.plan[i].technique;
        let sock = r.tries[i].sock;
        r.tries[i].step = Step::Over;
        let relayed = technique == Technique::Relayed;
        let upgrade = r.relayed && !relayed;
        if ours {
            self.out.push(Action::Link {
                sock,
                peer,
                relayed,
            });
        }
        self.out.push(Action::Report {
            peer,
            technique,
            ok: true,
            rtt,
            upgrade,
        });
        self.out.push(Action::Made {
            peer,
            technique: Some(technique),
            relayed,
        });
        if relayed {
            let r = self.racing(peer);
            r.relayed = true;
            r.race.failed(i);
        } else {
            self.end(peer);
        }
    }

    /// A direct link to `peer` exists: the dial ends; attempts still opening are
    /// closed, those in their handshake finish as leftovers.
    fn end(&mut self, peer: u32) {
        let Some(Stage::Race(r)) = self.dials.remove(&peer) else {
            self.dials.remove(&peer);
            return;
        };
        for t in &r.tries {
            match t.step {
                Step::Opening | Step::Held(_) => self.out.push(Action::Close { sock: t.sock }),
                Step::Handshaking => {
                    self.leftover.insert(t.sock, (peer, t.until));
                }
                Step::Waiting | Step::Over => {}
            }
        }
    }

    fn arrived(&mut self, peer: u32, relayed: bool) {
        let Some(stage) = self.dials.get_mut(&peer) else {
            return;
        };
        let r = match stage {
            Stage::Lookup {
                relayed: on_relay, ..
            } => {
                // The peer linked to us before we even had a plan.
                if relayed {
                    // Keep the dial: a direct attempt may still do better; its race
                    // starts with the relay already there (and skips its own).
                    if !*on_relay {
                        *on_relay = true;
                        self.out.push(Action::Made {
                            peer,
                            technique: None,
                            relayed: true,
                        });
                    }
                    return;
                }
                self.dials.remove(&peer);
                self.out.push(Action::Made {
                    peer,
                    technique: None,
                    relayed: false,
                });
                return;
            }
            Stage::Race(r) => r,
        };
        if relayed {
            if r.relayed {
                return;
            }
            // One relay serves both: ours stops, unless its handshake already runs.
            r.relayed = true;
            for (i, a) in r.plan.iter().enumerate() {
                if a.technique != Technique::Relayed {
                    continue;
                }
                match r.tries[i].step {
                    Step::Waiting => {
                        r.tries[i].step = Step::Over;
                        r.race.failed(i);
                    }
                    Step::Opening | Step::Held(_) => {
                        r.tries[i].step = Step::Over;
                        r.race.failed(i);
                        self.out.push(Action::Close {
                            sock: r.tries[i].sock,
                        });
                    }
                    _ => {}
                }
            }
            self.out.push(Action::Made {
                peer,
                technique: None,
                relayed: true,
            });
            return;
        }
        // A direct link: the attempt whose rendezvous we ran made it, if any.
        let mine = (0..r.plan.len()).find(|&i| {
            ends_by_arrival(r.plan[i].technique)
                && matches!(r.tries[i].step, Step::Opening | Step::Held(_))
        });
        match mine {
            Some(i) => {
                // What the attempt opened is done with: a reversal's rendezvous, or
                // our socket of the 4-tuple that the other socket won.
                let sock = r.tries[i].sock;
                self.out.push(Action::Close { sock });
                self.made(peer, i, None, false);
            }
            None => {
                self.end(peer);
                self.out.push(Action::Made {
                    peer,
                    technique: None,
                    relayed: false,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Virtual time: a simulated network answers the dialers' actions after set
    //! delays; nothing here opens a socket or reads the clock past `t0`.
    use super::*;
    use std::collections::BTreeMap;
    use Technique::*;

    /// A side's plan: each technique and how the network treats it.
    type Plan = Vec<(Technique, Net)>;

    /// How the network treats an attempt of one direction.
    #[derive(Clone, Copy, Debug)]
    enum Net {
        /// Opens after this long.
        Opens(u64),
        /// Refused after this long.
        Refused(u64),
        /// Nothing ever answers (a dropped SYN, a peer that never connects back).
        Silent,
    }

    const HS: u64 = 2; // ms a handshake takes

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn addr() -> std::net::SocketAddr {
        "192.0.2.1:7000".parse().unwrap()
    }

    fn plan(ts: &[Technique]) -> Vec<Attempt> {
        ts.iter()
            .map(|&technique| Attempt {
                technique,
                addr: addr(),
            })
            .collect()
    }

    /// One side of the simulation.
    struct Side {
        rank: u32,
        d: Dialer,
        plan: Vec<(Technique, Net)>,
        /// Lookups answered "unknown process" before the plan comes.
        unknown: u32,
        /// Attempts whose rendezvous the peer's cluster refuses, not knowing it yet.
        unknown_there: u32,
        /// Sockets and the technique each was opened for.
        socks: HashMap<Sock, Technique>,
        closed: Vec<Sock>,
        /// Links handed to the engine: (technique, relayed).
        links: Vec<(Technique, bool)>,
        made: Vec<Action>,
        failed: Option<Vec<String>>,
        reports: Vec<(Technique, bool, bool)>,
    }

    impl Side {
        fn new(rank: u32, plan: &[(Technique, Net)]) -> Side {
            Side {
                rank,
                d: Dialer::new(),
                plan: plan.to_vec(),
                unknown: 0,
                unknown_there: 0,
                socks: HashMap::new(),
                closed: Vec::new(),
                links: Vec::new(),
                made: Vec::new(),
                failed: None,
                reports: Vec::new(),
            }
        }

        /// The technique of the dial's link once it settled: the last `Made`.
        fn ended_on(&self) -> Option<(Option<Technique>, bool)> {
            self.made.last().map(|m| match m {
                Action::Made {
                    technique, relayed, ..
                } => (*technique, *relayed),
                _ => unreachable!(),
            })
        }
    }

    /// Two dialers (ranks 0 and 1) and the network between them. What one side's
    /// attempt makes reaches the other as a link that arrived.
    struct Sim {
        t0: Instant,
        now: Instant,
        sides: [Side; 2],
        /// Events due, by time then order of scheduling.
        due: BTreeMap<(Instant, u64), (usize, Event)>,
        seq: u64,
    }

    impl Sim {
        fn new(a: &[(Technique, Net)], b: &[(Technique, Net)]) -> Sim {
            let t0 = Instant::now();
            Sim {
                t0,
                now: t0,
                sides: [Side::new(0, a), Side::new(1, b)],
                due: BTreeMap::new(),
                seq: 0,
            }
        }

        fn at(&mut self, after: u64, side: usize, ev: Event) {
            self.seq += 1;
            self.due
                .insert((self.now + ms(after), self.seq), (side, ev));
        }

        fn dial(&mut self, side: usize) {
            let peer = self.sides[1 - side].rank;
            self.sides[side].d.dial(peer, self.now);
            self.act(side);
        }

        /// Runs the actions `side` asks for now.
        fn act(&mut self, side: usize) {
            let actions = self.sides[side].d.poll(self.now);
            for a in actions {
                self.run(side, a);
            }
        }

        fn run(&mut self, side: usize, a: Action) {
            let other = 1 - side;
            match a {
                Action::Lookup { peer } => {
                    let s = &mut self.sides[side];
                    let ev = if s.unknown > 0 {
                        s.unknown -= 1;
                        Event::LookupFailed {
                            peer,
                            error: "unknown process".into(),
                            retry: true,
                        }
                    } else {
                        let ts: Vec<Technique> = s.plan.iter().map(|p| p.0).collect();
                        Event::Plan {
                            peer,
                            attempts: plan(&ts),
                        }
                    };
                    self.at(1, side, ev);
                }
                Action::Open { sock, attempt, .. } => {
                    let t = attempt.technique;
                    self.sides[side].socks.insert(sock, t);
                    if self.sides[side].unknown_there > 0 {
                        self.sides[side].unknown_there -= 1;
                        let error = "the grid refused rendezvous: UnknownProcess".to_string();
                        self.at(1, side, Event::PeerUnknown { sock, error });
                        return;
                    }
                    let net = self.sides[side]
                        .plan
                        .iter()
                        .find(|p| p.0 == t)
                        .map(|p| p.1)
                        .unwrap();
                    match (t, net) {
                        // The peer's part connects back and handshakes: a link on
                        // both sides, ours arrives.
                        (Reversed, Net::Opens(d)) => {
                            let me = self.sides[side].rank;
                            self.at(
                                d + HS,
                                side,
                                Event::LinkArrived {
                                    peer: self.sides[other].rank,
                                    relayed: false,
                                },
                            );
                            self.at(
                                d + HS,
                                other,
                                Event::LinkArrived {
                                    peer: me,
                                    relayed: false,
                                },
                            );
                        }
                        (_, Net::Opens(d)) => self.at(d, side, Event::Opened { sock }),
                        (_, Net::Refused(d)) => self.at(
                            d,
                            side,
                            Event::OpenFailed {
                                sock,
                                error: "connect: Connection refused".into(),
                            },
                        ),
                        (_, Net::Silent) => {}
                    }
                }
                Action::Handshake { sock, .. } => {
                    self.at(
                        HS,
                        side,
                        Event::Handshaken {
                            sock,
                            rtt: Some(ms(1)),
                        },
                    );
                }
                Action::Link { sock, relayed, .. } => {
                    let t = self.sides[side].socks[&sock];
                    self.sides[side].links.push((t, relayed));
                    // The peer reads the same connection as a link that arrived.
                    let me = self.sides[side].rank;
                    self.at(0, other, Event::LinkArrived { peer: me, relayed });
                }
                Action::Close { sock } => self.sides[side].closed.push(sock),
                Action::Report {
                    technique,
                    ok,
                    upgrade,
                    ..
                } => self.sides[side].reports.push((technique, ok, upgrade)),
                m @ Action::Made { .. } => self.sides[side].made.push(m),
                Action::Failed { attempts, .. } => self.sides[side].failed = Some(attempts),
            }
        }

        /// Runs until nothing is due and both dialers are idle, or `limit` passes.
        fn run_for(&mut self, limit: u64) {
            let end = self.t0 + ms(limit);
            loop {
                let timer = (0..2).filter_map(|s| self.sides[s].d.next_timer()).min();
                let event = self.due.keys().next().map(|k| k.0);
                let next = match (timer, event) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => match a.or(b) {
                        Some(t) => t,
                        None => return,
                    },
                };
                if next > end {
                    return;
                }
                self.now = self.now.max(next);
                while let Some((&k, _)) = self.due.iter().next().filter(|(k, _)| k.0 <= self.now) {
                    let (side, ev) = self.due.remove(&k).unwrap();
                    // Events of closed sockets never come.
                    let sock = match &ev {
                        Event::Opened { sock }
                        | Event::OpenFailed { sock, .. }
                        | Event::Handshaken { sock, .. }
                        | Event::HandshakeFailed { sock, .. } => Some(*sock),
                        _ => None,
                    };
                    if sock.is_some_and(|s| self.sides[side].closed.contains(&s)) {
                        continue;
                    }
                    self.sides[side].d.handle(ev, self.now);
                    self.act(side);
                }
                for s in 0..2 {
                    self.act(s);
                }
            }
        }

        fn elapsed(&self) -> Duration {
            self.now.duration_since(self.t0)
        }
    }

    #[test]
    fn the_first_technique_that_works_makes_the_link_and_closes_nothing_it_did_not_open() {
        let mut sim = Sim::new(&[(Direct, Net::Opens(1)), (Relayed, Net::Opens(5))], &[]);
        sim.dial(0);
        sim.run_for(60_000);
        let s = &sim.sides[0];
        assert_eq!(s.ended_on(), Some((Some(Direct), false)));
        assert_eq!(s.links, [(Direct, false)]);
        assert_eq!(s.reports, [(Direct, true, false)]);
        // The relay never started: the direct link came within the stagger.
        assert_eq!(s.socks.len(), 1);
        assert!(!s.d.busy());
    }

    #[test]
    fn a_silent_first_technique_costs_a_stagger_then_the_next_races_it() {
        // Direct drops its SYN: the relay starts one stagger later and makes the
        // link; the direct attempt runs on until its connect time-out.
        let mut sim = Sim::new(&[(Direct, Net::Silent), (Relayed, Net::Opens(5))], &[]);
        sim.dial(0);
        sim.run_for(60_000);
        let s = &sim.sides[0];
        assert_eq!(
            s.made[0],
            Action::Made {
                peer: 1,
                technique: Some(Relayed),
                relayed: true
            }
        );
        assert_eq!(s.links, [(Relayed, true)]);
        assert!(s.failed.is_none());
        assert_eq!(s.reports, [(Relayed, true, false), (Direct, false, false)]);
        // The direct attempt's time-out ended the dial, at its connect time-out.
        assert_eq!(sim.elapsed(), ms(1) + CONNECT_TIMEOUT);
        assert!(!s.d.busy());
    }

    #[test]
    fn a_refused_technique_falls_back_to_the_next_at_once() {
        let mut sim = Sim::new(
            &[
                (Direct, Net::Refused(1)),
                (Reversed, Net::Refused(3)),
                (Relayed, Net::Opens(5)),
            ],
            &[],
        );
        sim.dial(0);
        sim.run_for(60_000);
        let s = &sim.sides[0];
        assert_eq!(s.ended_on(), Some((Some(Relayed), true)));
        // Lookup 1 ms, direct refused at 2, reversal refused at 5, relay opened at
        // 10 and handshaken at 12: no stagger waited.
        assert_eq!(sim.elapsed(), ms(1 + 1 + 3 + 5 + HS));
        assert_eq!(
            s.reports,
            [
                (Direct, false, false),
                (Reversed, false, false),
                (Relayed, true, false)
            ]
        );
    }

    #[test]
    fn a_slower_direct_link_moves_the_link_off_the_relay() {
        let mut sim = Sim::new(&[(Direct, Net::Opens(400)), (Relayed, Net::Opens(5))], &[]);
        sim.dial(0);
        sim.run_for(60_000);
        let s = &sim.sides[0];
        assert_eq!(s.links, [(Relayed, true), (Direct, false)]);
        assert_eq!(s.reports, [(Relayed, true, false), (Direct, true, true)]);
        assert_eq!(s.ended_on(), Some((Some(Direct), false)));
        assert!(!s.d.busy());
    }

    #[test]
    fn a_held_attempt_waits_before_its_handshake() {
        let mut sim = Sim::new(&[(Direct, Net::Opens(1)), (Relayed, Net::Opens(5))], &[]);
        sim.sides[0].d.hold(Direct, ms(1500));
        sim.dial(0);
        sim.run_for(60_000);
        let s = &sim.sides[0];
        assert_eq!(s.links, [(Relayed, true), (Direct, false)]);
        assert_eq!(s.reports, [(Relayed, true, false), (Direct, true, true)]);
    }

    #[test]
    fn every_attempt_failing_fails_the_dial_naming_each() {
        let mut sim = Sim::new(
            &[(Direct, Net::Refused(1)), (Relayed, Net::Refused(1))],
            &[],
        );
        sim.dial(0);
        sim.run_for(60_000);
        let f = sim.sides[0].failed.clone().expect("the dial failed");
        assert_eq!(f.len(), 2);
        assert!(
            f[0].starts_with("direct to 192.0.2.1:7000: connect: Connection refused"),
            "{f:?}"
        );
        assert!(f[1].starts_with("relayed to"), "{f:?}");
        assert!(sim.sides[0].made.is_empty());
        // An empty plan fails too, and says so.
        let mut sim = Sim::new(&[], &[]);
        sim.dial(0);
        sim.run_for(60_000);
        assert_eq!(sim.sides[0].failed, Some(vec!["the plan was empty".into()]));
    }

    #[test]
    fn each_step_times_out() {
        // (plan, time the dial fails at, what the failure says)
        let cases: Vec<(Plan, Duration, &str)> = vec![
            (
                vec![(Direct, Net::Silent)],
                CONNECT_TIMEOUT,
                "connect timed out after 5 s",
            ),
            (
                vec![(Punched, Net::Silent)],
                CONNECT_TIMEOUT,
                "connect timed out after 5 s",
            ),
            (
                vec![(Reversed, Net::Silent)],
                CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT,
                "waiting for the target to connect back timed out after 10 s",
            ),
            (
                vec![(Relayed, Net::Silent)],
                CONNECT_TIMEOUT * 2 + HANDSHAKE_TIMEOUT,
                "meeting the peer at the proxy timed out after 15 s",
            ),
        ];
        for (p, at, says) in cases {
            let mut sim = Sim::new(&p, &[]);
            sim.dial(0);
            sim.run_for(600_000);
            let f = sim.sides[0].failed.clone().expect("the dial failed");
            assert!(f[0].ends_with(says), "{p:?}: {f:?}");
            // The lookup took 1 ms.
            assert_eq!(sim.elapsed(), at + ms(1), "{p:?}");
            assert!(!sim.sides[0].d.busy());
        }
        // A handshake that never ends.
        let t0 = Instant::now();
        let mut d = Dialer::new();
        d.dial(1, t0);
        d.poll(t0);
        d.handle(
            Event::Plan {
                peer: 1,
                attempts: plan(&[Direct]),
            },
            t0,
        );
        let open = d.poll(t0);
        let Action::Open { sock, .. } = open[0] else {
            panic!("{open:?}")
        };
        d.handle(Event::Opened { sock }, t0);
        assert!(matches!(d.poll(t0)[..], [Action::Handshake { .. }]));
        assert_eq!(d.next_timer(), Some(t0 + HANDSHAKE_TIMEOUT));
        assert!(d.poll(t0 + HANDSHAKE_TIMEOUT - ms(1)).is_empty());
        let end = d.poll(t0 + HANDSHAKE_TIMEOUT);
        assert_eq!(end[0], Action::Close { sock });
        assert!(
            matches!(&end[2], Action::Failed { attempts, .. } if attempts[0].ends_with("handshake timed out after 5 s")),
            "{end:?}"
        );
        // A lookup of a peer that never registers: asked again with a growing
        // pause, given up after its patience.
        let mut sim = Sim::new(&[(Direct, Net::Opens(1))], &[]);
        sim.sides[0].unknown = u32::MAX;
        sim.dial(0);
        sim.run_for(600_000);
        let f = sim.sides[0].failed.clone().expect("the lookup failed");
        assert_eq!(f, ["lookup: unknown process"]);
        assert!(sim.elapsed() >= LOOKUP_PATIENCE, "{:?}", sim.elapsed());
        assert!(
            sim.elapsed() < LOOKUP_PATIENCE + ms(250),
            "{:?}",
            sim.elapsed()
        );
        // A peer that registers late is found.
        let mut sim = Sim::new(&[(Direct, Net::Opens(1))], &[]);
        sim.sides[0].unknown = 5;
        sim.dial(0);
        sim.run_for(600_000);
        assert_eq!(sim.sides[0].ended_on(), Some((Some(Direct), false)));
        // Known to the broker but not yet to its cluster, which refuses the
        // rendezvous: the dial looks it up again and makes the link (the lab once
        // failed a reversed link so when the target started a moment late) ...
        let plan = [(Reversed, Net::Opens(1)), (Relayed, Net::Opens(5))];
        let mut sim = Sim::new(&plan, &[]);
        sim.sides[0].unknown_there = 4;
        sim.dial(0);
        sim.run_for(600_000);
        assert_eq!(sim.sides[0].failed, None);
        assert_eq!(sim.sides[0].ended_on(), Some((Some(Reversed), false)));
        // ... and gives up after the lookup's patience if the cluster never knows it.
        let mut sim = Sim::new(&plan, &[]);
        sim.sides[0].unknown_there = u32::MAX;
        sim.dial(0);
        sim.run_for(600_000);
        let f = sim.sides[0].failed.clone().expect("the dial failed");
        assert!(f.iter().all(|a| a.contains("UnknownProcess")), "{f:?}");
        assert!(sim.elapsed() >= LOOKUP_PATIENCE, "{:?}", sim.elapsed());
    }

    /// The lab's technique pairs, each as the broker plans both directions: what
    /// each side's plan holds and what its network lets through; and the technique
    /// the pair allows at best, per side.
    fn pairs() -> Vec<(&'static str, Plan, Plan)> {
        vec![
            (
                "direct",
                vec![(Direct, Net::Opens(1)), (Relayed, Net::Opens(5))],
                vec![(Direct, Net::Opens(1)), (Relayed, Net::Opens(5))],
            ),
            (
                // A's firewall lets nothing in: B→A is reversed, A→B direct.
                "reversed",
                vec![(Direct, Net::Opens(1)), (Relayed, Net::Opens(5))],
                vec![
                    (Direct, Net::Silent),
                    (Reversed, Net::Opens(2)),
                    (Relayed, Net::Opens(5)),
                ],
            ),
            (
                "punched",
                vec![
                    (Direct, Net::Silent),
                    (Punched, Net::Opens(3)),
                    (Relayed, Net::Opens(5)),
                ],
                vec![
                    (Direct, Net::Silent),
                    (Punched, Net::Opens(3)),
                    (Relayed, Net::Opens(5)),
                ],
            ),
            (
                "traversed",
                vec![
                    (Direct, Net::Silent),
                    (Traversed, Net::Opens(4)),
                    (Relayed, Net::Opens(5)),
                ],
                vec![
                    (Direct, Net::Silent),
                    (Reversed, Net::Opens(6)),
                    (Relayed, Net::Opens(5)),
                ],
            ),
        ]
    }

    #[test]
    fn both_sides_dialling_at_once_end_on_the_best_technique_on_every_pair() {
        for (name, a, b) in pairs() {
            // At once, and each side a little ahead of the other.
            for (lead, lag) in [(0, 0), (0, 1), (1, 0), (0, 3), (3, 0), (0, 300), (300, 0)] {
                let mut sim = Sim::new(&a, &b);
                let (first, second, gap) = if lead <= lag {
                    (0, 1, lag - lead)
                } else {
                    (1, 0, lead - lag)
                };
                sim.dial(first);
                sim.run_for(gap);
                sim.now = sim.t0 + ms(gap);
                sim.dial(second);
                sim.run_for(600_000);
                for s in &sim.sides {
                    let what = format!(
                        "{name}, lead {lead} lag {lag}, rank {}: {:?}",
                        s.rank, s.made
                    );
                    assert!(s.failed.is_none(), "{what}");
                    // Ends on a direct link: made by one side or the other.
                    let (_, relayed) = s.ended_on().expect(&what);
                    assert!(!relayed, "{what}");
                    // Nothing it made itself went through the relay, and what it made
                    // directly is its plan's first working technique.
                    let best = s
                        .plan
                        .iter()
                        .find(|p| !matches!(p.1, Net::Silent | Net::Refused(_)))
                        .unwrap()
                        .0;
                    for &(t, relayed) in &s.links {
                        assert!(!relayed && t == best, "{what}: links {:?}", s.links);
                    }
                    assert!(!s.d.busy(), "{what}");
                }
                // One link, or two made at once (one per side), never more.
                let links = sim.sides[0].links.len() + sim.sides[1].links.len();
                assert!(links <= 2, "{name}: {links} links");
            }
        }
    }

    #[test]
    fn a_relayed_link_from_the_peer_stops_ours_and_the_direct_attempt_still_upgrades() {
        // B's relay reaches A before A's relay started (a stagger after its punch):
        // A never opens its own, and keeps racing its punch, which then moves the
        // link off the relay.
        let mut sim = Sim::new(
            &[(Punched, Net::Opens(600)), (Relayed, Net::Opens(50))],
            &[(Relayed, Net::Opens(5))],
        );
        sim.dial(0);
        sim.dial(1);
        sim.run_for(600_000);
        let a = &sim.sides[0];
        assert!(a.links.iter().all(|l| l.0 != Relayed), "{:?}", a.links);
        assert_eq!(a.links, [(Punched, false)]);
        assert_eq!(a.ended_on(), Some((Some(Punched), false)));
        assert!(!a.socks.values().any(|&t| t == Relayed), "{:?}", a.socks);
        assert_eq!(
            a.made[0],
            Action::Made {
                peer: 1,
                technique: None,
                relayed: true
            }
        );
        let b = &sim.sides[1];
        assert_eq!(b.links, [(Relayed, true)]);
        // B's plan had nothing better: its dial ended on its relay, and the engine
        // moves that link onto A's punched connection when it arrives.
        assert_eq!(b.ended_on(), Some((Some(Relayed), true)), "{:?}", b.made);
        assert!(!b.d.busy());
    }

    #[test]
    fn a_link_from_the_peer_ends_a_dial_still_looking_up() {
        let t0 = Instant::now();
        let mut d = Dialer::new();
        d.dial(4, t0);
        assert_eq!(d.poll(t0), [Action::Lookup { peer: 4 }]);
        d.handle(
            Event::LinkArrived {
                peer: 4,
                relayed: false,
            },
            t0,
        );
        assert_eq!(
            d.poll(t0),
            [Action::Made {
                peer: 4,
                technique: None,
                relayed: false
            }]
        );
        assert!(!d.busy());
        // The plan coming late starts nothing.
        d.handle(
            Event::Plan {
                peer: 4,
                attempts: plan(&[Direct]),
            },
            t0,
        );
        assert!(d.poll(t0).is_empty());
    }
}
