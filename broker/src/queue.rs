//! The queue's decision, pure: given the waiting jobs, the slots held and each
//! client's recent usage, which jobs start now and where. [`crate::jobs`] calls
//! [`decide`] whenever slots may have been freed or a job arrived.
//!
//! # Order: fair share
//!
//! Waiting jobs are taken in this order, recomputed after every start:
//! 1. the fewest slots their client holds now (jobs started in this very pass
//!    count), so free slots go to the clients in turn and one client's backlog
//!    never keeps another client's first job behind it;
//! 2. the least recent usage of their client: core-seconds, halved every
//!    [`Usage`] half-life (Slurm's `PriorityDecayHalfLife` idea, with every client
//!    given the same share and no account tree);
//! 3. submission order.
//!
//! # Backfill
//!
//! A job that fits the free slots starts. The first one in that order that does
//! not fit is the *head*: it gets a reservation, and a later job may still start
//! now ("backfill") only on free slots outside it, so that it cannot take what the
//! head will need. Slurm reserves for the head at its expected start, computed
//! from the time limits of the running jobs, and lets a later job use those slots
//! if it will end before then. A JobProfile has no time limit, so every job may run
//! for ever and the reservation here is conservative, on slots that are sure to
//! come free without the backfilled jobs: the slots of the running jobs that were
//! not themselves backfilled, if the head fits there (the free slots then all stay
//! open to backfill); otherwise those and the free slots together (the head placed
//! around the backfilled jobs); if even that cannot hold it, every slot (nothing
//! goes ahead of it). The head therefore starts no later than when the jobs that
//! were ahead of it end. It may start later than with strict first-come order
//! only when a backfilled job took slots that the head could have used had some,
//! not all, of the running jobs ended: the price of not knowing run times. Only
//! the first blocked job gets a reservation (EASY backfill); at most
//! [`MAX_TRIED`] jobs are tried per pass, as Slurm bounds its queue depth.

use crate::jobs::for_owner;
use qcg_jobprofile::profile::JobProfile;
use qcg_jobprofile::sched::{schedule, FreeSlots, Mapping, Strategy};
use qcg_jobprofile::topology::ResourceTopology;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Most waiting jobs tried in one pass.
pub const MAX_TRIED: usize = 256;
/// How long it takes a client's past usage to count half, by default.
pub const DEFAULT_HALF_LIFE: Duration = Duration::from_secs(24 * 3600);

/// Slots by (cluster, node).
pub type Slots = BTreeMap<(String, String), u32>;

/// A job waiting for slots.
#[derive(Clone, Copy, Debug)]
pub struct Waiting<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its client.
    pub owner: &'a str,
    /// What it needs.
    pub profile: &'a JobProfile,
    /// Its place in submission order.
    pub seq: u64,
}

/// A job to start now.
#[derive(Clone, Debug, PartialEq)]
pub struct Start {
    /// The job.
    pub id: String,
    /// Where its ranks go.
    pub mapping: Mapping,
    /// Whether it started ahead of a job it could have delayed (it then holds
    /// slots the next head's reservation must go around).
    pub backfilled: bool,
}

/// What the grid holds now.
#[derive(Clone, Debug, Default)]
pub struct Held {
    /// Slots held by every running job.
    pub used: Slots,
    /// Of those, slots held by jobs that were backfilled.
    pub backfilled: Slots,
    /// Slots held, by client.
    pub by_owner: BTreeMap<String, u32>,
}

/// Each client's recent usage: core-seconds, halved every `half_life`.
#[derive(Clone, Debug)]
pub struct Usage {
    half_life: Duration,
    by_owner: BTreeMap<String, (f64, Instant)>,
}

impl Default for Usage {
    fn default() -> Self {
        Usage::new(DEFAULT_HALF_LIFE)
    }
}

impl Usage {
    /// No usage yet; past usage counts half after `half_life`.
    pub fn new(half_life: Duration) -> Usage {
        Usage {
            half_life: half_life.max(Duration::from_secs(1)),
            by_owner: BTreeMap::new(),
        }
    }

    fn decayed(&self, value: f64, since: Instant, now: Instant) -> f64 {
        let age = now.saturating_duration_since(since).as_secs_f64();
        value * 0.5f64.powf(age / self.half_life.as_secs_f64())
    }

    /// Sets the half-life (at least a second).
    pub fn set_half_life(&mut self, half_life: Duration) {
        self.half_life = half_life.max(Duration::from_secs(1));
    }

