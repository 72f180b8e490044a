//! `qcg-mpifort`: the same as `qcg-mpif90` (see `wrapper`).
fn main() {
    qcgmpi::wrapper::main("QCG_MPIF90", "gfortran")
}
