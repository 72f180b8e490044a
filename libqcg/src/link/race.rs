//! When each attempt of a plan starts. The attempts race, as Happy Eyeballs (RFC 8305)
//! races addresses: the first starts at once, each next one [`STAGGER`] after the
//! previous start, or at once when every attempt started so far has failed. A plan
//! whose first technique the cluster's config wrongly promises (a firewall that drops,
//! announced open) then costs a stagger, not a connect time-out.
//!
//! Two techniques dial from our listener's port (punched, traversed): two of them
//! toward one address at once would need the same 4-tuple, so they never overlap;
//! the attempts behind a waiting one (a relay) do not wait with it.
//!
//! Pure: the caller runs the attempts and reports their ends.

use qcg_wire::Technique;
use std::time::{Duration, Instant};

/// Delay between two starts (RFC 8305 recommends 250 ms).
pub(crate) const STAGGER: Duration = Duration::from_millis(250);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    Running,
    Failed,
}

/// The attempts of one plan, in plan order.
pub(crate) struct Race {
    techniques: Vec<Technique>,
    state: Vec<State>,
    last_start: Option<Instant>,
}

fn from_our_port(t: Technique) -> bool {
    matches!(t, Technique::Punched | Technique::Traversed)
}

impl Race {
    pub(crate) fn new(techniques: Vec<Technique>) -> Race {
        let state = vec![State::Waiting; techniques.len()];
        Race {
            techniques,
            state,
            last_start: None,
        }
    }

    /// The first waiting attempt that may run beside the running ones: one that
    /// dials from our port waits while another does, and the attempts behind it go
    /// first.
    fn candidate(&self) -> Option<usize> {
        let busy = (0..self.state.len())
            .any(|j| self.state[j] == State::Running && from_our_port(self.techniques[j]));
        (0..self.state.len()).find(|&i| {
            self.state[i] == State::Waiting && !(busy && from_our_port(self.techniques[i]))
        })
    }

    /// The attempt to start now, if one is due; it counts as started.
    pub(crate) fn start(&mut self, now: Instant) -> Option<usize> {
        let i = self.candidate()?;
        let running = self.state.contains(&State::Running);
        let due = !running || self.last_start.is_none_or(|t| now >= t + STAGGER);
        if !due {
            return None;
        }
        self.state[i] = State::Running;
        self.last_start = Some(now);
        Some(i)
    }

    /// When [`Race::start`] may give an attempt next, while one could start; `None`
    /// when only an end can let one start (or none waits).
    pub(crate) fn next_check(&self) -> Option<Instant> {
        self.candidate()?;
        self.last_start.map(|t| t + STAGGER)
    }

    /// Attempt `i` failed.
    pub(crate) fn failed(&mut self, i: usize) {
        self.state[i] = State::Failed;
    }

    /// Whether every attempt failed.
    pub(crate) fn lost(&self) -> bool {
        self.state.iter().all(|&s| s == State::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Technique::*;

    #[test]
    fn attempts_start_a_stagger_apart_or_at_once_after_a_failure() {
        let t0 = Instant::now();
        let mut r = Race::new(vec![Direct, Reversed, Relayed]);
        assert_eq!(r.start(t0), Some(0));
        assert_eq!(r.start(t0), None);
        assert_eq!(r.next_check(), Some(t0 + STAGGER));
        assert_eq!(r.start(t0 + STAGGER / 2), None);
        // The first still runs (a dropped SYN): the second starts after the stagger.
        assert_eq!(r.start(t0 + STAGGER), Some(1));
        // Both fail quickly: the third starts at once.
        let t1 = t0 + STAGGER + Duration::from_millis(10);
        r.failed(0);
        assert_eq!(r.start(t1), None);
        r.failed(1);
        assert_eq!(r.start(t1), Some(2));
        assert_eq!(r.start(t1 + STAGGER * 10), None);
        assert_eq!(r.next_check(), None);
        assert!(!r.lost());
        r.failed(2);
        assert!(r.lost());
    }

    #[test]
    fn two_attempts_from_our_port_never_overlap_and_the_relay_does_not_wait_for_them() {
        let t0 = Instant::now();
        let mut r = Race::new(vec![Traversed, Punched, Relayed]);
        assert_eq!(r.start(t0), Some(0));
        // Punched waits for the traversal to end; the relay goes past it.
        assert_eq!(r.start(t0 + STAGGER), Some(2));
        assert_eq!(r.start(t0 + STAGGER * 4), None);
        assert_eq!(r.next_check(), None);
        r.failed(0);
        assert_eq!(r.start(t0 + STAGGER * 4), Some(1));
        assert_eq!(r.start(t0 + STAGGER * 5), None);
    }

    #[test]
    fn an_empty_plan_is_lost_from_the_start() {
        let mut r = Race::new(vec![]);
        assert_eq!(r.start(Instant::now()), None);
        assert!(r.lost());
    }
}
