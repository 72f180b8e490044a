//! The job's process groups, as its JobProfile declared them, and per-group views
//! of a [`Comm`] so that a program can follow the grid's hierarchy (QCG-OMPI's
//! two-dimensional group arrays).
//!
//! Ranks are numbered group by group: the first group holds ranks `0..n0`, the next
//! `n0..n0+n1`, and so on ([`crate::env::ENV_GROUPS`]). A job started by `qcg run`
//! has one group, `all`. [`GroupViews::new`] gives each rank, in one call:
//!
//! * `local`: its own group, where the group's first process (index 0) is the
//!   group's *boss*;
//! * `leaders`: for bosses only, the communicator of all bosses, indexed by group.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let comm = qcg::init()?;
//! let views = qcg::groups::GroupViews::new(&comm)?;
//! println!("rank {} is {} of group {}", comm.rank(), views.local.rank(), views.name());
//! if let Some(leaders) = &views.leaders {
//!     // One message per group: the bosses talk among themselves.
//!     if leaders.rank() == 0 {
//!         for g in 1..leaders.size() {
//!             leaders.send(g, 1, b"work")?;
//!         }
//!     } else {
//!         leaders.recv(Some(0), 1)?;
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! A [`GroupComm`] sends over the job's [`Comm::send`]/[`Comm::recv`]; its tags
//! (below 2^24) are mapped into a band of tags of their own, `0xC000_0000` and up,
//! one sub-band per view, so that messages of different views and of the plain
//! `Comm` never match each other.

use crate::env::groups_from_env;
use crate::{Comm, Message};
use std::time::Duration;

/// Highest tag a [`GroupComm`] accepts, plus one.
pub const TAG_LIMIT: u32 = 1 << 24;
const TAG_BAND: u32 = 0xC000_0000;

/// What can go wrong with groups.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// A libqcg error.
    #[error(transparent)]
    Qcg(#[from] crate::Error),
    /// A tag at or above [`TAG_LIMIT`].
    #[error("group tag {0} is too large: group communicators take tags below 2^24")]
    Tag(u32),
    /// A group-local rank outside the group.
    #[error("rank {rank} is not in this group of {size}")]
    Rank {
        /// The rank.
        rank: u32,
        /// The group's size.
        size: u32,
    },
    /// A message from a rank outside the group (a bug in the program's tags).
    #[error("a message of this group came from rank {0}, which is not in it")]
    Stranger(u32),
}

/// The job's groups, in rank order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Groups {
    groups: Vec<(String, u32)>,
    starts: Vec<u32>,
}

impl Groups {
    /// Groups (name, size) in rank order.
    pub fn new(groups: Vec<(String, u32)>) -> Groups {
        let mut starts = Vec::with_capacity(groups.len());
        let mut at = 0u32;
        for (_, n) in &groups {
            starts.push(at);
            at = at.saturating_add(*n);
        }
        Groups { groups, starts }
    }

    /// The groups of this process's job, from its environment.
    pub fn from_env(size: u32) -> crate::Result<Groups> {
        Ok(Groups::new(groups_from_env(size)?))
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Name of group `g`.
    pub fn name(&self, g: usize) -> &str {
        self.groups.get(g).map_or("", |(n, _)| n.as_str())
    }

    /// Size of group `g`.
    pub fn size(&self, g: usize) -> u32 {
        self.groups.get(g).map_or(0, |(_, n)| *n)
    }

    /// The global ranks of group `g`.
    pub fn ranks(&self, g: usize) -> std::ops::Range<u32> {
        let start = self.starts.get(g).copied().unwrap_or(0);
        start..start + self.size(g)
    }

    /// Index of the group named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|(n, _)| n == name)
    }

    /// The group of global rank `rank` and its index inside the group.
    pub fn locate(&self, rank: u32) -> Option<(usize, u32)> {
        (0..self.len())
            .find(|&g| self.ranks(g).contains(&rank))
            .map(|g| (g, rank - self.ranks(g).start))
    }
}

/// A view of some ranks of a [`Comm`], numbered `0..size` in the view.
pub struct GroupComm<'a> {
    comm: &'a Comm,
    members: Vec<u32>,
    me: u32,
    band: u32,
}

impl std::fmt::Debug for GroupComm<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupComm")
            .field("rank", &self.me)
            .field("members", &self.members)
            .finish()
    }
}

