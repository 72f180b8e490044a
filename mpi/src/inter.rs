//! Intercommunicators (MPI 3.1 §6.6), the decisions both sides must take alike
//! without a message: the order of the union of the two groups, the keys of the
//! contexts made for them, the order of `MPI_Intercomm_merge`'s result, and what a
//! collective's root argument means. Pure: `ffi::inter` does the messages.
//!
//! An intercommunicator keeps its local group's intracommunicator (size, rank,
//! group and the local halves of collectives) and two views of the remote group
//! over the job's communicator (see `qcg::Comm::peers`): one for the program's
//! point-to-point messages, whose ranks are remote ranks, so that every
//! point-to-point call works unchanged, and one for this layer's collectives,
//! in a context no user message meets.

/// Which group of the pair comes first in the union: the one holding the lowest
/// job rank. `true` when it is the local group.
pub fn local_first(local: &[u32], remote: &[u32]) -> bool {
    let lo = |g: &[u32]| g.iter().copied().min().unwrap_or(u32::MAX);
    lo(local) < lo(remote)
}

/// The union of both groups (job ranks) in an order both sides derive alike: the
/// first group (see [`local_first`]) in its rank order, then the other.
pub fn union(local: &[u32], remote: &[u32]) -> Vec<u32> {
    let (a, b) = if local_first(local, remote) {
        (local, remote)
    } else {
        (remote, local)
    };
    a.iter().chain(b).copied().collect()
}

/// The members of `MPI_Intercomm_merge`'s result in rank order: the group that
/// passed `high = false` first; when both passed the same value, the union's order.
pub fn merge_order(local: &[u32], remote: &[u32], local_high: bool, remote_high: bool) -> Vec<u32> {
    if local_high == remote_high {
        return union(local, remote);
    }
    let (a, b) = if local_high {
        (remote, local)
    } else {
        (local, remote)
    };
    a.iter().chain(b).copied().collect()
}

/// The seed of an intercommunicator made by `MPI_Intercomm_create` with `tag`,
/// from how many intercommunicators each group had made before (`n_local`,
/// `n_remote`): both sides order the counts by [`local_first`]. The top bit keeps
/// the keys apart from `MPI_Comm_create_group`'s (whose tags stay below 2^30).
pub fn create_seed(tag: i32, first_count: u32, second_count: u32) -> u64 {
    mix(&[0x1c_0000, tag as u32, first_count, second_count]) | 1 << 63
}

/// What a context of an intercommunicator is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// The program's point-to-point messages.
    User = 1,
    /// This layer's collectives across the two groups.
    Coll = 2,
    /// The new local intracommunicator.
    Local = 3,
    /// `MPI_Intercomm_merge`'s result.
    Merge = 4,
}

/// The `subset` key of context `u` of the intercommunicator with `seed`.
pub fn key(seed: u64, u: Use) -> u64 {
    mix(&[seed as u32, (seed >> 32) as u32, u as u32]) | 1 << 63
}

/// The seed of the `n`-th communicator made from the intercommunicator with
/// `seed` (dup, merge): both sides count their calls alike, as MPI orders the
/// collective calls on one communicator.
pub fn derived_seed(seed: u64, n: u32) -> u64 {
    mix(&[seed as u32, (seed >> 32) as u32, 0xd0_0000, n]) | 1 << 63
}

