//! The frontal's cache of broker answers: one slot per target process, filled by the
//! first lookup and shared by every later one from this cluster, so concurrent
//! lookups of the same target reach the broker once.

use qcg_proto::{LocalUser, Plan, ProcName};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A slot: `None` until a plan is known; with the plan, the user the broker gave
/// it to, when the lookup named one ([`qcg_proto::LocalUser`]).
pub type Slot = Arc<tokio::sync::Mutex<Option<(Plan, Option<LocalUser>)>>>;

/// Cached plans by target.
#[derive(Default)]
pub struct PlanCache {
    slots: Mutex<HashMap<ProcName, Slot>>,
}

impl PlanCache {
    /// The slot for `target` (created empty if needed).
    pub fn slot(&self, target: &ProcName) -> Slot {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(target.clone())
            .or_default()
            .clone()
    }

    /// Forgets what is known of a job, or of one of its ranks.
    pub fn invalidate(&self, job: &str, rank: Option<u32>) -> usize {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let before = slots.len();
        slots.retain(|p, _| !(p.job == job && rank.is_none_or(|r| r == p.rank)));
        before - slots.len()
    }

    /// Number of targets with a slot.
    pub fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalidation_by_job_and_rank() {
        let c = PlanCache::default();
        for (j, r) in [("a", 0), ("a", 1), ("b", 0)] {
            c.slot(&ProcName::new(j, r));
        }
        assert_eq!(c.invalidate("a", Some(1)), 1);
        assert_eq!(c.invalidate("a", None), 1);
        assert_eq!(c.len(), 1);
    }
}
