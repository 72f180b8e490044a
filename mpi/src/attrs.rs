//! What programs cache on communicators and datatypes (MPI 3.1 §6.7, §6.8): keyvals
//! with their copy and delete callbacks, attribute values, and names.
//!
//! Pure bookkeeping: the callbacks are C functions, and calling them is `ffi`'s
//! business (always with the state unlocked, since a callback may call MPI). So the
//! operations here return what is to be called ([`struct@Copy`], [`Delete`]) instead of
//! calling it.

use crate::error::{Class, MpiError};
use libc::{c_int, c_void};
use std::collections::HashMap;

/// `MPI_Comm_copy_attr_function` and `MPI_Type_copy_attr_function` (handles are
/// ints, so one C type serves both, and MPI-1's `MPI_Copy_function`).
pub type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `MPI_Comm_delete_attr_function` and `MPI_Type_delete_attr_function`.
pub type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;

/// `MPI_TAG_UB`, the first predefined keyval; the others follow in this order:
/// `MPI_HOST`, `MPI_IO`, `MPI_WTIME_IS_GLOBAL`, `MPI_UNIVERSE_SIZE`,
/// `MPI_LASTUSEDCODE`, `MPI_APPNUM` (the numbers of `mpi.h`).
pub const TAG_UB: i32 = 1;
/// The last predefined keyval (`MPI_APPNUM`).
pub const LAST_PREDEFINED: i32 = 7;
/// First keyval given to the program.
const FIRST_USER: i32 = 16;

/// What a keyval may be attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Communicators.
    Comm,
    /// Datatypes.
    Type,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Comm => "communicator",
            Kind::Type => "datatype",
        }
    }
}

/// How a keyval's callbacks are called and what its values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// C: arguments by value, values are `void *`.
    C,
    /// Fortran (`MPI_Comm_create_keyval` and the like): every argument by
    /// reference, values are `INTEGER(KIND=MPI_ADDRESS_KIND)`, `ierror` last.
    Fortran,
    /// Fortran's MPI-1 `MPI_Keyval_create`: the same with `INTEGER` values.
    Fortran77,
}

/// An object attributes and names hang on: a kind and a handle.
pub type Obj = (Kind, i32);

/// A keyval: its kind, callbacks (`None` for the `NULL_*_FN`s) and extra state.
#[derive(Clone, Copy)]
struct Keyval {
    kind: Kind,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    extra: usize,
    lang: Lang,
    /// Freed by the program: unusable by it, but the attributes still set with it
    /// keep their callbacks (MPI 3.1 §6.7.2).
    freed: bool,
}

/// A copy callback to call for one attribute when its object is duplicated.
#[derive(Clone, Copy)]
pub struct Copy {
    /// The callback.
    pub f: CopyFn,
    /// The keyval.
    pub keyval: i32,
    /// The keyval's extra state.
    pub extra: usize,
    /// The old object's value.
    pub value: usize,
    /// How to call it.
    pub lang: Lang,
}

/// A delete callback to call for one attribute value going away.
#[derive(Clone, Copy)]
pub struct Delete {
    /// The callback.
    pub f: DeleteFn,
    /// The keyval.
    pub keyval: i32,
    /// The keyval's extra state.
    pub extra: usize,
    /// The value going away.
    pub value: usize,
    /// How to call it.
    pub lang: Lang,
}

/// The keyvals, the attributes set with them and the objects' names.
pub struct Attrs {
    keyvals: HashMap<i32, Keyval>,
    next: i32,
    /// Each object's attributes in the order they were first set.
    values: HashMap<Obj, Vec<(i32, usize)>>,
    names: HashMap<Obj, String>,
}

impl Default for Attrs {
    fn default() -> Attrs {
        Attrs {
            keyvals: HashMap::new(),
            next: FIRST_USER,
            values: HashMap::new(),
            names: HashMap::new(),
        }
    }
}

/// Whether `k` is one of the predefined keyvals of `MPI_COMM_WORLD`.
pub fn is_predefined(k: i32) -> bool {
    (TAG_UB..=LAST_PREDEFINED).contains(&k)
}

impl Attrs {
    /// Makes a keyval of C's.
    pub fn create_keyval(
        &mut self,
        kind: Kind,
        copy: Option<CopyFn>,
        delete: Option<DeleteFn>,
        extra: usize,
    ) -> i32 {
        self.create_keyval_in(Lang::C, kind, copy, delete, extra)
    }

    /// Makes a keyval whose callbacks are `lang`'s.
    pub fn create_keyval_in(
        &mut self,
        lang: Lang,
        kind: Kind,
        copy: Option<CopyFn>,
        delete: Option<DeleteFn>,
        extra: usize,
    ) -> i32 {
        let k = self.next;
        self.next += 1;
        self.keyvals.insert(
            k,
            Keyval {
                kind,
                copy,
                delete,
                extra,
                lang,
                freed: false,
            },
        );
        k
    }

