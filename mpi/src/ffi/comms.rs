//! The C ABI of communicators and groups: rank, size, dup (and idup,
//! dup_with_info), split (and split_type, QCG_Comm_split_level), create,
//! create_group, compare, free; groups (their arithmetic is [`crate::groups`]).
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use super::attrs::{copy_attrs, delete_attrs};
use super::coll::{ctx, local_ctx};
use super::inter;
use super::{call, ints, put};
use crate::attrs::Kind;
use crate::error::{Class, MpiError};
use crate::groups;
use crate::state::{self, count, Meta, Req, COMM_WORLD, UNDEFINED};
use libc::c_int;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_rank(comm: c_int, rank: *mut c_int) -> c_int {
    call("MPI_Comm_rank", comm, || {
        let c = local_ctx(comm)?;
        // SAFETY: an output int.
        unsafe { put(rank, c.me as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_size(comm: c_int, size: *mut c_int) -> c_int {
    call("MPI_Comm_size", comm, || {
        let c = local_ctx(comm)?;
        // SAFETY: an output int.
        unsafe { put(size, c.p as c_int) }
    })
}

/// Splits `comm` and registers the result (collective over `comm`).
fn split(comm: c_int, color: Option<u32>, key: u32, newcomm: *mut c_int) -> Result<(), MpiError> {
    let c = ctx(comm)?;
    let new = c.comm.split(color, key)?;
    let h = match new {
        Some(n) => state::with(|s| {
            let e = s.comm(comm)?.errhandler;
            s.add_comm(n, e)
        })?,
        None => 0,
    };
    // SAFETY: an output handle.
    unsafe { put(newcomm, h) }
}

/// An MPI key as an unsigned key with the same order.
fn key(k: c_int) -> u32 {
    (k as u32) ^ 0x8000_0000
}

/// Duplicates `comm` with its error handler and attributes (through their copy
/// callbacks) and the hints of `info` (`None`: `comm`'s own); the new handle.
fn dup(comm: c_int, info: Option<c_int>) -> Result<c_int, MpiError> {
    let h = match inter::of(comm)? {
        Some(x) => inter::dup(&x, comm)?,
        None => {
            // Every rank derives the duplicate's context from the communicator's
            // and the number of duplicates made of it, without a message: so
            // MPI_Comm_idup completes at once and never waits for the others.
            let c = ctx(comm)?;
            let n = state::with(|s| s.next_dup(comm))?;
            let all: Vec<u32> = (0..c.p as u32).collect();
            let new = c
                .comm
                .subset(&all, 0x0d00_0000_0000_0000 | n)?
                .ok_or_else(|| MpiError::new(Class::Intern, "a duplicate lacks this rank"))?;
            state::with(|s| {
                let e = s.comm(comm)?.errhandler;
                let h = s.add_comm(new, e)?;
                // The duplicate keeps the process topology (MPI 3.1 §7.4).
                let t = s.comm(comm)?.topo.clone();
                s.set_topo(h, t)?;
                Ok(h)
            })?
        }
    };
    let hints = state::with(|s| match info {
        Some(i) => s.infos.get_or_empty(i),
        None => Ok(s.infos.hints.get(&comm).cloned().unwrap_or_default()),
    });
    // SAFETY: the callbacks the program registered for comm's attributes.
    let copied = hints.and_then(|i| unsafe {
        state::with(|s| {
            s.infos.hints.insert(h, i);
            Ok(())
        })?;
        copy_attrs(Kind::Comm, comm, h)
    });
    if let Err(e) = copied {
        // SAFETY: the attributes copied so far, deleted through their callbacks.
        let _ = unsafe { delete_attrs(Kind::Comm, h) };
        let _ = state::with(|s| s.free_comm(h));
        return Err(e);
    }
    Ok(h)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_dup(comm: c_int, newcomm: *mut c_int) -> c_int {
    call("MPI_Comm_dup", comm, || {
        let h = dup(comm, None)?;
        // SAFETY: an output handle.
        unsafe { put(newcomm, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_dup_with_info(
    comm: c_int,
    info: c_int,
    newcomm: *mut c_int,
) -> c_int {
    call("MPI_Comm_dup_with_info", comm, || {
        state::with(|s| s.infos.get_or_empty(info).map(|_| ()))?;
        let h = dup(comm, Some(info))?;
        // SAFETY: an output handle.
        unsafe { put(newcomm, h) }
    })
}

/// `MPI_Comm_idup` duplicates at once, as `MPI_Comm_dup` does (no message: every
/// rank derives the new context alike), and gives a request that is already
/// complete.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_idup(
    comm: c_int,
    newcomm: *mut c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Comm_idup", comm, || {
        if request.is_null() {
            return Err(MpiError::new(Class::Arg, "the request is NULL"));
        }
        let h = dup(comm, None)?;
        let r = state::with(|s| {
            Ok(s.add_request(Req {
                inner: None,
                meta: Meta::Null,
                cancelled: false,
                comm,
            }))
        })?;
        // SAFETY: an output handle and an output request.
        unsafe {
            put(newcomm, h)?;
            put(request, r)
        }
    })
}

/// `MPI_Comm_get_parent`: no process is ever spawned, so `MPI_COMM_NULL`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_parent(parent: *mut c_int) -> c_int {
    // SAFETY: an output handle.
    call("MPI_Comm_get_parent", COMM_WORLD, || unsafe {
        put(parent, 0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_split(
    comm: c_int,
    color: c_int,
    key_: c_int,
    newcomm: *mut c_int,
) -> c_int {
    call("MPI_Comm_split", comm, || {
        let color = match color {
            UNDEFINED => None,
            c if c >= 0 => Some(c as u32),
            c => {
                return Err(MpiError::new(
                    Class::Arg,
                    format!("color {c} is negative (and not MPI_UNDEFINED)"),
                ))
            }
        };
        if let Some(x) = inter::of(comm)? {
            let h = inter::split(&x, comm, color, key(key_))?;
            // SAFETY: an output handle.
            return unsafe { put(newcomm, h) };
        }
        split(comm, color, key(key_), newcomm)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_split_type(
    comm: c_int,
    split_type: c_int,
    key_: c_int,
    _info: c_int,
    newcomm: *mut c_int,
) -> c_int {
    call("MPI_Comm_split_type", comm, || {
        if let Some(x) = inter::of(comm)? {
            // On an intercommunicator (as MPI 4 says and Open MPI does): each
            // group splits by node, and the parts on one node of both groups form
            // an intercommunicator (MPI_COMM_NULL where the other group has none).
            // The color is the node's name hashed, which both groups derive alike.
            let color = match split_type {
                UNDEFINED => None,
                1 => {
                    let node = local_ctx(comm)?.comm.node().to_string();
                    let h = node.bytes().fold(0x811c_9dc5u32, |h, b| {
                        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
                    });
                    Some(h & 0x7fff_ffff)
                }
                t => {
                    return Err(MpiError::new(
                        Class::Arg,
                        format!("split type {t} is not MPI_COMM_TYPE_SHARED"),
                    ))
                }
            };
            let h = inter::split(&x, comm, color, key(key_))?;
            // SAFETY: an output handle.
            return unsafe { put(newcomm, h) };
        }
        let c = ctx(comm)?;
        let color = match split_type {
            UNDEFINED => None,
            1 => {
                let depth = c.comm.topology().path(c.me as usize).len();
                Some(state::level_color(&c.comm, depth as c_int - 1)?)
            }
            t => {
                return Err(MpiError::new(
                    Class::Arg,
                    format!("split type {t} is not MPI_COMM_TYPE_SHARED"),
                ))
            }
        };
        split(comm, color, key(key_), newcomm)
    })
}

#[no_mangle]
pub unsafe extern "C" fn QCG_Comm_split_level(
    comm: c_int,
    level: c_int,
    newcomm: *mut c_int,
) -> c_int {
    call("QCG_Comm_split_level", comm, || {
        inter::intra(comm, "QCG_Comm_split_level")?;
        let c = ctx(comm)?;
        let color = state::level_color(&c.comm, level)?;
        split(comm, Some(color), c.me, newcomm)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_free(comm: *mut c_int) -> c_int {
    // SAFETY: a communicator handle.
    let h = unsafe { crate::ffi::get(comm, "the communicator") }.unwrap_or(0);
    call("MPI_Comm_free", h, || {
        // Bad and predefined handles are refused before any callback runs.
        state::with(|s| s.comm(h).map(|_| ()))?;
        if h == COMM_WORLD || h == state::COMM_SELF {
            return state::with(|s| s.free_comm(h));
        }
        // SAFETY: the delete callbacks of the program's attributes on `h`.
        unsafe { delete_attrs(Kind::Comm, h)? };
        state::with(|s| s.free_comm(h))?;
        // SAFETY: read above.
        unsafe { comm.write(0) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_group(comm: c_int, group: *mut c_int) -> c_int {
    call("MPI_Comm_group", comm, || {
        let c = local_ctx(comm)?;
        let h = state::with(|s| Ok(s.add_group(state::members(&c.comm))))?;
        // SAFETY: an output handle.
        unsafe { put(group, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create(comm: c_int, group: c_int, newcomm: *mut c_int) -> c_int {
    call("MPI_Comm_create", comm, || {
        let g = state::with(|s| Ok(s.group(group)?.to_vec()))?;
        if let Some(x) = inter::of(comm)? {
            let h = inter::create(&x, comm, &g)?;
            // SAFETY: an output handle.
            return unsafe { put(newcomm, h) };
        }
        let c = ctx(comm)?;
        let mine = state::members(&c.comm);
        if let Some(x) = g.iter().find(|x| !mine.contains(x)) {
            return Err(MpiError::new(
                Class::Group,
                format!("the group holds process {x}, which is not in the communicator"),
            ));
        }
        let me = mine[c.me as usize];
        let pos = g.iter().position(|&x| x == me);
        // Ranks may pass disjoint groups (MPI 2.2): each group is its own
        // communicator, told apart by its lowest member.
        let color = pos.and_then(|_| g.iter().min().copied());
        split(comm, color, pos.unwrap_or(0) as u32, newcomm)
    })
}

/// `MPI_Comm_create_group`: collective over the group's members only (MPI 3.1
/// §6.4.2); a process outside the group gets `MPI_COMM_NULL` without a message.
/// The members derive the new context alike from the communicator, the group, the
/// tag and how many such calls they made before (see [`qcg::Comm::subset`]).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_group(
    comm: c_int,
    group: c_int,
    tag: c_int,
    newcomm: *mut c_int,
) -> c_int {
    call("MPI_Comm_create_group", comm, || {
        inter::intra(comm, "MPI_Comm_create_group")?;
        let c = ctx(comm)?;
        let g = state::with(|s| Ok(s.group(group)?.to_vec()))?;
        state::send_tag(tag)?;
        let mine = state::members(&c.comm);
        let locals = g
            .iter()
            .map(|x| {
                mine.iter()
                    .position(|m| m == x)
                    .map(|p| p as u32)
                    .ok_or_else(|| {
                        MpiError::new(
                            Class::Group,
                            format!(
                                "the group holds process {x}, which is not in the communicator"
                            ),
                        )
                    })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        let h = if locals.contains(&c.me) {
            let n = state::with(|s| s.next_create_group(comm, &g, tag))?;
            let key = (u64::from(tag as u32) << 32) | u64::from(n);
            match c.comm.subset(&locals, key)? {
                Some(new) => state::with(|s| {
                    let e = s.comm(comm)?.errhandler;
                    s.add_comm(new, e)
                })?,
                None => 0,
            }
        } else {
            0
        };
        // SAFETY: an output handle.
        unsafe { put(newcomm, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_compare(
    comm1: c_int,
    comm2: c_int,
    result: *mut c_int,
) -> c_int {
    call("MPI_Comm_compare", comm1, || {
        if let Some(r) = inter::compare(comm1, comm2)? {
            // SAFETY: an output int.
            return unsafe { put(result, r) };
        }
        let (a, b) = (ctx(comm1)?, ctx(comm2)?);
        let r = state::compare(
            comm1 == comm2,
            &state::members(&a.comm),
            &state::members(&b.comm),
        );
        // SAFETY: an output int.
        unsafe { put(result, r) }
    })
}

/// Registers group `members` and writes its handle to `newgroup`.
fn new_group(members: Vec<u32>, newgroup: *mut c_int) -> Result<(), MpiError> {
    let h = state::with(|s| Ok(s.add_group(members)))?;
    // SAFETY: an output handle.
    unsafe { put(newgroup, h) }
}

unsafe fn group_range(
    group: c_int,
    n: c_int,
    ranges: *const [c_int; 3],
    newgroup: *mut c_int,
    include: bool,
) -> Result<(), MpiError> {
    let g = state::with(|s| Ok(s.group(group)?.to_vec()))?;
    let n = count(n)?;
    let triples: &[[c_int; 3]] = if n == 0 {
        &[]
    } else if ranges.is_null() {
        return Err(MpiError::new(Class::Arg, "the range array is NULL"));
    } else {
        // SAFETY: an array of `n` (first, last, stride) triples.
        unsafe { std::slice::from_raw_parts(ranges, n) }
    };
    let picked = groups::ranges(triples, g.len())?;
    let members = if include {
        groups::incl(&g, &picked)
    } else {
        groups::excl(&g, &picked)
    };
    new_group(members, newgroup)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_range_incl(
    group: c_int,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Group_range_incl", COMM_WORLD, || unsafe {
        group_range(group, n, ranges, newgroup, true)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_range_excl(
    group: c_int,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Group_range_excl", COMM_WORLD, || unsafe {
        group_range(group, n, ranges, newgroup, false)
    })
}

/// Applies a set operation to two groups.
fn group_op(
    g1: c_int,
    g2: c_int,
    newgroup: *mut c_int,
    op: fn(&[u32], &[u32]) -> Vec<u32>,
) -> Result<(), MpiError> {
    let members = state::with(|s| Ok(op(s.group(g1)?, s.group(g2)?)))?;
    new_group(members, newgroup)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_union(g1: c_int, g2: c_int, newgroup: *mut c_int) -> c_int {
    call("MPI_Group_union", COMM_WORLD, || {
        group_op(g1, g2, newgroup, groups::union)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_intersection(
    g1: c_int,
    g2: c_int,
    newgroup: *mut c_int,
) -> c_int {
    call("MPI_Group_intersection", COMM_WORLD, || {
        group_op(g1, g2, newgroup, groups::intersection)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_difference(
    g1: c_int,
    g2: c_int,
    newgroup: *mut c_int,
) -> c_int {
    call("MPI_Group_difference", COMM_WORLD, || {
        group_op(g1, g2, newgroup, groups::difference)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_translate_ranks(
    g1: c_int,
    n: c_int,
    ranks1: *const c_int,
    g2: c_int,
    ranks2: *mut c_int,
) -> c_int {
    call("MPI_Group_translate_ranks", COMM_WORLD, || {
        let n = count(n)?;
        // SAFETY: an array of `n` ranks.
        let rs = unsafe { ints(ranks1, n, "ranks1")? };
        let out = state::with(|s| groups::translate(s.group(g1)?, rs, s.group(g2)?))?;
        if n > 0 && ranks2.is_null() {
            return Err(MpiError::new(Class::Arg, "ranks2 is NULL"));
        }
        for (i, r) in out.into_iter().enumerate() {
            // SAFETY: an output array of `n` ranks.
            unsafe { ranks2.add(i).write(r) };
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_compare(g1: c_int, g2: c_int, result: *mut c_int) -> c_int {
    call("MPI_Group_compare", COMM_WORLD, || {
        let r = state::with(|s| Ok(groups::compare(s.group(g1)?, s.group(g2)?)))?;
        // SAFETY: an output int.
        unsafe { put(result, r) }
    })
}

unsafe fn group_pick(
    group: c_int,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut c_int,
    include: bool,
) -> Result<(), MpiError> {
    let g = state::with(|s| Ok(s.group(group)?.to_vec()))?;
    // SAFETY: an array of `n` ranks.
    let rs = unsafe { ints(ranks, count(n)?, "the rank array")? };
    let picked = groups::ranks(rs, g.len())?;
    let members = if include {
        groups::incl(&g, &picked)
    } else {
        groups::excl(&g, &picked)
    };
    new_group(members, newgroup)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_incl(
    group: c_int,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Group_incl", COMM_WORLD, || unsafe {
        group_pick(group, n, ranks, newgroup, true)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_excl(
    group: c_int,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Group_excl", COMM_WORLD, || unsafe {
        group_pick(group, n, ranks, newgroup, false)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_rank(group: c_int, rank: *mut c_int) -> c_int {
    call("MPI_Group_rank", COMM_WORLD, || {
        let r = state::with(|s| {
            let me = s.rank;
            Ok(s.group(group)?
                .iter()
                .position(|&x| x == me)
                .map_or(UNDEFINED, |p| p as c_int))
        })?;
        // SAFETY: an output int.
        unsafe { put(rank, r) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_size(group: c_int, size: *mut c_int) -> c_int {
    call("MPI_Group_size", COMM_WORLD, || {
        let n = state::with(|s| Ok(s.group(group)?.len()))?;
        // SAFETY: an output int.
        unsafe { put(size, n as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Group_free(group: *mut c_int) -> c_int {
    call("MPI_Group_free", COMM_WORLD, || {
        // SAFETY: a group handle.
        unsafe {
            let h = crate::ffi::get(group, "the group")?;
            state::with(|s| s.free_group(h))?;
            group.write(0);
        }
        Ok(())
    })
}
