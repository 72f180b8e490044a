//! `qcg-mpicc`: the C compiler with libqcgmpi's header and library (see `wrapper`).
fn main() {
    qcgmpi::wrapper::main("QCG_MPICC", "cc")
}