impl<'a> GroupComm<'a> {
    /// A view of `members` (global ranks, in view order, including this process) of
    /// `comm`, using tag sub-band `band` (0..64; views that share members need
    /// different bands).
    pub fn new(comm: &'a Comm, members: Vec<u32>, band: u8) -> Option<GroupComm<'a>> {
        let me = members.iter().position(|&r| r == comm.rank())? as u32;
        Some(GroupComm {
            comm,
            members,
            me,
            band: TAG_BAND | (u32::from(band & 0x3f) << 24),
        })
    }

    /// This process's rank in the view.
    pub fn rank(&self) -> u32 {
        self.me
    }

    /// Number of processes in the view.
    pub fn size(&self) -> u32 {
        self.members.len() as u32
    }

    /// The global rank of view rank `r`.
    pub fn global(&self, r: u32) -> Option<u32> {
        self.members.get(r as usize).copied()
    }

    /// The view rank of global rank `g`.
    pub fn local(&self, g: u32) -> Option<u32> {
        self.members.iter().position(|&m| m == g).map(|p| p as u32)
    }

    fn tag(&self, tag: u32) -> Result<u32, GroupError> {
        if tag >= TAG_LIMIT {
            return Err(GroupError::Tag(tag));
        }
        Ok(self.band | tag)
    }

    fn to_global(&self, r: u32) -> Result<u32, GroupError> {
        self.global(r).ok_or(GroupError::Rank {
            rank: r,
            size: self.size(),
        })
    }

    fn translate(&self, m: Message) -> Result<Message, GroupError> {
        let source = self.local(m.source).ok_or(GroupError::Stranger(m.source))?;
        Ok(Message {
            source,
            tag: m.tag & (TAG_LIMIT - 1),
            data: m.data,
        })
    }

    /// Sends `data` to view rank `dest`.
    pub fn send(&self, dest: u32, tag: u32, data: &[u8]) -> Result<(), GroupError> {
        let t = self.tag(tag)?;
        Ok(self.comm.send(self.to_global(dest)?, t, data)?)
    }

    /// Receives a message with `tag` from view rank `source` (any member when
    /// `None`); the message's source is a view rank.
    pub fn recv(&self, source: Option<u32>, tag: u32) -> Result<Message, GroupError> {
        let t = self.tag(tag)?;
        let s = source.map(|s| self.to_global(s)).transpose()?;
        let m = self.comm.recv(s, Some(t))?;
        self.translate(m)
    }

    /// Like [`GroupComm::recv`], giving up after `timeout`.
    pub fn recv_timeout(
        &self,
        source: Option<u32>,
        tag: u32,
        timeout: Duration,
    ) -> Result<Message, GroupError> {
        let t = self.tag(tag)?;
        let s = source.map(|s| self.to_global(s)).transpose()?;
        let m = self.comm.recv_timeout(s, Some(t), timeout)?;
        self.translate(m)
    }
}

/// Every view a rank needs to follow the job's group hierarchy.
#[derive(Debug)]
pub struct GroupViews<'a> {
    /// The job's groups.
    pub groups: Groups,
    /// This process's group (index into `groups`).
    pub group: usize,
    /// This process's group; its rank 0 is the group's boss.
    pub local: GroupComm<'a>,
    /// The bosses of all groups, view rank = group index; `None` unless this process
    /// is a boss.
    pub leaders: Option<GroupComm<'a>>,
}

impl<'a> GroupViews<'a> {
    /// The views of `comm`'s process, from the job's groups (its environment).
    pub fn new(comm: &'a Comm) -> Result<GroupViews<'a>, GroupError> {
        let groups = Groups::from_env(comm.size())?;
        Ok(GroupViews::with_groups(comm, groups)?)
    }

    /// The views of `comm`'s process for the given groups.
    pub fn with_groups(comm: &'a Comm, groups: Groups) -> crate::Result<GroupViews<'a>> {
        let (group, _) = groups
            .locate(comm.rank())
            .ok_or(crate::Error::InvalidRank {
                rank: comm.rank(),
                size: groups.ranks(groups.len().saturating_sub(1)).end,
            })?;
        let local = GroupComm::new(comm, groups.ranks(group).collect(), 0).ok_or(
            crate::Error::InvalidRank {
                rank: comm.rank(),
                size: comm.size(),
            },
        )?;
        let bosses: Vec<u32> = (0..groups.len()).map(|g| groups.ranks(g).start).collect();
        let leaders = GroupComm::new(comm, bosses, 1);
        Ok(GroupViews {
            groups,
            group,
            local,
            leaders,
        })
    }

    /// The name of this process's group.
    pub fn name(&self) -> &str {
        self.groups.name(self.group)
    }

    /// Whether this process is its group's boss.
    pub fn is_boss(&self) -> bool {
        self.local.rank() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_locate_ranks_in_blocks() {
        let g = Groups::new(vec![("m".into(), 1), ("a".into(), 3), ("b".into(), 2)]);
        assert_eq!(g.ranks(1), 1..4);
        assert_eq!(g.locate(0), Some((0, 0)));
        assert_eq!(g.locate(3), Some((1, 2)));
        assert_eq!(g.locate(5), Some((2, 1)));
        assert_eq!(g.locate(6), None);
        assert_eq!(g.find("b"), Some(2));
        assert_eq!(g.name(9), "");
    }

    #[test]
    fn the_environment_value_must_match_the_job_size() {
        let g = crate::env::parse_groups("m:1,w:3", 4).unwrap();
        assert_eq!(g[1], ("w".to_string(), 3));
        let e = crate::env::parse_groups("m:1,w:3", 5).unwrap_err();
        assert!(
            e.to_string().contains("4 processes but the job has 5"),
            "{e}"
        );
        assert!(crate::env::parse_groups("m:x", 1).is_err());
    }
}
