//! Placement of a group's processes on the nodes of one cluster, following
//! P2P-MPI's two strategies.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::Strategy;

/// Places `k` processes on `eligible` nodes of one cluster.
///
/// `free[i]` is the free slot count of node `i` and is decremented;
/// `slots[i]` its total slots. Returns the node of each process in rank
/// order, or `None` (leaving `free` untouched) when there is not enough room.
///
/// * `Spread` gives each process to the eligible node with the fewest used
///   slots (ties: lowest index), which amounts to round-robin over the nodes.
/// * `Concentrate` fills eligible nodes in index order.
pub(crate) fn place(
    free: &mut [u32],
    slots: &[u32],
    eligible: &[usize],
    k: u32,
    strategy: Strategy,
) -> Option<Vec<usize>> {
    let room: u64 = eligible.iter().map(|&i| u64::from(free[i])).sum();
    if room < u64::from(k) {
        return None;
    }
    let mut seq = Vec::with_capacity(k as usize);
    match strategy {
        Strategy::Concentrate => {
            let mut left = k;
            for &i in eligible {
                if left == 0 {
                    break;
                }
                let take = free[i].min(left);
                free[i] -= take;
                left -= take;
                seq.extend(std::iter::repeat_n(i, take as usize));
            }
        }
        Strategy::Spread => {
            let mut heap: BinaryHeap<Reverse<(u32, usize)>> = eligible
                .iter()
                .filter(|&&i| free[i] > 0)
                .map(|&i| Reverse((slots[i].saturating_sub(free[i]), i)))
                .collect();
            while seq.len() < k as usize {
                let Reverse((used, i)) = heap.pop()?;
                free[i] -= 1;
                seq.push(i);
                if free[i] > 0 {
                    heap.push(Reverse((used + 1, i)));
                }
            }
        }
    }
    Some(seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_goes_round_robin_fewest_used_first() {
        let mut free = vec![2, 4, 4, 4];
        let slots = vec![4, 4, 4, 4];
        let seq = place(&mut free, &slots, &[0, 1, 2, 3], 7, Strategy::Spread).unwrap();
        // node 0 already has 2 used slots, so it comes last
        assert_eq!(seq, [1, 2, 3, 1, 2, 3, 0]);
        assert_eq!(free, [1, 2, 2, 2]);
    }

    #[test]
    fn concentrate_fills_nodes_in_order() {
        let mut free = vec![2, 4, 4];
        let slots = vec![4, 4, 4];
        let seq = place(&mut free, &slots, &[0, 1, 2], 5, Strategy::Concentrate).unwrap();
        assert_eq!(seq, [0, 0, 1, 1, 1]);
        assert_eq!(free, [0, 1, 4]);
    }

    #[test]
    fn not_enough_room_leaves_state_alone() {
        let mut free = vec![1, 1];
        let slots = vec![1, 1];
        assert!(place(&mut free, &slots, &[0], 2, Strategy::Spread).is_none());
        assert!(place(&mut free, &slots, &[0, 1], 3, Strategy::Concentrate).is_none());
        assert_eq!(free, [1, 1]);
    }
}
