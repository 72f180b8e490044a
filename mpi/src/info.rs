//! `MPI_Info` objects (MPI 3.1 ch. 9): ordered (key, value) string pairs, the
//! table of their handles and the hints set on communicators. Pure: `ffi::info`
//! only moves C strings in and out.

use crate::error::{Class, MpiError};
use std::collections::HashMap;

/// `MPI_MAX_INFO_KEY`.
pub const MAX_KEY: usize = 255;
/// `MPI_MAX_INFO_VAL`.
pub const MAX_VAL: usize = 1024;
/// `MPI_INFO_ENV`.
pub const ENV: i32 = 1;
/// First handle given to an info the program makes.
const FIRST_USER: i32 = 2;

/// One info object: keys in the order they were first set (what
/// `MPI_Info_get_nthkey` walks, as MPICH and Open MPI do).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    entries: Vec<(String, String)>,
}

/// Checks a key: 1 to `MPI_MAX_INFO_KEY` characters.
pub fn check_key(key: &str) -> Result<(), MpiError> {
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(MpiError::new(
            Class::InfoKey,
            format!(
                "the info key {key:?} has {} characters (1 to {MAX_KEY})",
                key.len()
            ),
        ));
    }
    Ok(())
}

impl Info {
    /// Sets `key` to `value` (a key set again keeps its place).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), MpiError> {
        check_key(key)?;
        if value.is_empty() || value.len() > MAX_VAL {
            return Err(MpiError::new(
                Class::InfoValue,
                format!(
                    "the value of info key {key:?} has {} characters (1 to {MAX_VAL})",
                    value.len()
                ),
            ));
        }
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = value.to_string(),
            None => self.entries.push((key.to_string(), value.to_string())),
        }
        Ok(())
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Result<Option<&str>, MpiError> {
        check_key(key)?;
        Ok(self
            .entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str()))
    }

    /// Deletes `key` (`MPI_ERR_INFO_NOKEY` if it is not set).
    pub fn delete(&mut self, key: &str) -> Result<(), MpiError> {
        check_key(key)?;
        let i = self
            .entries
            .iter()
            .position(|(k, _)| k == key)
            .ok_or_else(|| {
                MpiError::new(Class::InfoNokey, format!("info key {key:?} is not set"))
            })?;
        self.entries.remove(i);
        Ok(())
    }

    /// How many keys are set.
    pub fn nkeys(&self) -> usize {
        self.entries.len()
    }

    /// The `n`th key set.
    pub fn nthkey(&self, n: i32) -> Result<&str, MpiError> {
        usize::try_from(n)
            .ok()
            .and_then(|i| self.entries.get(i))
            .map(|(k, _)| k.as_str())
            .ok_or_else(|| {
                MpiError::new(
                    Class::Arg,
                    format!("key number {n} is not in 0..{}", self.entries.len()),
                )
            })
    }
}

/// The info handles and communicators' hints.
pub struct Infos {
    table: HashMap<i32, Info>,
    next: i32,
    /// Hints set on communicators (`MPI_Comm_set_info`, `MPI_Comm_dup_with_info`).
    pub hints: HashMap<i32, Info>,
}

impl Infos {
    /// A table holding `MPI_INFO_ENV` (`env`).
    pub fn new(env: Info) -> Infos {
        Infos {
            table: HashMap::from([(ENV, env)]),
            next: FIRST_USER,
            hints: HashMap::new(),
        }
    }

    /// The info of handle `h`.
    pub fn get(&self, h: i32) -> Result<&Info, MpiError> {
        self.table
            .get(&h)
            .ok_or_else(|| MpiError::new(Class::Info, format!("{h} is not an info object")))
    }

    /// The info of handle `h`, to change (`MPI_INFO_ENV` may not be changed).
    pub fn get_mut(&mut self, h: i32) -> Result<&mut Info, MpiError> {
        if h == ENV {
            return Err(MpiError::new(Class::Info, "MPI_INFO_ENV cannot be changed"));
        }
        self.table
            .get_mut(&h)
            .ok_or_else(|| MpiError::new(Class::Info, format!("{h} is not an info object")))
    }

    /// The info of handle `h`, or an empty one for `MPI_INFO_NULL` (0).
    pub fn get_or_empty(&self, h: i32) -> Result<Info, MpiError> {
        if h == 0 {
            return Ok(Info::default());
        }
        self.get(h).cloned()
    }

    /// Registers an info.
    pub fn add(&mut self, i: Info) -> i32 {
        let h = self.next;
        self.next += 1;
        self.table.insert(h, i);
        h
    }

    /// Frees info `h`.
    pub fn free(&mut self, h: i32) -> Result<(), MpiError> {
        if h == ENV {
            return Err(MpiError::new(Class::Info, "MPI_INFO_ENV cannot be freed"));
        }
        self.table
            .remove(&h)
            .map(|_| ())
            .ok_or_else(|| MpiError::new(Class::Info, format!("{h} is not an info object")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_order_and_values_are_replaced() {
        let mut i = Info::default();
        i.set("b", "1").unwrap();
        i.set("a", "2").unwrap();
        i.set("b", "3").unwrap();
        assert_eq!(i.nkeys(), 2);
        assert_eq!(i.nthkey(0).unwrap(), "b");
        assert_eq!(i.nthkey(1).unwrap(), "a");
        assert_eq!(i.get("b").unwrap(), Some("3"));
        assert_eq!(i.get("c").unwrap(), None);
        i.delete("b").unwrap();
        assert_eq!(i.nthkey(0).unwrap(), "a");
        assert_eq!(i.nthkey(1).map_err(|e| e.class), Err(Class::Arg));
        assert_eq!(i.nthkey(-1).map_err(|e| e.class), Err(Class::Arg));
    }

    #[test]
    fn bad_keys_and_values_get_their_classes() {
        let mut i = Info::default();
        let long_key = "k".repeat(MAX_KEY + 1);
        assert_eq!(i.set("", "v").map_err(|e| e.class), Err(Class::InfoKey));
        assert_eq!(
            i.set(&long_key, "v").map_err(|e| e.class),
            Err(Class::InfoKey)
        );
        assert!(i.set(&"k".repeat(MAX_KEY), "v").is_ok());
        assert_eq!(i.set("k", "").map_err(|e| e.class), Err(Class::InfoValue));
        assert_eq!(
            i.set("k", &"v".repeat(MAX_VAL + 1)).map_err(|e| e.class),
            Err(Class::InfoValue)
        );
        assert_eq!(i.delete("nope").map_err(|e| e.class), Err(Class::InfoNokey));
    }

    #[test]
    fn the_table_guards_info_env() {
        let mut t = Infos::new(Info::default());
        assert!(t.get(ENV).is_ok());
        assert_eq!(
            t.get_mut(ENV).map(|_| ()).map_err(|e| e.class),
            Err(Class::Info)
        );
        assert_eq!(t.free(ENV).map_err(|e| e.class), Err(Class::Info));
        let h = t.add(Info::default());
        assert!(h > ENV);
        t.free(h).unwrap();
        assert_eq!(t.get(h).map(|_| ()).map_err(|e| e.class), Err(Class::Info));
        assert_eq!(t.get_or_empty(0).unwrap(), Info::default());
    }
}
