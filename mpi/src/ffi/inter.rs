//! The C ABI of intercommunicators (MPI 3.1 §6.6): create, merge, remote size and
//! group, test_inter, and what dup, compare and the collectives do on one (the
//! collectives' entry points call [`of`] and come here for an intercommunicator).
//! The decisions both sides take alike are in [`crate::inter`]; point-to-point
//! calls need nothing here (their communicator's ranks are the remote group's).
//!
//! Collectives follow MPI 3.1 §5.2.2: the root's group passes `MPI_ROOT` (the
//! root) or `MPI_PROC_NULL` (the others), the other group the root's remote rank.
//! They are built from the local group's collectives and messages across in a
//! context of this layer's own ([`Remote::coll`]), each call kind with its tag.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::coll::{at, at_mut, checked_reduction, combiner, local_ctx, ty, Ctx};
use super::{call, in_bytes, put, write_packed};
use crate::error::{Class, MpiError};
use crate::inter::{self as pure, Role, Use};
use crate::state::{self, count, Remote, COMM_WORLD};
use libc::{c_int, c_void};
use std::sync::Arc;

const TAG_BARRIER: u32 = 1;
const TAG_BCAST: u32 = 2;
const TAG_REDUCE: u32 = 3;
const TAG_ALLREDUCE: u32 = 4;
const TAG_GATHER: u32 = 5;
const TAG_SCATTER: u32 = 6;
const TAG_ALLGATHER: u32 = 7;
const TAG_ALLTOALL: u32 = 8;
const TAG_REDUCE_SCATTER: u32 = 9;
const TAG_MERGE: u32 = 10;
const TAG_SPLIT: u32 = 11;
const TAG_CREATE: u32 = 12;
const TAG_ALLTOALLW: u32 = 13;

/// An intercommunicator as its collectives see it.
pub(super) struct Inter {
    /// The local group.
    local: Ctx,
    /// This layer's messages to the remote group (ranks are remote ranks).
    coll: Arc<qcg::Comm>,
    /// The remote group's job ranks.
    remote: Vec<u32>,
}

impl Inter {
    fn q(&self) -> usize {
        self.remote.len()
    }

