//! The pieces behind the `qcg` command: the job commands ([`submit`]) and the
//! mpirun options `qcg run` and `qcg-mpiexec` accept ([`mpiargs`]). The embedded
//! grid, the launcher and the broker's client are in `qcg-grid`.

pub mod mpiargs;
pub mod submit;