    /// Checks that the program may use keyval `k` on objects of `kind`.
    fn usable(&self, kind: Kind, k: i32) -> Result<&Keyval, MpiError> {
        if is_predefined(k) {
            return Err(MpiError::new(
                Class::Keyval,
                format!("keyval {k} is predefined: it cannot be set, deleted or freed"),
            ));
        }
        match self.keyvals.get(&k) {
            // A freed keyval lives on while attributes still use it (MPI 3.1
            // §6.7.2: the free happens once its last attribute is deleted), so a
            // program that kept a copy of it may still read and delete them.
            Some(kv) if kv.freed && !self.in_use(k) => Err(MpiError::new(
                Class::Keyval,
                format!("keyval {k} was freed"),
            )),
            Some(kv) if kv.kind != kind => Err(MpiError::new(
                Class::Keyval,
                format!(
                    "keyval {k} is a {} keyval, not a {} one",
                    kv.kind.noun(),
                    kind.noun()
                ),
            )),
            Some(kv) => Ok(kv),
            None => Err(MpiError::new(Class::Keyval, format!("{k} is not a keyval"))),
        }
    }

    /// Whether some object has an attribute of keyval `k`.
    fn in_use(&self, k: i32) -> bool {
        self.values
            .values()
            .any(|l| l.iter().any(|&(kk, _)| kk == k))
    }

    /// Frees keyval `k` (attributes set with it stay until deleted).
    pub fn free_keyval(&mut self, kind: Kind, k: i32) -> Result<(), MpiError> {
        self.usable(kind, k)?;
        if self.keyvals.get(&k).is_some_and(|kv| kv.freed) {
            return Err(MpiError::new(
                Class::Keyval,
                format!("keyval {k} was freed already"),
            ));
        }
        if let Some(kv) = self.keyvals.get_mut(&k) {
            kv.freed = true;
        }
        Ok(())
    }

    /// The value of attribute `k` on `obj`; `Ok(None)` if unset. Predefined keyvals
    /// are `ffi`'s to answer.
    pub fn get(&self, obj: Obj, k: i32) -> Result<Option<usize>, MpiError> {
        self.usable(obj.0, k)?;
        Ok(self
            .values
            .get(&obj)
            .and_then(|v| v.iter().find(|(kk, _)| *kk == k))
            .map(|&(_, v)| v))
    }

    fn delete_call(&self, k: i32, value: usize) -> Option<Delete> {
        let kv = self.keyvals.get(&k)?;
        kv.delete.map(|f| Delete {
            f,
            keyval: k,
            extra: kv.extra,
            value,
            lang: kv.lang,
        })
    }

    /// What setting attribute `k` on `obj` must delete first (the old value's
    /// delete callback), checked without changing anything.
    pub fn before_set(&self, obj: Obj, k: i32) -> Result<Option<Delete>, MpiError> {
        let old = self.get(obj, k)?;
        Ok(old.and_then(|v| self.delete_call(k, v)))
    }

    /// Sets attribute `k` on `obj` (after [`Attrs::before_set`]'s callback ran).
    pub fn set(&mut self, obj: Obj, k: i32, value: usize) -> Result<(), MpiError> {
        self.usable(obj.0, k)?;
        let list = self.values.entry(obj).or_default();
        match list.iter_mut().find(|(kk, _)| *kk == k) {
            Some(e) => e.1 = value,
            None => list.push((k, value)),
        }
        Ok(())
    }

    /// What deleting attribute `k` from `obj` must call (`MPI_ERR_KEYVAL` if `k`
    /// is not set there: Open MPI and MPICH agree).
    pub fn before_delete(&self, obj: Obj, k: i32) -> Result<Option<Delete>, MpiError> {
        let old = self.get(obj, k)?.ok_or_else(|| {
            MpiError::new(
                Class::Keyval,
                format!(
                    "no attribute is set with keyval {k} on this {}",
                    obj.0.noun()
                ),
            )
        })?;
        Ok(self.delete_call(k, old))
    }

    /// Removes attribute `k` from `obj` (after its delete callback succeeded).
    pub fn remove(&mut self, obj: Obj, k: i32) {
        if let Some(list) = self.values.get_mut(&obj) {
            list.retain(|(kk, _)| *kk != k);
        }
    }

    /// The delete callbacks of every attribute of `obj`, last set first.
    pub fn deletes(&self, obj: Obj) -> Vec<(i32, Option<Delete>)> {
        self.values.get(&obj).map_or_else(Vec::new, |list| {
            list.iter()
                .rev()
                .map(|&(k, v)| (k, self.delete_call(k, v)))
                .collect()
        })
    }

