//! Compiles the `long double` reductions (`csrc/longdouble.c`) with the system's C
//! compiler: Rust has no 80-bit float, and going through f64 would lose precision.

fn main() {
    println!("cargo:rerun-if-changed=csrc/longdouble.c");
    cc::Build::new()
        .file("csrc/longdouble.c")
        .opt_level(2)
        .warnings(true)
        .compile("qcgmpi_longdouble");
}
