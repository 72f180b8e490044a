//! The program's error handlers and error classes (MPI 3.1 §8.3, §8.5): the
//! functions of `MPI_Comm_create_errhandler` and the classes, codes and strings of
//! `MPI_Add_error_class`/`code`/`string`. Pure tables; `ffi` calls the handlers.

use crate::error::{Class, MpiError};
use crate::state::{ERRORS_ARE_FATAL, ERRORS_RETURN};
use libc::c_int;
use std::collections::HashMap;

/// `MPI_Comm_errhandler_function`: `void f(MPI_Comm *, int *, ...)`.
pub type ErrFn = unsafe extern "C" fn(*mut c_int, *mut c_int, ...);

/// `MPI_ERR_LASTCODE`: codes above it are the program's.
pub const LASTCODE: i32 = 64;
/// First handle given to a program's error handler.
const FIRST_HANDLER: i32 = 3;

/// A code the program added: its class and text.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Code {
    class: i32,
    text: String,
}

/// The program's error handlers and codes.
pub struct Handlers {
    /// Never removed: a freed handler stays attached to the communicators that
    /// use it, as MPI requires; `MPI_Errhandler_free` only nulls the caller's handle.
    fns: HashMap<i32, ErrFn>,
    next: i32,
    codes: HashMap<i32, Code>,
    last: i32,
}

impl Default for Handlers {
    fn default() -> Handlers {
        Handlers {
            fns: HashMap::new(),
            next: FIRST_HANDLER,
            codes: HashMap::new(),
            last: LASTCODE,
        }
    }
}

impl Handlers {
    /// Registers a handler function.
    pub fn create(&mut self, f: ErrFn) -> i32 {
        let h = self.next;
        self.next += 1;
        self.fns.insert(h, f);
        h
    }

    /// Whether `h` is an error handler (predefined or the program's).
    pub fn exists(&self, h: i32) -> bool {
        h == ERRORS_ARE_FATAL || h == ERRORS_RETURN || self.fns.contains_key(&h)
    }

    /// Checks handle `h`.
    pub fn check(&self, h: i32) -> Result<(), MpiError> {
        if self.exists(h) {
            Ok(())
        } else {
            Err(MpiError::new(
                Class::Arg,
                format!("{h} is not an error handler"),
            ))
        }
    }

    /// The function of a program's handler.
    pub fn function(&self, h: i32) -> Option<ErrFn> {
        self.fns.get(&h).copied()
    }

    /// The last code used (`MPI_LASTUSEDCODE`).
    pub fn last_used(&self) -> i32 {
        self.last
    }

    /// `MPI_Add_error_class`: a new class (also a code of itself).
    pub fn add_class(&mut self) -> i32 {
        self.last += 1;
        let c = self.last;
        self.codes.insert(
            c,
            Code {
                class: c,
                text: String::new(),
            },
        );
        c
    }

    /// Whether `c` is an error class, MPI's or the program's.
    fn is_class(&self, c: i32) -> bool {
        c == 0 || Class::from_code(c).is_some() || self.codes.get(&c).is_some_and(|x| x.class == c)
    }

    /// `MPI_Add_error_code`: a new code of `class`.
    pub fn add_code(&mut self, class: i32) -> Result<i32, MpiError> {
        if !self.is_class(class) {
            return Err(MpiError::new(
                Class::Arg,
                format!("{class} is not an error class"),
            ));
        }
        self.last += 1;
        self.codes.insert(
            self.last,
            Code {
                class,
                text: String::new(),
            },
        );
        Ok(self.last)
    }

    /// `MPI_Add_error_string`: only the program's codes take one.
    pub fn set_text(&mut self, code: i32, text: &str) -> Result<(), MpiError> {
        match self.codes.get_mut(&code) {
            Some(c) => {
                c.text = text.to_string();
                Ok(())
            }
            None => Err(MpiError::new(
                Class::Arg,
                format!("{code} is not an error code added by the program"),
            )),
        }
    }

    /// The class of a program's code.
    pub fn class_of(&self, code: i32) -> Option<i32> {
        self.codes.get(&code).map(|c| c.class)
    }

    /// The text of a program's code ("" until set).
    pub fn text(&self, code: i32) -> Option<&str> {
        self.codes.get(&code).map(|c| c.text.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_codes_number_on_from_lastcode() {
        let mut h = Handlers::default();
        assert_eq!(h.last_used(), LASTCODE);
        let c = h.add_class();
        assert_eq!(c, LASTCODE + 1);
        let k = h.add_code(c).unwrap();
        assert_eq!(k, LASTCODE + 2);
        assert_eq!(h.class_of(k), Some(c));
        assert_eq!(h.class_of(c), Some(c));
        let k2 = h.add_code(Class::Count as i32).unwrap();
        assert_eq!(h.class_of(k2), Some(Class::Count as i32));
        // A code is not a class.
        assert_eq!(h.add_code(k).map_err(|e| e.class), Err(Class::Arg));
        assert_eq!(h.add_code(9999).map_err(|e| e.class), Err(Class::Arg));
        assert_eq!(h.last_used(), k2);
        assert_eq!(h.text(k), Some(""));
        h.set_text(k, "mine").unwrap();
        assert_eq!(h.text(k), Some("mine"));
        assert_eq!(h.set_text(3, "x").map_err(|e| e.class), Err(Class::Arg));
    }

    #[test]
    fn handlers_are_known_by_handle() {
        // (A variadic C function cannot be defined in stable Rust: the C test
        // program registers real ones.)
        let h = Handlers::default();
        assert!(h.exists(ERRORS_RETURN) && h.exists(ERRORS_ARE_FATAL));
        assert!(!h.exists(FIRST_HANDLER) && h.function(FIRST_HANDLER).is_none());
        assert_eq!(h.check(99).map_err(|e| e.class), Err(Class::Arg));
    }
}
