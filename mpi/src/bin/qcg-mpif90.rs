//! `qcg-mpif90` (also `qcg-mpifort`): gfortran with libqcgmpi's `mpif.h`, `mpi`
//! module and library (see `wrapper`).
fn main() {
    qcgmpi::wrapper::main("QCG_MPIF90", "gfortran")
}