    /// A message of `len` bytes from remote rank `src` with `tag`, waiting at most
    /// the collective timeout; another size or no message is named.
    fn recv(&self, op: &str, src: u32, tag: u32, len: usize) -> Result<Vec<u8>, MpiError> {
        let t = self.local.comm.coll_options().timeout;
        match self.coll.recv_timeout(Some(src), Some(tag), t) {
            Ok(m) if m.data.len() == len => Ok(m.data),
            Ok(m) => Err(MpiError::new(
                if m.data.len() > len {
                    Class::Truncate
                } else {
                    Class::Count
                },
                format!(
                    "{op}: remote rank {src} sent {} bytes where this rank expects {len}: the groups' counts do not match",
                    m.data.len()
                ),
            )),
            Err(qcg::Error::Timeout { .. }) => Err(MpiError::new(
                Class::Other,
                format!(
                    "{op}: remote rank {src} sent nothing in {:.0} s (calls that do not match across the groups, or a dead rank)",
                    t.as_secs_f64()
                ),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// The local leaders (rank 0 of each group) swap `mine` and every local
    /// process gets the remote leader's `len` bytes.
    fn swap(&self, op: &str, tag: u32, mine: &[u8], len: usize) -> Result<Vec<u8>, MpiError> {
        let mut got = vec![0u8; len];
        if self.local.me == 0 {
            let r = self.coll.isend(0, tag, mine.to_vec())?;
            got = self.recv(op, 0, tag, len)?;
            r.wait()?;
        }
        if self.local.p > 1 && len > 0 {
            self.local.comm.bcast(0, &mut got)?;
        }
        Ok(got)
    }

    /// A root argument read for this intercommunicator.
    fn role(&self, root: c_int) -> Result<Role, MpiError> {
        pure::role(root, self.q()).ok_or_else(|| {
            MpiError::new(
                Class::Root,
                format!(
                    "root {root} is not MPI_ROOT, MPI_PROC_NULL or a rank of the remote group (size {})",
                    self.q()
                ),
            )
        })
    }
}

/// The intercommunicator of handle `h`, or `None` for an intracommunicator.
pub(super) fn of(h: c_int) -> Result<Option<Inter>, MpiError> {
    let r = state::with(|s| {
        Ok(s.comm(h)?
            .remote
            .as_ref()
            .map(|r| (r.coll.clone(), r.members.clone())))
    })?;
    let Some((coll, remote)) = r else {
        return Ok(None);
    };
    Ok(Some(Inter {
        local: local_ctx(h)?,
        coll,
        remote,
    }))
}

/// Fails with `MPI_ERR_COMM` if `h` is an intercommunicator (call `name` needs an
/// intracommunicator).
pub(super) fn intra(h: c_int, name: &str) -> Result<(), MpiError> {
    state::with(|s| s.intra(h, name).map(|_| ()))
}

/// Builds and registers the intercommunicator with `seed` between `local` and
/// the group `remote` (job ranks): collective over the local group only.
fn register(
    local: &qcg::Comm,
    remote: Vec<u32>,
    seed: u64,
    errhandler: i32,
) -> Result<c_int, MpiError> {
    let world = state::with(|s| Ok(s.comm(COMM_WORLD)?.comm.clone()))?;
    let mine = state::members(local);
    let u = pure::union(&mine, &remote);
    let user = Arc::new(world.peers(&u, pure::key(seed, Use::User), &remote)?);
    let coll = Arc::new(world.peers(&u, pure::key(seed, Use::Coll), &remote)?);
    let all: Vec<u32> = (0..local.size()).collect();
    let lc = local
        .subset(&all, pure::key(seed, Use::Local))?
        .ok_or_else(|| MpiError::new(Class::Intern, "the local group has no communicator"))?;
    state::with(|s| {
        s.add_inter(
            lc,
            Remote {
                members: remote,
                user,
                coll,
                seed,
                made: 0,
            },
            errhandler,
        )
    })
}

fn rank_in(r: c_int, size: u32, what: &str) -> Result<u32, MpiError> {
    u32::try_from(r).ok().filter(|&r| r < size).ok_or_else(|| {
        MpiError::new(
            Class::Rank,
            format!("{what} {r} is not a rank of its communicator (size {size})"),
        )
    })
}

/// A tag no program uses (above `MPI_TAG_UB`): marks a failed leader's header.
const FAILED: u32 = u32::MAX;

fn words4(w: [u32; 4]) -> [u8; 16] {
    let mut b = [0u8; 16];
    for (c, x) in b.chunks_exact_mut(4).zip(w) {
        c.copy_from_slice(&x.to_le_bytes());
    }
    b
}

/// The leader's part of `MPI_Intercomm_create`: sends its group (job ranks) and
/// count to the remote leader over `peer_comm` with `tag`, receives theirs: (tag,
/// the remote group's count, the remote group).
fn swap_groups(
    peer_comm: c_int,
    remote_leader: c_int,
    tag: c_int,
    n_local: u32,
    mine: &[u32],
) -> Result<(u32, u32, Vec<u32>), MpiError> {
    let peer = state::with(|s| Ok(s.comm(peer_comm)?.p2p().clone()))?;
    let rl = rank_in(remote_leader, peer.size(), "remote_leader")?;
    let t = state::send_tag(tag)?;
    let mut msg = n_local.to_le_bytes().to_vec();
    msg.extend(pure::to_bytes(mine));
    let r = peer.isend(rl, t, msg)?;
    let m = peer.recv(Some(rl), Some(t))?;
    r.wait()?;
    let got = pure::from_bytes(&m.data);
    match got.split_first() {
        Some((&n_remote, remote)) if !remote.is_empty() => Ok((t, n_remote, remote.to_vec())),
        _ => Err(MpiError::new(
            Class::Intern,
            "the remote leader sent no group",
        )),
    }
}

/// `MPI_Intercomm_create`: the leaders swap their groups (and how many
/// intercommunicators each group made before) over `peer_comm` with `tag`, each
/// broadcasts the remote group to its own; both sides then derive the same
/// contexts ([`crate::inter`]).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Intercomm_create(
    local_comm: c_int,
    local_leader: c_int,
    peer_comm: c_int,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut c_int,
) -> c_int {
    call("MPI_Intercomm_create", local_comm, || {
        let (local, errh) = state::with(|s| {
            let e = s.intra(local_comm, "MPI_Intercomm_create (local_comm)")?;
            Ok((e.comm.clone(), e.errhandler))
        })?;
        let leader = rank_in(local_leader, local.size(), "local_leader")?;
        let mine = state::members(&local);
        let n_local = state::with(|s| {
            let n = s.intercomm_calls.entry(mine.clone()).or_insert(0);
            *n += 1;
            Ok(*n - 1)
        })?;
        // What the leader learns, [tag, its group's count, the remote group's count,
        // remote size] then the remote group, or [FAILED, error class] when its
        // part failed (so that the whole group fails, not only the leader).
        let mut head = [0u8; 16];
        let mut remote_bytes = Vec::new();
        let mut failure = None;
        if local.rank() == leader {
            match swap_groups(peer_comm, remote_leader, tag, n_local, &mine) {
                Ok((t, n_remote, remote)) => {
                    head = words4([t, n_local, n_remote, remote.len() as u32]);
                    remote_bytes = pure::to_bytes(&remote);
                }
                Err(e) => {
                    head = words4([FAILED, e.class as u32, 0, 0]);
                    failure = Some(e);
                }
            }
        }
        local.bcast(leader, &mut head)?;
        let [t, n_mine, n_theirs, q] = pure::from_bytes(&head)[..] else {
            return Err(MpiError::new(
                Class::Intern,
                "a header of 16 bytes is not 4 words",
            ));
        };
        if t == FAILED {
            return Err(failure.unwrap_or_else(|| {
                MpiError::new(
                    Class::from_code(n_mine as c_int).unwrap_or(Class::Other),
                    "the local leader could not swap the groups with the remote leader",
                )
            }));
        }
        remote_bytes.resize(4 * q as usize, 0);
        local.bcast(leader, &mut remote_bytes)?;
        let remote = pure::from_bytes(&remote_bytes);
        if let Some(x) = remote.iter().find(|x| mine.contains(x)) {
            return Err(MpiError::new(
                Class::Arg,
                format!("process {x} is in both groups of the intercommunicator"),
            ));
        }
        let seed = if pure::local_first(&mine, &remote) {
            pure::create_seed(t as i32, n_mine, n_theirs)
        } else {
            pure::create_seed(t as i32, n_theirs, n_mine)
        };
        let h = register(&local, remote, seed, errh)?;
        // SAFETY: an output handle.
        unsafe { put(newintercomm, h) }
    })
}

/// The seed of the next communicator made from intercommunicator `h`.
fn next_seed(h: c_int) -> Result<u64, MpiError> {
    state::with(|s| {
        let r = s.remote_mut(h)?;
        r.made += 1;
        Ok(pure::derived_seed(r.seed, r.made - 1))
    })
}

fn inter_of(h: c_int, name: &str) -> Result<Inter, MpiError> {
    of(h)?.ok_or_else(|| {
        MpiError::new(
            Class::Comm,
            format!("{name} needs an intercommunicator; {h} is an intracommunicator"),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Intercomm_merge(
    intercomm: c_int,
    high: c_int,
    newintracomm: *mut c_int,
) -> c_int {
    call("MPI_Intercomm_merge", intercomm, || {
        let x = inter_of(intercomm, "MPI_Intercomm_merge")?;
        let mine = state::members(&x.local.comm);
        let theirs = x.swap("MPI_Intercomm_merge", TAG_MERGE, &[u8::from(high != 0)], 1)?;
        let order = pure::merge_order(&mine, &x.remote, high != 0, theirs[0] != 0);
        let seed = next_seed(intercomm)?;
        let world = state::with(|s| Ok(s.comm(COMM_WORLD)?.comm.clone()))?;
        let new = world
            .subset(&order, pure::key(seed, Use::Merge))?
            .ok_or_else(|| MpiError::new(Class::Intern, "the merged group misses this process"))?;
        let h = state::with(|s| {
            let e = s.comm(intercomm)?.errhandler;
            s.add_comm(new, e)
        })?;
        // SAFETY: an output handle.
        unsafe { put(newintracomm, h) }
    })
}

/// `MPI_Comm_dup` of an intercommunicator (collective over both groups, no
/// message across).
pub(super) fn dup(x: &Inter, comm: c_int) -> Result<c_int, MpiError> {
    let seed = next_seed(comm)?;
    let errh = state::with(|s| Ok(s.comm(comm)?.errhandler))?;
    register(&x.local.comm, x.remote.clone(), seed, errh)
}

/// Color `u32::MAX` stands for `MPI_UNDEFINED` in the (color, key) pairs sent
/// across by [`split`].
const NO_COLOR: u32 = u32::MAX;

/// `MPI_Comm_split` of an intercommunicator (MPI 3.1 §6.4.2): each group splits
/// itself; the processes of one color in both groups form a new
/// intercommunicator, and a color only one group holds gives `MPI_COMM_NULL`.
/// The groups swap every member's (color, key) through their leaders.
pub(super) fn split(
    x: &Inter,
    comm: c_int,
    color: Option<u32>,
    key: u32,
) -> Result<c_int, MpiError> {
    let mine = pure::to_bytes(&[color.unwrap_or(NO_COLOR), key]);
    let all = x.local.comm.allgather(&mine)?;
    let theirs = pure::from_bytes(&x.swap("MPI_Comm_split", TAG_SPLIT, &all, 8 * x.q())?);
    let seed = next_seed(comm)?;
    let errh = state::with(|s| Ok(s.comm(comm)?.errhandler))?;
    let new_local = x.local.comm.split(color, key)?;
    let (Some(c), Some(nl)) = (color, new_local) else {
        return Ok(0);
    };
    let pairs: Vec<(u32, u32)> = theirs.chunks_exact(2).map(|w| (w[0], w[1])).collect();
    let remote = pure::split_members(&x.remote, &pairs, c);
    if remote.is_empty() {
        return Ok(0);
    }
    register(&nl, remote, pure::derived_seed(seed, c), errh)
}

/// `MPI_Comm_create` on an intercommunicator (MPI 3.1 §6.4.2): `group` is a
/// subgroup of the local group (job ranks); its members and the remote group's
/// chosen ones form a new intercommunicator, `MPI_COMM_NULL` where either is
/// empty or this process is not in `group`.
pub(super) fn create(x: &Inter, comm: c_int, group: &[u32]) -> Result<c_int, MpiError> {
    let local = state::members(&x.local.comm);
    if let Some(g) = group.iter().find(|g| !local.contains(g)) {
        return Err(MpiError::new(
            Class::Group,
            format!("the group holds process {g}, which is not in the local group"),
        ));
    }
    let n = x.swap(
        "MPI_Comm_create",
        TAG_CREATE,
        &pure::to_bytes(&[group.len() as u32]),
        4,
    )?;
    let q = pure::from_bytes(&n).first().copied().unwrap_or(0) as usize;
    let remote =
        pure::from_bytes(&x.swap("MPI_Comm_create", TAG_CREATE, &pure::to_bytes(group), 4 * q)?);
    if let Some(g) = remote.iter().find(|g| !x.remote.contains(g)) {
        return Err(MpiError::new(
            Class::Group,
            format!("the remote group's subgroup holds process {g}, which is not in it"),
        ));
    }
    let seed = next_seed(comm)?;
    let errh = state::with(|s| Ok(s.comm(comm)?.errhandler))?;
    let me = local[x.local.me as usize];
    let pos = group.iter().position(|&g| g == me);
    let new_local = x
        .local
        .comm
        .split(pos.map(|_| 0), pos.unwrap_or(0) as u32)?;
    match new_local {
        Some(nl) if !remote.is_empty() => register(&nl, remote, seed, errh),
        _ => Ok(0),
    }
}

/// `MPI_Comm_compare` when either communicator is an intercommunicator.
pub(super) fn compare(a: c_int, b: c_int) -> Result<Option<c_int>, MpiError> {
    let (xa, xb) = (of(a)?, of(b)?);
    Ok(match (xa, xb) {
        (None, None) => None,
        (Some(xa), Some(xb)) => Some(if a == b {
            0
        } else {
            let l = state::compare(
                false,
                &state::members(&xa.local.comm),
                &state::members(&xb.local.comm),
            );
            let r = state::compare(false, &xa.remote, &xb.remote);
            pure::compare_pair(l, r)
        }),
        _ => Some(3),
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_test_inter(comm: c_int, flag: *mut c_int) -> c_int {
    call("MPI_Comm_test_inter", comm, || {
        let f = state::with(|s| Ok(s.comm(comm)?.remote.is_some()))?;
        // SAFETY: an output int.
        unsafe { put(flag, c_int::from(f)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_remote_size(comm: c_int, size: *mut c_int) -> c_int {
    call("MPI_Comm_remote_size", comm, || {
        let x = inter_of(comm, "MPI_Comm_remote_size")?;
        // SAFETY: an output int.
        unsafe { put(size, x.q() as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_remote_group(comm: c_int, group: *mut c_int) -> c_int {
    call("MPI_Comm_remote_group", comm, || {
        let x = inter_of(comm, "MPI_Comm_remote_group")?;
        let h = state::with(|s| Ok(s.add_group(x.remote.clone())))?;
        // SAFETY: an output handle.
        unsafe { put(group, h) }
    })
}

// ---- collectives ---------------------------------------------------------------

/// Waits for this layer's sends.
fn wait_sends(reqs: Vec<qcg::Request>) -> Result<(), MpiError> {
    qcg::wait_all(reqs)?;
    Ok(())
}

pub(super) fn barrier(x: &Inter) -> Result<(), MpiError> {
    x.local.comm.barrier()?;
    x.swap("MPI_Barrier", TAG_BARRIER, &[], 0)?;
    x.local.comm.barrier()?;
    Ok(())
}

pub(super) unsafe fn bcast(
    x: &Inter,
    buf: *mut c_void,
    n: c_int,
    datatype: c_int,
    root: c_int,
) -> Result<(), MpiError> {
    let role = x.role(root)?;
    let t = ty(datatype)?;
    let n = count(n)?;
    match role {
        Role::Idle => Ok(()),
        Role::Root => {
            // SAFETY: `n` elements of `t` at `buf`.
            let data = unsafe { in_bytes(buf, n, &t)? };
            x.coll.send(0, TAG_BCAST, &data)?;
            Ok(())
        }
        Role::Leaf(r) => {
            let mut data = if x.local.me == 0 {
                x.recv("MPI_Bcast", r, TAG_BCAST, n * t.size)?
            } else {
                vec![0u8; n * t.size]
            };
            if x.local.p > 1 && !data.is_empty() {
                x.local.comm.bcast(0, &mut data)?;
            }
            // SAFETY: the receive buffer.
            unsafe { write_packed(buf, n, &t, &data) }
        }
    }
}

/// The reduction over the local group of `n` elements of `datatype` at `sendbuf`,
/// at local rank 0 (`None` elsewhere, and for empty data).
unsafe fn local_reduce(
    x: &Inter,
    name: &str,
    sendbuf: *const c_void,
    n: usize,
    datatype: c_int,
    op: c_int,
) -> Result<Option<Vec<u8>>, MpiError> {
    let t = ty(datatype)?;
    let (f, commute) = combiner(op, datatype, &t)?;
    if n == 0 || t.size == 0 {
        return Ok(None);
    }
    // SAFETY: `n` elements of `t` at `sendbuf`.
    let data = unsafe { in_bytes(sendbuf, n, &t)? };
    checked_reduction(&x.local, name, Some(0), &data, &t, op, &f, commute)
}

pub(super) unsafe fn reduce(
    x: &Inter,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    op: c_int,
    root: c_int,
) -> Result<(), MpiError> {
    let role = x.role(root)?;
    let n = count(n)?;
    let t = ty(datatype)?;
    match role {
        Role::Idle => Ok(()),
        Role::Root => {
            if n == 0 || t.size == 0 {
                return Ok(());
            }
            let got = x.recv("MPI_Reduce", 0, TAG_REDUCE, n * t.size)?;
            // SAFETY: the receive buffer.
            unsafe { write_packed(recvbuf, n, &t, &got) }
        }
        Role::Leaf(r) => {
            // SAFETY: the send buffer.
            if let Some(out) = unsafe { local_reduce(x, "MPI_Reduce", sendbuf, n, datatype, op)? } {
                x.coll.send(r, TAG_REDUCE, &out)?;
            }
            Ok(())
        }
    }
}

/// Each group's reduction of `total` elements, swapped: every process gets the
/// remote group's (empty for no data).
unsafe fn swapped_reduction(
    x: &Inter,
    name: &str,
    tag: u32,
    sendbuf: *const c_void,
    total: usize,
    datatype: c_int,
    op: c_int,
) -> Result<Vec<u8>, MpiError> {
    let t = ty(datatype)?;
    // SAFETY: the send buffer.
    let mine = unsafe { local_reduce(x, name, sendbuf, total, datatype, op)? };
    if total == 0 || t.size == 0 {
        return Ok(Vec::new());
    }
    x.swap(name, tag, &mine.unwrap_or_default(), total * t.size)
}

pub(super) unsafe fn allreduce(
    x: &Inter,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    op: c_int,
) -> Result<(), MpiError> {
    let n = count(n)?;
    // SAFETY: the caller's buffers.
    unsafe {
        let got = swapped_reduction(x, "MPI_Allreduce", TAG_ALLREDUCE, sendbuf, n, datatype, op)?;
        write_packed(recvbuf, n, &*ty(datatype)?, &got)
    }
}

/// `MPI_Reduce_scatter` (`counts` per local rank): the remote group's reduction
/// of `sum(counts)` elements, block `i` to local rank `i`.
pub(super) unsafe fn reduce_scatter(
    x: &Inter,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: &[usize],
    datatype: c_int,
    op: c_int,
) -> Result<(), MpiError> {
    let total: usize = counts.iter().sum();
    let t = ty(datatype)?;
    let me = x.local.me as usize;
    // SAFETY: the caller's buffers.
    unsafe {
        let all = swapped_reduction(
            x,
            "MPI_Reduce_scatter",
            TAG_REDUCE_SCATTER,
            sendbuf,
            total,
            datatype,
            op,
        )?;
        let at_ = counts[..me].iter().sum::<usize>() * t.size;
        let b = counts[me] * t.size;
        write_packed(
            recvbuf,
            counts[me],
            &t,
            all.get(at_..at_ + b).unwrap_or(&[]),
        )
    }
}

/// The (count, displacement) of each remote rank's block, read only at the root
/// (other processes may pass anything there, NULL arrays included).
pub(super) type Blocks<'a> = &'a dyn Fn() -> Result<Vec<(usize, usize)>, MpiError>;

pub(super) unsafe fn gather(
    x: &Inter,
    name: &str,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recv: Blocks<'_>,
    recvtype: c_int,
    root: c_int,
) -> Result<(), MpiError> {
    match x.role(root)? {
        Role::Idle => Ok(()),
        Role::Leaf(r) => {
            // SAFETY: the send buffer.
            let data = unsafe { in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)? };
            x.coll.send(r, TAG_GATHER, &data)?;
            Ok(())
        }
        Role::Root => {
            let rt = ty(recvtype)?;
            for (q, &(k, d)) in recv()?.iter().enumerate() {
                let got = x.recv(name, q as u32, TAG_GATHER, k * rt.size)?;
                // SAFETY: block `q` of the receive buffer.
                unsafe { write_packed(at_mut(recvbuf, d, &rt), k, &rt, &got)? };
            }
            Ok(())
        }
    }
}

pub(super) unsafe fn scatter(
    x: &Inter,
    name: &str,
    sendbuf: *const c_void,
    send: Blocks<'_>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
) -> Result<(), MpiError> {
    match x.role(root)? {
        Role::Idle => Ok(()),
        Role::Leaf(r) => {
            let rt = ty(recvtype)?;
            let rn = count(recvcount)?;
            let got = x.recv(name, r, TAG_SCATTER, rn * rt.size)?;
            // SAFETY: the receive buffer.
            unsafe { write_packed(recvbuf, rn, &rt, &got) }
        }
        Role::Root => {
            let st = ty(sendtype)?;
            let mut reqs = Vec::new();
            for (q, &(k, d)) in send()?.iter().enumerate() {
                // SAFETY: block `q` of the send buffer.
                let data = unsafe { in_bytes(at(sendbuf, d, &st), k, &st)? }.into_owned();
                reqs.push(x.coll.isend(q as u32, TAG_SCATTER, data)?);
            }
            wait_sends(reqs)
        }
    }
}

/// Every process sends `blocks[j]` to remote rank `j` and receives block `i`
/// (`recv[i]` = (count, displacement) of `recvtype`) from remote rank `i`: the
/// all-to-all pattern of allgather(v) and alltoall(v).
unsafe fn exchange(
    x: &Inter,
    name: &str,
    tag: u32,
    blocks: Vec<Vec<u8>>,
    recvbuf: *mut c_void,
    recv: &[(usize, usize)],
    recvtype: c_int,
) -> Result<(), MpiError> {
    let rt = ty(recvtype)?;
    let mut reqs = Vec::new();
    for (j, b) in blocks.into_iter().enumerate() {
        reqs.push(x.coll.isend(j as u32, tag, b)?);
    }
    for (i, &(k, d)) in recv.iter().enumerate() {
        let got = x.recv(name, i as u32, tag, k * rt.size)?;
        // SAFETY: block `i` of the receive buffer.
        unsafe { write_packed(at_mut(recvbuf, d, &rt), k, &rt, &got)? };
    }
    wait_sends(reqs)
}

/// `MPI_Allgather(v)`: this process's block to every remote process; block `i`
/// of the receive buffer from remote rank `i`.
pub(super) unsafe fn allgather(
    x: &Inter,
    name: &str,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recv: &[(usize, usize)],
    recvtype: c_int,
) -> Result<(), MpiError> {
    // SAFETY: the send buffer.
    let data = unsafe { in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)? }.into_owned();
    let blocks = vec![data; x.q()];
    // SAFETY: the receive buffer.
    unsafe { exchange(x, name, TAG_ALLGATHER, blocks, recvbuf, recv, recvtype) }
}

/// `MPI_Alltoall(v)`: send block `j` to remote rank `j`, receive block `i` from
/// remote rank `i`.
pub(super) unsafe fn alltoall(
    x: &Inter,
    name: &str,
    sendbuf: *const c_void,
    send: &[(usize, usize)],
    sendtype: c_int,
    recvbuf: *mut c_void,
    recv: &[(usize, usize)],
    recvtype: c_int,
) -> Result<(), MpiError> {
    let st = ty(sendtype)?;
    let blocks = send
        .iter()
        // SAFETY: block `j` of the send buffer.
        .map(|&(k, d)| unsafe { in_bytes(at(sendbuf, d, &st), k, &st) }.map(|b| b.into_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    // SAFETY: the receive buffer.
    unsafe { exchange(x, name, TAG_ALLTOALL, blocks, recvbuf, recv, recvtype) }
}

/// `MPI_Alltoallw`: block `j` (`sendcounts[j]` of `sendtypes[j]` at `sdispls[j]`
/// bytes) to remote rank `j`, block `i` from remote rank `i` likewise.
pub(super) unsafe fn alltoallw(
    x: &Inter,
    sendbuf: *const c_void,
    send: (&[c_int], &[c_int], &[c_int]),
    recvbuf: *mut c_void,
    recv: (&[c_int], &[c_int], &[c_int]),
) -> Result<(), MpiError> {
    let q = x.remote_size();
    let mut reqs = Vec::new();
    for j in 0..q {
        let t = ty(send.2[j])?;
        let base = (sendbuf as *const u8)
            .wrapping_offset(send.1[j] as isize)
            .cast();
        // SAFETY: block `j` of the send buffer.
        let b = unsafe { in_bytes(base, count(send.0[j])?, &t)? }.into_owned();
        reqs.push(x.coll.isend(j as u32, TAG_ALLTOALLW, b)?);
    }
    for i in 0..q {
        let t = ty(recv.2[i])?;
        let k = count(recv.0[i])?;
        let got = x.recv("MPI_Alltoallw", i as u32, TAG_ALLTOALLW, k * t.size)?;
        let base = (recvbuf as *mut u8)
            .wrapping_offset(recv.1[i] as isize)
            .cast();
        // SAFETY: block `i` of the receive buffer.
        unsafe { write_packed(base, k, &t, &got)? };
    }
    wait_sends(reqs)
}

/// `count` elements per block for `n` blocks, one after the other.
pub(super) fn even(count_: c_int, n: usize) -> Result<Vec<(usize, usize)>, MpiError> {
    let k = count(count_)?;
    Ok((0..n).map(|i| (k, i * k)).collect())
}

impl Inter {
    /// The remote group's size (the length of the count arrays of v-collectives).
    pub(super) fn remote_size(&self) -> usize {
        self.q()
    }

    /// The local group's size.
    pub(super) fn local_size(&self) -> usize {
        self.local.p
    }
}