    /// The copy callbacks to run when `obj` is duplicated, in the order the
    /// attributes were set (attributes whose keyval has no copy function are not
    /// copied).
    pub fn copies(&self, obj: Obj) -> Vec<Copy> {
        self.values.get(&obj).map_or_else(Vec::new, |list| {
            list.iter()
                .filter_map(|&(k, value)| {
                    let kv = self.keyvals.get(&k)?;
                    kv.copy.map(|f| Copy {
                        f,
                        keyval: k,
                        extra: kv.extra,
                        value,
                        lang: kv.lang,
                    })
                })
                .collect()
        })
    }

    /// Sets a value a copy callback made on the new object (no check: the keyval
    /// may have been freed since, which the copy must survive).
    pub fn put_copied(&mut self, obj: Obj, k: i32, value: usize) {
        self.values.entry(obj).or_default().push((k, value));
    }

    /// Forgets an object that is gone (its attributes and name).
    pub fn forget(&mut self, obj: Obj) {
        self.values.remove(&obj);
        self.names.remove(&obj);
    }

    /// The name set on `obj`.
    pub fn name(&self, obj: Obj) -> Option<&str> {
        self.names.get(&obj).map(String::as_str)
    }

    /// Names `obj`.
    pub fn set_name(&mut self, obj: Obj, name: String) {
        self.names.insert(obj, name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn copy(
        _: c_int,
        _: c_int,
        _: *mut c_void,
        _: *mut c_void,
        _: *mut c_void,
        _: *mut c_int,
    ) -> c_int {
        0
    }
    extern "C" fn delete(_: c_int, _: c_int, _: *mut c_void, _: *mut c_void) -> c_int {
        0
    }

    const C: Obj = (Kind::Comm, 5);

    #[test]
    fn keyvals_are_checked_for_kind_freedom_and_predefinition() {
        let mut a = Attrs::default();
        let k = a.create_keyval(Kind::Comm, None, None, 0);
        let class = |r: Result<Option<usize>, MpiError>| r.map_err(|e| e.class);
        assert_eq!(class(a.get(C, k)), Ok(None));
        assert_eq!(class(a.get((Kind::Type, 5), k)), Err(Class::Keyval));
        assert_eq!(class(a.get(C, TAG_UB)), Err(Class::Keyval));
        assert_eq!(class(a.get(C, 999)), Err(Class::Keyval));
        a.free_keyval(Kind::Comm, k).unwrap();
        assert_eq!(class(a.get(C, k)), Err(Class::Keyval));
        assert_eq!(
            a.free_keyval(Kind::Comm, k).map_err(|e| e.class),
            Err(Class::Keyval)
        );
        // Freed while an attribute uses it: still there for that attribute.
        let k2 = a.create_keyval(Kind::Comm, None, None, 0);
        a.set(C, k2, 9).unwrap();
        a.free_keyval(Kind::Comm, k2).unwrap();
        assert_eq!(class(a.get(C, k2)), Ok(Some(9)));
        assert!(a.before_delete(C, k2).is_ok());
        a.remove(C, k2);
        assert_eq!(class(a.get(C, k2)), Err(Class::Keyval));
    }

    #[test]
    fn set_replace_delete_and_callbacks_planned() {
        let mut a = Attrs::default();
        let k1 = a.create_keyval(Kind::Comm, Some(copy), Some(delete), 7);
        let k2 = a.create_keyval(Kind::Comm, None, None, 0);
        assert!(a.before_set(C, k1).unwrap().is_none());
        a.set(C, k1, 10).unwrap();
        a.set(C, k2, 20).unwrap();
        let d = a.before_set(C, k1).unwrap().expect("old value to delete");
        assert_eq!((d.keyval, d.extra, d.value), (k1, 7, 10));
        a.set(C, k1, 11).unwrap();
        assert_eq!(a.get(C, k1).unwrap(), Some(11));
        // Only k1 has a copy callback.
        let c = a.copies(C);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].keyval, c[0].value), (k1, 11));
        // Deletes run last set first; k2 has none.
        let ds = a.deletes(C);
        assert_eq!(ds.len(), 2);
        assert_eq!(ds[0].0, k2);
        assert!(ds[0].1.is_none());
        assert_eq!(ds[1].1.map(|d| d.value), Some(11));
        assert_eq!(
            a.before_delete(C, 999).map(|_| ()).map_err(|e| e.class),
            Err(Class::Keyval)
        );
        a.remove(C, k2);
        assert_eq!(
            a.before_delete(C, k2).map(|_| ()).map_err(|e| e.class),
            Err(Class::Keyval)
        );
        // A freed keyval keeps its callbacks for the values set with it.
        a.free_keyval(Kind::Comm, k1).unwrap();
        assert_eq!(a.deletes(C).len(), 1);
        a.set_name(C, "x".into());
        a.forget(C);
        assert!(a.deletes(C).is_empty() && a.name(C).is_none());
    }
}
