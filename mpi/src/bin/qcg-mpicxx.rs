//! `qcg-mpicxx`: the C++ compiler with libqcgmpi's header and library (see `wrapper`).
fn main() {
    qcgmpi::wrapper::main("QCG_MPICXX", "c++")
}
