//! The C ABI of communicators and groups: rank, size, dup, split (and split_type,
//! QCG_Comm_split_level), create, create_group, compare, free; groups.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use super::coll::ctx;
use super::{call, ints, put};
use crate::error::{Class, MpiError};
use crate::state::{self, count, COMM_WORLD, UNDEFINED};
use libc::c_int;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_rank(comm: c_int, rank: *mut c_int) -> c_int {
    call("MPI_Comm_rank", comm, || {
        let c = ctx(comm)?;
        // SAFETY: an output int.
        unsafe { put(rank, c.me as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_size(comm: c_int, size: *mut c_int) -> c_int {
    call("MPI_Comm_size", comm, || {
        let c = ctx(comm)?;
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

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_dup(comm: c_int, newcomm: *mut c_int) -> c_int {
    call("MPI_Comm_dup", comm, || {
        let me = ctx(comm)?.me;
        split(comm, Some(0), me, newcomm)
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
        state::with(|s| s.free_comm(h))?;
        // SAFETY: read above.
        unsafe { comm.write(0) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_group(comm: c_int, group: *mut c_int) -> c_int {
    call("MPI_Comm_group", comm, || {
        let c = ctx(comm)?;
        let h = state::with(|s| Ok(s.add_group(state::members(&c.comm))))?;
        // SAFETY: an output handle.
        unsafe { put(group, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create(comm: c_int, group: c_int, newcomm: *mut c_int) -> c_int {
    call("MPI_Comm_create", comm, || {
        let c = ctx(comm)?;
        let g = state::with(|s| Ok(s.group(group)?.to_vec()))?;
        let mine = state::members(&c.comm);
        if let Some(x) = g.iter().find(|x| !mine.contains(x)) {
            return Err(MpiError::new(
                Class::Group,
                format!("the group holds process {x}, which is not in the communicator"),
            ));
        }
        let me = mine[c.me as usize];
        let pos = g.iter().position(|&x| x == me);
        split(comm, pos.map(|_| 0), pos.unwrap_or(0) as u32, newcomm)
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

/// Checks group ranks: each in `0..n`, no repeats.
fn group_ranks(rs: &[c_int], n: usize) -> Result<Vec<usize>, MpiError> {
    let mut seen = vec![false; n];
    rs.iter()
        .map(|&r| match usize::try_from(r) {
            Ok(r) if r < n && !seen[r] => {
                seen[r] = true;
                Ok(r)
            }
            _ => Err(MpiError::new(
                Class::Rank,
                format!("rank {r} is not in the group (size {n}) or repeated"),
            )),
        })
        .collect()
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
    let picked = group_ranks(rs, g.len())?;
    let members: Vec<u32> = if include {
        picked.iter().map(|&r| g[r]).collect()
    } else {
        g.iter()
            .enumerate()
            .filter(|(i, _)| !picked.contains(i))
            .map(|(_, &x)| x)
            .collect()
    };
    let h = state::with(|s| Ok(s.add_group(members)))?;
    // SAFETY: an output handle.
    unsafe { put(newgroup, h) }
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
