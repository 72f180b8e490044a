//! Compiles the `long double` reductions (`csrc/longdouble.c`) with the system's C
//! compiler (Rust has no 80-bit float, and going through f64 would lose precision),
//! and generates from the API table (`api/functions.txt`, see `src/api.rs`) the
//! `MPI_X` entry points that call the `PMPI_X` implementations.

#[path = "src/api.rs"]
#[allow(dead_code)]
mod api;

fn main() {
    println!("cargo:rerun-if-changed=csrc/longdouble.c");
    println!("cargo:rerun-if-changed=api/functions.txt");
    println!("cargo:rerun-if-changed=src/api.rs");
    cc::Build::new()
        .file("csrc/longdouble.c")
        .opt_level(2)
        .warnings(true)
        .compile("qcgmpi_longdouble");

    let table = std::fs::read_to_string("api/functions.txt").expect("reading api/functions.txt");
    let api = match api::parse(&table) {
        Ok(a) => a,
        Err(e) => panic!("{e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR is set"));
    let pmpi = api::pmpi_rs(&api).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(out.join("pmpi.rs"), pmpi).expect("writing pmpi.rs");
    let fortran = api::fortran_rs(&api).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(out.join("fortran.rs"), fortran).expect("writing fortran.rs");
}