    /// Adds `core_seconds` to `owner`'s usage at `now`.
    pub fn charge(&mut self, owner: &str, core_seconds: f64, now: Instant) {
        let (v, t) = self.by_owner.get(owner).copied().unwrap_or((0.0, now));
        let at = t.max(now);
        let v = self.decayed(v, t, at) + core_seconds;
        self.by_owner.insert(owner.to_string(), (v, at));
    }

    /// `owner`'s usage at `now`.
    pub fn get(&self, owner: &str, now: Instant) -> f64 {
        self.by_owner
            .get(owner)
            .map_or(0.0, |&(v, t)| self.decayed(v, t, now))
    }

    /// Forgets clients whose usage has decayed below one core-second.
    pub fn prune(&mut self, now: Instant) {
        let half_life = self.half_life;
        self.by_owner.retain(|_, (v, t)| {
            let age = now.saturating_duration_since(*t).as_secs_f64();
            *v * 0.5f64.powf(age / half_life.as_secs_f64()) >= 1.0
        });
    }
}

fn add(slots: &mut Slots, mapping: &Mapping) {
    for r in &mapping.ranks {
        *slots
            .entry((r.cluster.clone(), r.node.clone()))
            .or_default() += 1;
    }
}

/// Free slots of `topo` once `taken` are gone.
fn free_of(topo: &ResourceTopology, taken: &Slots) -> FreeSlots {
    crate::jobs::free_slots(topo, taken)
}

/// `slots` as the free slots of `topo` (at most each node's own).
fn only(topo: &ResourceTopology, slots: &Slots) -> FreeSlots {
    let counts = topo
        .clusters
        .iter()
        .map(|c| {
            c.nodes
                .iter()
                .map(|n| {
                    let k = (c.name.clone(), n.name.clone());
                    slots.get(&k).copied().unwrap_or(0).min(n.slots)
                })
                .collect()
        })
        .collect();
    FreeSlots::from_counts(topo, counts).unwrap_or_else(|_| FreeSlots::all(topo))
}