/// FNV-1a (64 bits) of `words`.
fn mix(words: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in words.iter().flat_map(|w| w.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The remote half of `MPI_Comm_split` on an intercommunicator (MPI 3.1 §6.4.2)
/// for a process of `color`: the remote members (`remote`, job ranks in remote
/// rank order) that passed it, ranked as their own split ranks them, by (key,
/// remote rank). `colors_keys` holds each remote rank's (color, key), keys mapped
/// to unsigned in the same order.
pub fn split_members(remote: &[u32], colors_keys: &[(u32, u32)], color: u32) -> Vec<u32> {
    let mut picked: Vec<(u32, usize)> = colors_keys
        .iter()
        .enumerate()
        .filter(|(_, &(c, _))| c == color)
        .map(|(r, &(_, k))| (k, r))
        .collect();
    picked.sort_unstable();
    picked
        .into_iter()
        .filter_map(|(_, r)| remote.get(r).copied())
        .collect()
}

/// `MPI_ROOT`.
pub const ROOT: i32 = -3;

/// What a collective with a root asks of this process on an intercommunicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The root (`MPI_ROOT`).
    Root,
    /// Another process of the root's group (`MPI_PROC_NULL`): takes no part.
    Idle,
    /// A process of the other group; the root is this remote rank.
    Leaf(u32),
}

/// The role a root argument gives on an intercommunicator with `remote` ranks on
/// the other side; `None` if it is none of `MPI_ROOT`, `MPI_PROC_NULL` or a remote
/// rank.
pub fn role(root: i32, remote: usize) -> Option<Role> {
    match root {
        ROOT => Some(Role::Root),
        crate::state::PROC_NULL => Some(Role::Idle),
        r => usize::try_from(r)
            .ok()
            .filter(|&r| r < remote)
            .map(|r| Role::Leaf(r as u32)),
    }
}

/// `MPI_Comm_compare` for two intercommunicators from the comparisons of their
/// local and remote groups: the weaker of the two.
pub fn compare_pair(local: i32, remote: i32) -> i32 {
    local.max(remote)
}

/// Job ranks as little-endian bytes (messages between the leaders).
pub fn to_bytes(xs: &[u32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`to_bytes`] (a trailing partial word is dropped).
pub fn from_bytes(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn union_puts_the_group_with_the_lowest_job_rank_first() {
        assert_eq!(union(&[1, 3], &[0, 2]), vec![0, 2, 1, 3]);
        assert_eq!(union(&[0, 2], &[1, 3]), vec![0, 2, 1, 3]);
        assert_eq!(union(&[3, 0], &[2]), vec![3, 0, 2]);
        assert!(local_first(&[5, 1], &[2, 3]));
        assert!(!local_first(&[], &[2, 3]));
    }

    #[test]
    fn merge_puts_low_first_and_keeps_local_order() {
        assert_eq!(merge_order(&[1, 3], &[0, 2], false, true), vec![1, 3, 0, 2]);
        assert_eq!(merge_order(&[1, 3], &[0, 2], true, false), vec![0, 2, 1, 3]);
        assert_eq!(merge_order(&[1, 3], &[0, 2], true, true), vec![0, 2, 1, 3]);
        assert_eq!(
            merge_order(&[1, 3], &[0, 2], false, false),
            vec![0, 2, 1, 3]
        );
    }

    #[test]
    fn roots_are_read_as_the_standard_says() {
        assert_eq!(role(ROOT, 2), Some(Role::Root));
        assert_eq!(role(-1, 2), Some(Role::Idle));
        assert_eq!(role(1, 2), Some(Role::Leaf(1)));
        assert_eq!(role(2, 2), None);
        assert_eq!(role(-2, 2), None);
    }

    #[test]
    fn keys_differ_per_use_and_per_derived_communicator() {
        let s = create_seed(7, 0, 0);
        assert_ne!(s, create_seed(7, 1, 0));
        assert_ne!(s, create_seed(8, 0, 0));
        assert_ne!(s, create_seed(7, 0, 1));
        let uses = [Use::User, Use::Coll, Use::Local, Use::Merge];
        let mut keys: Vec<u64> = uses.iter().map(|&u| key(s, u)).collect();
        keys.extend(uses.iter().map(|&u| key(derived_seed(s, 0), u)));
        keys.extend(uses.iter().map(|&u| key(derived_seed(s, 1), u)));
        let n = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), n);
        assert!(keys.iter().all(|k| k >> 63 == 1));
    }

    #[test]
    fn split_ranks_the_remote_members_of_a_color_by_key_then_rank() {
        let remote = [10, 11, 12, 13];
        let ck = [(0, 5), (1, 0), (0, 1), (0, 5)];
        assert_eq!(split_members(&remote, &ck, 0), vec![12, 10, 13]);
        assert_eq!(split_members(&remote, &ck, 1), vec![11]);
        assert!(split_members(&remote, &ck, 2).is_empty());
    }

    #[test]
    fn ranks_round_trip_as_bytes() {
        assert_eq!(
            from_bytes(&to_bytes(&[0, 7, u32::MAX])),
            vec![0, 7, u32::MAX]
        );
    }

    /// Two nonempty groups splitting the job ranks `0..n` at random.
    fn groups() -> impl Strategy<Value = (Vec<u32>, Vec<u32>)> {
        (2u32..12).prop_flat_map(|n| {
            (Just((0..n).collect::<Vec<u32>>()).prop_shuffle(), 1..n)
                .prop_map(|(all, k)| (all[..k as usize].to_vec(), all[k as usize..].to_vec()))
        })
    }

    proptest! {
        /// Both sides derive the same union and merge order, each group kept in
        /// its own rank order.
        #[test]
        fn both_sides_agree((a, b) in groups(), ha: bool, hb: bool) {
            let u = union(&a, &b);
            prop_assert_eq!(&u, &union(&b, &a));
            prop_assert_eq!(u.len(), a.len() + b.len());
            prop_assert_eq!(merge_order(&a, &b, ha, hb), merge_order(&b, &a, hb, ha));
            let m = merge_order(&a, &b, ha, hb);
            let pos = |x: u32| m.iter().position(|&y| y == x).unwrap();
            for g in [&a, &b] {
                for w in g.windows(2) {
                    prop_assert!(pos(w[0]) < pos(w[1]));
                }
            }
            if ha != hb {
                let low = if ha { &b } else { &a };
                prop_assert_eq!(&m[..low.len()], &low[..]);
            }
        }
    }
}
