//! `MPI_Info` (MPI 3.1 ch. 9) and communicators' hints; the objects are
//! [`crate::info`]'s.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use super::attrs::{c_str, put_str};
use super::{call, get, put};
use crate::error::{Class, MpiError};
use crate::info::{self, Info};
use crate::state::{self, COMM_WORLD};
use libc::{c_char, c_int};

/// A key argument, checked.
unsafe fn key(p: *const c_char) -> Result<String, MpiError> {
    // SAFETY: a C string.
    let k = unsafe { c_str(p, "the key")? };
    info::check_key(&k)?;
    Ok(k)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_create(info: *mut c_int) -> c_int {
    call("MPI_Info_create", COMM_WORLD, || {
        let h = state::with(|s| Ok(s.infos.add(Info::default())))?;
        // SAFETY: an output handle.
        unsafe { put(info, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_set(
    info: c_int,
    key_: *const c_char,
    value: *const c_char,
) -> c_int {
    call("MPI_Info_set", COMM_WORLD, || {
        // SAFETY: C strings.
        let (k, v) = unsafe { (key(key_)?, c_str(value, "the value")?) };
        state::with(|s| s.infos.get_mut(info)?.set(&k, &v))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get(
    info: c_int,
    key_: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    call("MPI_Info_get", COMM_WORLD, || {
        // SAFETY: a C string.
        let k = unsafe { key(key_)? };
        let room = usize::try_from(valuelen)
            .map_err(|_| MpiError::new(Class::Arg, format!("valuelen {valuelen} is negative")))?;
        let v = state::with(|s| Ok(s.infos.get(info)?.get(&k)?.map(str::to_string)))?;
        // SAFETY: an output int, and `value` has room for `valuelen` chars and the
        // NUL (MPI 3.1 §9: valuelen is one less than the room allocated).
        unsafe {
            put(flag, c_int::from(v.is_some()))?;
            if let Some(v) = v {
                put_str(value, std::ptr::null_mut(), &v, room + 1)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_valuelen(
    info: c_int,
    key_: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    call("MPI_Info_get_valuelen", COMM_WORLD, || {
        // SAFETY: a C string.
        let k = unsafe { key(key_)? };
        let n = state::with(|s| Ok(s.infos.get(info)?.get(&k)?.map(str::len)))?;
        // SAFETY: output ints.
        unsafe {
            put(flag, c_int::from(n.is_some()))?;
            if let Some(n) = n {
                put(valuelen, n as c_int)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_nkeys(info: c_int, nkeys: *mut c_int) -> c_int {
    call("MPI_Info_get_nkeys", COMM_WORLD, || {
        let n = state::with(|s| Ok(s.infos.get(info)?.nkeys()))?;
        // SAFETY: an output int.
        unsafe { put(nkeys, n as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_get_nthkey(info: c_int, n: c_int, key_: *mut c_char) -> c_int {
    call("MPI_Info_get_nthkey", COMM_WORLD, || {
        let k = state::with(|s| Ok(s.infos.get(info)?.nthkey(n)?.to_string()))?;
        // SAFETY: room for MPI_MAX_INFO_KEY chars and the NUL.
        unsafe { put_str(key_, std::ptr::null_mut(), &k, info::MAX_KEY + 1) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_delete(info: c_int, key_: *const c_char) -> c_int {
    call("MPI_Info_delete", COMM_WORLD, || {
        // SAFETY: a C string.
        let k = unsafe { key(key_)? };
        state::with(|s| s.infos.get_mut(info)?.delete(&k))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_dup(info: c_int, newinfo: *mut c_int) -> c_int {
    call("MPI_Info_dup", COMM_WORLD, || {
        let h = state::with(|s| {
            let copy = s.infos.get(info)?.clone();
            Ok(s.infos.add(copy))
        })?;
        // SAFETY: an output handle.
        unsafe { put(newinfo, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Info_free(info: *mut c_int) -> c_int {
    call("MPI_Info_free", COMM_WORLD, || {
        // SAFETY: an in/out handle.
        let h = unsafe { get(info, "the info")? };
        state::with(|s| s.infos.free(h))?;
        // SAFETY: read above.
        unsafe { put(info, 0) }
    })
}

/// Sets the hints of communicator `comm` (no hint changes what this layer does:
/// they are kept so that `MPI_Comm_get_info` gives them back).
pub(super) fn set_hints(comm: c_int, info: c_int) -> Result<(), MpiError> {
    state::with(|s| {
        s.comm(comm)?;
        let i = s.infos.get_or_empty(info)?;
        s.infos.hints.insert(comm, i);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_info(comm: c_int, info: c_int) -> c_int {
    call("MPI_Comm_set_info", comm, || set_hints(comm, info))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_info(comm: c_int, info_used: *mut c_int) -> c_int {
    call("MPI_Comm_get_info", comm, || {
        let h = state::with(|s| {
            s.comm(comm)?;
            let i = s.infos.hints.get(&comm).cloned().unwrap_or_default();
            Ok(s.infos.add(i))
        })?;
        // SAFETY: an output handle.
        unsafe { put(info_used, h) }
    })
}

/// `MPI_INFO_ENV`'s content (MPI 3.1 §8.8): what this process was started as.
pub(super) fn env_info(size: u32, thread_level: c_int) -> Info {
    let mut i = Info::default();
    let mut args = std::env::args();
    let mut set = |k: &str, v: String| {
        if !v.is_empty() {
            let _ = i.set(k, &v);
        }
    };
    set("command", args.next().unwrap_or_default());
    set("argv", args.collect::<Vec<_>>().join(" "));
    set("maxprocs", size.to_string());
    if let Ok(d) = std::env::current_dir() {
        set("wdir", d.display().to_string());
    }
    let level = [
        "MPI_THREAD_SINGLE",
        "MPI_THREAD_FUNNELED",
        "MPI_THREAD_SERIALIZED",
        "MPI_THREAD_MULTIPLE",
    ];
    set(
        "thread_level",
        level.get(thread_level as usize).unwrap_or(&"").to_string(),
    );
    i
}
