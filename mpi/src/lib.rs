//! libqcgmpi: MPI's C interface over libqcg, so that C programs written for MPI
//! build with `qcg-mpicc` and run across clusters with `qcg run`.
//!
//! `mpi/include/mpi.h` declares the subset implemented (MPI 3.1 signatures);
//! anything else is absent, so a program using it fails to build, never at run
//! time. The layers:
//! - [`types`]: datatypes as runs of bytes, packing, the predefined reductions
//!   (pure, tested without a network);
//! - [`agree`]: reductions whose chunks carry what each rank passed, so that ranks
//!   that disagree on the operation, root or datatype are named (pure);
//! - [`longdouble`]: C's `long double` arithmetic, from a few lines of C;
//! - [`groups`]: group arithmetic (ranges, union, intersection, translation);
//! - [`attrs`], [`info`], [`handlers`]: keyvals, attributes and names; info
//!   objects; the program's error handlers and error codes (tables, pure);
//! - [`topo`]: process topologies (`MPI_Dims_create`, grids, graphs) and the
//!   neighbour lists of the neighbourhood collectives (pure);
//! - [`state`]: the handle tables and argument checks (safe code);
//! - [`inter`]: what both sides of an intercommunicator derive alike (pure);
//! - [`modes`]: buffered sends' accounting, persistent requests, matched
//!   messages (safe code);
//! - `ffi`: the `extern "C"` functions, the only place with `unsafe` (with
//!   `longdouble`'s calls into C): it turns C pointers into slices and calls
//!   libqcg's requests and collectives.
//!
//! Handles are C ints (predefined ones are constants of `mpi.h`). Errors go through
//! the communicator's handler: `MPI_ERRORS_ARE_FATAL` (the default) prints the
//! call, the rank and what was wrong and ends the process, which makes `qcg run`
//! stop the job; `MPI_ERRORS_RETURN` returns the error class. A process that
//! initialized MPI and exits without `MPI_Finalize` exits with status 1 naming its
//! rank.
//!
//! `MPI_Ssend` returns once its receive has matched (libqcg's synchronous send);
//! reductions on `MPI_LONG_DOUBLE` and `MPI_LONG_DOUBLE_INT` compute in C's own
//! `long double` ([`longdouble`]), never through `f64`.
//!
//! ```c
//! #include <mpi.h>
//! int main(int argc, char **argv) {
//!     int rank, x = 0;
//!     MPI_Init(&argc, &argv);
//!     MPI_Comm_rank(MPI_COMM_WORLD, &rank);
//!     if (rank == 0) x = 42;
//!     MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
//!     MPI_Finalize();
//!     return x == 42 ? 0 : 1;
//! }
//! ```

pub mod agree;
pub mod api;
pub mod attrs;
pub mod error;
pub mod groups;
pub mod handlers;
pub mod info;
pub mod inter;
pub mod longdouble;
pub mod modes;
pub mod state;
pub mod topo;
pub mod types;

pub mod wrapper;

pub(crate) mod ffi;