/// `a` less `b`, node by node.
fn minus(a: &Slots, b: &Slots) -> Slots {
    a.iter()
        .map(|(k, &n)| (k.clone(), n.saturating_sub(b.get(k).copied().unwrap_or(0))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The slots the head `profile` is promised (see the module doc).
fn reserve(
    profile: &JobProfile,
    mine: &ResourceTopology,
    topo: &ResourceTopology,
    used: &Slots,
    backfilled: &Slots,
) -> Slots {
    let mut r = Slots::new();
    let freeing = only(mine, &minus(used, backfilled));
    let around = free_of(mine, backfilled);
    for free in [freeing, around] {
        if let Ok(m) = schedule(profile, mine, &free, Strategy::Spread) {
            add(&mut r, &m);
            return r;
        }
    }
    for c in &topo.clusters {
        for n in &c.nodes {
            r.insert((c.name.clone(), n.name.clone()), n.slots);
        }
    }
    r
}

/// Which of `waiting` start now, in the order they were chosen (see the module
/// doc). `recent(owner)` is the client's recent usage (core-seconds, decayed).
pub fn decide(
    waiting: &[Waiting<'_>],
    topo: &ResourceTopology,
    held: &Held,
    recent: impl Fn(&str) -> f64,
) -> Vec<Start> {
    let mut used = held.used.clone();
    let mut by_owner = held.by_owner.clone();
    let usage: BTreeMap<&str, f64> = waiting.iter().map(|w| (w.owner, recent(w.owner))).collect();
    // Each client's jobs in submission order: the next job is always the first
    // left of some client, so a pick compares clients, not jobs.
    let mut left: BTreeMap<&str, std::collections::VecDeque<Waiting<'_>>> = BTreeMap::new();
    let mut sorted: Vec<Waiting<'_>> = waiting.to_vec();
    sorted.sort_by_key(|w| w.seq);
    for w in sorted {
        left.entry(w.owner).or_default().push_back(w);
    }
    // Slots promised to the head, added to `used` for everyone after it.
    let mut reserved: Option<Slots> = None;
    let mut starts = Vec::new();
    let mut tried = 0;
    while tried < MAX_TRIED {
        let key = |o: &str, w: &Waiting<'_>| {
            (
                by_owner.get(o).copied().unwrap_or(0),
                usage.get(o).copied().unwrap_or(0.0),
                w.seq,
            )
        };
        let best = left
            .iter()
            .filter_map(|(o, q)| Some((*o, key(o, q.front()?))))
            .min_by(|(_, a), (_, b)| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)))
            .map(|(o, _)| o);
        let Some(w) = best
            .and_then(|o| left.get_mut(o))
            .and_then(|q| q.pop_front())
        else {
            break;
        };
        tried += 1;
        let mine = for_owner(topo, w.owner);
        let mut taken = used.clone();
        if let Some(r) = &reserved {
            for (k, n) in r {
                *taken.entry(k.clone()).or_default() += n;
            }
        }
        let free = free_of(&mine, &taken);
        let fits = (free.total() >= w.profile.total_processes())
            .then(|| schedule(w.profile, &mine, &free, Strategy::Spread).ok())
            .flatten();
        match fits {
            Some(mapping) => {
                add(&mut used, &mapping);
                *by_owner.entry(w.owner.to_string()).or_default() += mapping.ranks.len() as u32;
                starts.push(Start {
                    id: w.id.to_string(),
                    mapping,
                    backfilled: reserved.is_some(),
                });
            }
            None if reserved.is_none() => {
                let r = reserve(w.profile, &mine, topo, &used, &held.backfilled);
                let mut promised = used.clone();
                for (k, n) in &r {
                    *promised.entry(k.clone()).or_default() += n;
                }
                if free_of(topo, &promised).total() == 0 {
                    // Nothing is left for anyone behind the head.
                    break;
                }
                reserved = Some(r);
            }
            None => {}
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_jobprofile::topology::{Cluster, LinkQuality, Node};

    /// One cluster `c` with a node `n{i}` of `slots[i]` slots each.
    fn grid(slots: &[u32]) -> ResourceTopology {
        ResourceTopology {
            clusters: vec![Cluster {
                name: "c".into(),
                nodes: slots
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| Node {
                        name: format!("n{i}"),
                        slots: s,
                        cpu_speed_mhz: 2000.0,
                        memory_mib: 4096.0,
                        submitters: None,
                    })
                    .collect(),
                internal: LinkQuality {
                    latency_ms: 0.1,
                    bandwidth_mbps: 1000.0,
                },
            }],
            links: vec![],
        }
    }

    fn profile(procs: u32) -> JobProfile {
        JobProfile::parse(&format!(
            r#"<grmsJob appId="t"><task taskId="t"><resourcesDescription><topology>
            <group groupId="g"><processes><processesCount><value>{procs}</value></processesCount></processes></group>
            </topology></resourcesDescription><execution type="x"><executable>/bin/true</executable></execution></task></grmsJob>"#
        ))
        .unwrap()
    }

    fn slots(pairs: &[(&str, u32)]) -> Slots {
        pairs
            .iter()
            .map(|(n, k)| (("c".to_string(), n.to_string()), *k))
            .collect()
    }

    fn held(used: &[(&str, u32)], backfilled: &[(&str, u32)], owners: &[(&str, u32)]) -> Held {
        Held {
            used: slots(used),
            backfilled: slots(backfilled),
            by_owner: owners.iter().map(|(o, n)| (o.to_string(), *n)).collect(),
        }
    }

    fn ids(starts: &[Start]) -> Vec<&str> {
        starts.iter().map(|s| s.id.as_str()).collect()
    }

    fn nodes(s: &Start) -> Vec<&str> {
        s.mapping.ranks.iter().map(|r| r.node.as_str()).collect()
    }

    /// Issue 21: carol's 30 queued 4-process jobs kept alice's 1-process job
    /// waiting over 90 s although it fitted the free node.
    #[test]
    fn a_fitting_job_of_another_client_does_not_wait_behind_a_backlog() {
        let t = grid(&[4, 2]);
        let (four, one) = (profile(4), profile(1));
        let names: Vec<String> = (0..30).map(|i| format!("carol-{i}")).collect();
        let mut waiting: Vec<Waiting<'_>> = names
            .iter()
            .enumerate()
            .map(|(i, id)| Waiting {
                id,
                owner: "carol",
                profile: &four,
                seq: i as u64 + 1,
            })
            .collect();
        waiting.push(Waiting {
            id: "alice",
            owner: "alice",
            profile: &one,
            seq: 100,
        });
        // Carol's first job holds n0; her next needs 4 slots, 2 are free.
        let h = held(&[("n0", 4)], &[], &[("carol", 4)]);
        let starts = decide(&waiting, &t, &h, |_| 0.0);
        assert_eq!(ids(&starts), ["alice"]);
        assert_eq!(nodes(&starts[0]), ["n1"]);
        // Even when alice used the grid more than carol lately: backfill.
        let starts = decide(&waiting, &t, &held(&[("n0", 4)], &[], &[]), |o| {
            if o == "alice" {
                1e6
            } else {
                0.0
            }
        });
        assert_eq!(ids(&starts), ["alice"]);
        assert!(starts[0].backfilled);
    }

    #[test]
    fn a_job_that_would_take_the_heads_slots_waits() {
        // n0: 2 of 4 held by a running job; n1: 2 free. The head needs 6: all
        // the slots, including the free ones, so nothing may go ahead of it.
        let t = grid(&[4, 2]);
        let (six, one) = (profile(6), profile(1));
        let w = [
            Waiting {
                id: "head",
                owner: "carol",
                profile: &six,
                seq: 1,
            },
            Waiting {
                id: "small",
                owner: "carol",
                profile: &one,
                seq: 2,
            },
        ];
        let h = held(&[("n0", 2)], &[], &[("carol", 2)]);
        assert!(decide(&w, &t, &h, |_| 0.0).is_empty());
        // A head of 3 fits in the running job's 4 slots once they are free: the
        // free ones stay open, and a job of 2 starts there.
        let (three, two) = (profile(3), profile(2));
        let w = [
            Waiting {
                id: "head",
                owner: "carol",
                profile: &three,
                seq: 1,
            },
            Waiting {
                id: "small",
                owner: "carol",
                profile: &two,
                seq: 2,
            },
        ];
        let h = held(&[("n0", 4)], &[], &[("carol", 4)]);
        let starts = decide(&w, &t, &h, |_| 0.0);
        assert_eq!(ids(&starts), ["small"]);
        assert!(starts[0].backfilled);
        // With nothing waiting ahead, jobs start in submission order, not backfilled.
        let h = held(&[], &[], &[]);
        let starts = decide(&w, &t, &h, |_| 0.0);
        assert_eq!(ids(&starts), ["head", "small"]);
        assert!(starts.iter().all(|s| !s.backfilled));
    }

    #[test]
    fn the_heads_reservation_goes_around_backfilled_jobs() {
        // n1's 2 slots are held by a backfilled job that may run for ever; n0's
        // 4 by an ordinary one. The head (4) is promised n0, and n2 stays open.
        let t = grid(&[4, 2, 2]);
        let (four, two) = (profile(4), profile(2));
        let w = [
            Waiting {
                id: "head",
                owner: "carol",
                profile: &four,
                seq: 1,
            },
            Waiting {
                id: "b",
                owner: "carol",
                profile: &two,
                seq: 2,
            },
        ];
        let h = held(&[("n0", 4), ("n1", 2)], &[("n1", 2)], &[("carol", 6)]);
        let starts = decide(&w, &t, &h, |_| 0.0);
        assert_eq!(ids(&starts), ["b"]);
        assert_eq!(nodes(&starts[0]), ["n2", "n2"]);
        // Now the ordinary job holds only 3 of n0: the head cannot fit in what
        // will come free unless it takes n2 as well, so b may not.
        let h = held(&[("n0", 3), ("n1", 2)], &[("n1", 2)], &[("carol", 5)]);
        let starts = decide(&w, &t, &h, |_| 0.0);
        assert!(starts.is_empty(), "{starts:?}");
    }

    #[test]
    fn free_slots_go_to_clients_in_turn_then_by_recent_usage() {
        let t = grid(&[4]);
        let one = profile(1);
        let w: Vec<Waiting<'_>> = [
            ("a1", "alice", 1),
            ("a2", "alice", 2),
            ("a3", "alice", 3),
            ("b1", "bob", 4),
            ("b2", "bob", 5),
            ("b3", "bob", 6),
            ("c1", "carol", 7),
        ]
        .iter()
        .map(|&(id, owner, seq)| Waiting {
            id,
            owner,
            profile: &one,
            seq,
        })
        .collect();
        // Bob used the grid less lately, carol not at all: carol, bob, alice, bob.
        let usage = |o: &str| match o {
            "alice" => 500.0,
            "bob" => 100.0,
            _ => 0.0,
        };
        let starts = decide(&w, &t, &held(&[], &[], &[]), usage);
        assert_eq!(ids(&starts), ["c1", "b1", "a1", "b2"]);
        // What a client holds now counts before its past.
        let t = grid(&[4, 1]);
        let starts = decide(&w, &t, &held(&[("n0", 4)], &[], &[("carol", 4)]), usage);
        assert_eq!(ids(&starts), ["b1"]);
    }

    #[test]
    fn usage_halves_every_half_life() {
        let now = Instant::now();
        let h = Duration::from_secs(100);
        let mut u = Usage::new(h);
        u.charge("alice", 80.0, now);
        assert_eq!(u.get("alice", now), 80.0);
        assert!((u.get("alice", now + h) - 40.0).abs() < 1e-9);
        u.charge("alice", 10.0, now + h);
        assert!((u.get("alice", now + 2 * h) - 25.0).abs() < 1e-9);
        assert_eq!(u.get("bob", now), 0.0);
        u.prune(now + 20 * h);
        assert_eq!(u.get("alice", now + 20 * h), 0.0);
    }
}
