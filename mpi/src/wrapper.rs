//! `qcg-mpicc` / `qcg-mpicxx` / `qcg-mpif90` (`qcg-mpifort`): run the system's C,
//! C++ or Fortran compiler with the include path of `mpi.h` (`mpif.h`, and the
//! `mpi` module, built on first use), and, when linking, libqcgmpi and its rpath,
//! as `mpicc` does.
//! `--showme` prints the command instead of running it.
//!
//! The files are found relative to the wrapper itself: in a cargo target folder
//! (`target/debug/qcg-mpicc` beside `libqcgmpi.so` or `deps/libqcgmpi.so`, the
//! newer of the two; the header in the source tree's `mpi/include`) or in an installed tree (`PREFIX/bin`, `PREFIX/lib`,
//! `PREFIX/include`). `QCG_MPI_HOME` overrides both (its `include` and `lib`), and
//! `QCG_MPICC` / `QCG_MPICXX` / `QCG_MPIF90` choose the compiler (default `cc` /
//! `c++` / `gfortran`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the header and the library are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Folder holding `mpi.h`.
    pub include: PathBuf,
    /// Folder holding `libqcgmpi.so`.
    pub lib: PathBuf,
}

const LIB: &str = "libqcgmpi.so";

/// Finds the header and library for a wrapper living in `exe_dir`.
pub fn locate(exe_dir: &Path, home: Option<&Path>) -> Result<Paths, String> {
    if let Some(h) = home {
        return Ok(Paths {
            include: h.join("include"),
            lib: h.join("lib"),
        });
    }
    // In a cargo target folder `cargo test` refreshes only `deps/`'s copy: the
    // newest library wins.
    let lib = [
        exe_dir.to_path_buf(),
        exe_dir.join("deps"),
        exe_dir.join("../lib"),
        exe_dir.join(".."),
    ]
    .into_iter()
    .filter_map(|d| {
        let t = d.join(LIB).metadata().and_then(|m| m.modified()).ok()?;
        Some((t, d))
    })
    .max_by_key(|(t, _)| *t)
    .map(|(_, d)| d)
    .ok_or_else(|| {
        format!(
            "{LIB} is not beside {} nor in ../lib (build it with `cargo build -p qcg-mpi`, or set QCG_MPI_HOME)",
            exe_dir.display()
        )
    })?;
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let include = [
        exe_dir.join("../include"),
        exe_dir.join("../../mpi/include"),
        source_tree,
    ]
    .into_iter()
    .find(|d| d.join("mpi.h").exists())
    .ok_or_else(|| {
        format!(
            "mpi.h is not in {}/../include nor in the source tree (set QCG_MPI_HOME)",
            exe_dir.display()
        )
    })?;
    let canon = |p: PathBuf| p.canonicalize().unwrap_or(p);
    Ok(Paths {
        include: canon(include),
        lib: canon(lib),
    })
}

/// The compiler's arguments for the wrapper's `args`.
pub fn command(paths: &Paths, args: &[String]) -> Vec<String> {
    let compile_only = args
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-E" | "-S" | "-M" | "-MM"));
    let mut out = vec![format!("-I{}", paths.include.display())];
    out.extend(args.iter().cloned());
    if !compile_only {
        out.push(format!("-L{}", paths.lib.display()));
        out.push(format!("-Wl,-rpath,{}", paths.lib.display()));
        out.push("-lqcgmpi".into());
    }
    out
}

/// The arguments gfortran gets before the program's: the `mpi` module's folder,
/// and argument mismatches as warnings (a buffer is passed as whatever type it
/// has, as with every MPI's `mpif.h`; gfortran 10 and later make that an error).
pub fn fortran_flags(paths: &Paths, module_dir: &Path) -> Vec<String> {
    vec![
        "-fallow-argument-mismatch".into(),
        format!("-I{}", module_dir.display()),
        format!("-I{}", paths.include.display()),
    ]
}

/// Compiles `include/mpi.f90` into `mpi.mod`, and `include/mpi_f08.f90` into
/// `mpi_f08.mod` and `libqcgmpi_f08.a` (its procedures), in the library's folder
/// (`qcg-fortran/`) unless newer ones than their sources are there; returns that
/// folder. The modules are built by the user's gfortran, so their format matches.
fn fortran_module(paths: &Paths, compiler: &str) -> Result<PathBuf, String> {
    let dir = paths.lib.join("qcg-fortran");
    let sources = ["mpi.f90", "mpi_f08.f90"].map(|f| paths.include.join(f));
    let newest_source = sources
        .iter()
        .chain([paths.include.join("mpif.h")].iter())
        .filter_map(|p| p.metadata().and_then(|m| m.modified()).ok())
        .max();
    let built = ["mpi.mod", "mpi_f08.mod", F08_ARCHIVE]
        .iter()
        .map(|f| dir.join(f).metadata().and_then(|m| m.modified()).ok())
        .collect::<Option<Vec<_>>>()
        .and_then(|t| t.into_iter().min());
    if let (Some(b), Some(s)) = (built, newest_source) {
        if b >= s {
            return Ok(dir);
        }
    }
    // Built in a folder of its own, then moved: two wrappers at once both succeed.
    let tmp = paths
        .lib
        .join(format!("qcg-fortran.tmp{}", std::process::id()));
    std::fs::create_dir_all(&tmp)
        .and_then(|_| std::fs::create_dir_all(&dir))
        .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let fail = |what: String| {
        let _ = std::fs::remove_dir_all(&tmp);
        what
    };
    for src in &sources {
        let obj = tmp
            .join(src.file_stem().unwrap_or_default())
            .with_extension("o");
        let out = Command::new(compiler)
            .arg("-c")
            .arg("-O1")
            .arg(format!("-I{}", paths.include.display()))
            .arg(format!("-J{}", tmp.display()))
            .arg(src)
            .arg("-o")
            .arg(&obj)
            .output()
            .map_err(|e| fail(format!("cannot run {compiler}: {e}")))?;
        if !out.status.success() {
            return Err(fail(format!(
                "building the {} module with {compiler} failed:\n{}",
                src.file_stem().unwrap_or_default().to_string_lossy(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
    }
    let ar = Command::new("ar")
        .arg("rcs")
        .arg(tmp.join(F08_ARCHIVE))
        .arg(tmp.join("mpi_f08.o"))
        .output()
        .map_err(|e| fail(format!("cannot run ar (binutils): {e}")))?;
    if !ar.status.success() {
        return Err(fail(format!(
            "ar failed: {}",
            String::from_utf8_lossy(&ar.stderr)
        )));
    }
    // The archive and the types' modules first, mpi.mod last (it marks the build).
    let mut moved = Ok(());
    for f in [
        F08_ARCHIVE,
        "qcg_mpi_f08_types.mod",
        "qcg_mpi_f08_bindings.mod",
        "mpi_f08.mod",
        "mpi.mod",
    ] {
        moved = moved.and_then(|_| std::fs::rename(tmp.join(f), dir.join(f)));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    moved.map_err(|e| format!("cannot move the modules into {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The archive of `mpi_f08`'s procedures, in the modules' folder.
const F08_ARCHIVE: &str = "libqcgmpi_f08.a";

/// A Fortran link line: `mpi_f08`'s procedures (taken only if the program uses
/// them) ahead of libqcgmpi.
fn fortran_link(cmd: &mut Vec<String>, module_dir: &Path) {
    if let Some(i) = cmd.iter().position(|a| a == "-lqcgmpi") {
        cmd.insert(i, format!("-L{}", module_dir.display()));
        cmd.insert(i + 1, "-lqcgmpi_f08".into());
    }
}

/// The wrapper's `main`: `var` names the variable choosing the compiler.
pub fn main(var: &str, default: &str) -> ! {
    let name = match default {
        "cc" => "qcg-mpicc",
        "gfortran" => "qcg-mpif90",
        _ => "qcg-mpicxx",
    };
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let show = args
        .iter()
        .any(|a| a == "--showme" || a == "-showme" || a == "-show");
    args.retain(|a| a != "--showme" && a != "-showme" && a != "-show");
    let compiler = std::env::var(var).unwrap_or_else(|_| default.to_string());
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.canonicalize().ok())
        .and_then(|e| e.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    let home = std::env::var_os("QCG_MPI_HOME").map(PathBuf::from);
    let paths = match locate(&exe_dir, home.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(2);
        }
    };
    let mut cmd = command(&paths, &args);
    if default == "gfortran" {
        let module_dir = if show {
            paths.lib.join("qcg-fortran")
        } else {
            match fortran_module(&paths, &compiler) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("{name}: {e}");
                    std::process::exit(1);
                }
            }
        };
        fortran_link(&mut cmd, &module_dir);
        let mut flags = fortran_flags(&paths, &module_dir);
        flags.append(&mut cmd);
        cmd = flags;
    }
    if show {
        println!("{compiler} {}", cmd.join(" "));
        std::process::exit(0);
    }
    let mut child = match Command::new(&compiler)
        .args(&cmd)
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: cannot run {compiler}: {e}");
            std::process::exit(127);
        }
    };
    // The compiler's messages go on to ours as they come; a function or constant of
    // a part of MPI we lack is then named (the linker or gfortran alone would say
    // `undefined reference` or `no IMPLICIT type`).
    let mut said = String::new();
    if let Some(err) = child.stderr.take() {
        use std::io::{BufRead, Write};
        let mut out = std::io::stderr();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = writeln!(out, "{line}");
            if said.len() < 1 << 20 {
                said.push_str(&line);
                said.push('\n');
            }
        }
    }
    let status = child.wait().map_or(1, |s| s.code().unwrap_or(1));
    if status != 0 {
        for why in absent_named(&said) {
            eprintln!("{name}: {why}");
        }
    }
    std::process::exit(status);
}

/// The table of what we provide and lack, as built into the wrappers.
fn table() -> crate::api::Api {
    crate::api::parse(include_str!("../api/functions.txt")).unwrap_or_default()
}

/// What a failed build's messages show the program uses of the MPI we lack: each
/// function the linker did not find (`mpi_file_open_`, `MPI_File_open`) that the
/// table lists as absent, and each undeclared Fortran name of such a part
/// (`MPI_MODE_CREATE` of I/O), one sentence each, in order, without repeats.
pub fn absent_named(messages: &str) -> Vec<String> {
    let api = table();
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    for line in messages.lines() {
        if let Some(sym) = quoted_after(line, "undefined reference to ") {
            let bare = sym.trim_end_matches('_').to_ascii_lowercase();
            let bare = bare
                .strip_prefix('p')
                .filter(|b| b.starts_with("mpi_"))
                .unwrap_or(&bare);
            if let Some(a) = api
                .absent
                .iter()
                .find(|a| a.name.to_ascii_lowercase() == bare)
            {
                let what = if a.chapter == 0 {
                    format!("{}, not in MPI 3.1", a.part)
                } else {
                    format!("{}, MPI 3.1 chapter {}", a.part, a.chapter)
                };
                // Fortran's names are the upper-case ones; C's the table's.
                let named = if sym.ends_with('_') || sym == sym.to_ascii_lowercase() {
                    a.name.to_ascii_uppercase()
                } else {
                    a.name.clone()
                };
                push(format!("qcg does not provide {named} ({what})"));
            }
        }
        if let Some(sym) = quoted_after(line, "Symbol ") {
            if line.contains("has no IMPLICIT type") {
                if let Some(part) = constant_part(&sym.to_ascii_uppercase()) {
                    push(format!(
                        "qcg does not provide {} ({part}): qcg's `mpi` module and mpif.h leave it out",
                        sym.to_ascii_uppercase()
                    ));
                }
            }
        }
    }
    out
}

/// The part of MPI a constant we leave out belongs to, by its name.
fn constant_part(name: &str) -> Option<&'static str> {
    const PARTS: [(&str, &str); 12] = [
        (
            "MPI_MODE_",
            "I/O or one-sided communication, MPI 3.1 chapters 11 and 13",
        ),
        ("MPI_SEEK_", "I/O, MPI 3.1 chapter 13"),
        ("MPI_DISPLACEMENT_CURRENT", "I/O, MPI 3.1 chapter 13"),
        ("MPI_FILE_NULL", "I/O, MPI 3.1 chapter 13"),
        ("MPI_ORDER_", "I/O, MPI 3.1 chapter 13"),
        ("MPI_WIN_", "one-sided communication, MPI 3.1 chapter 11"),
        ("MPI_LOCK_", "one-sided communication, MPI 3.1 chapter 11"),
        ("MPI_REPLACE", "one-sided communication, MPI 3.1 chapter 11"),
        ("MPI_NO_OP", "one-sided communication, MPI 3.1 chapter 11"),
        ("MPI_ARGV_NULL", "dynamic processes, MPI 3.1 chapter 10"),
        ("MPI_ARGVS_NULL", "dynamic processes, MPI 3.1 chapter 10"),
        (
            "MPI_ERRCODES_IGNORE",
            "dynamic processes, MPI 3.1 chapter 10",
        ),
    ];
    PARTS
        .iter()
        .find(|(p, _)| name.starts_with(p))
        .map(|(_, part)| *part)
}

/// The name quoted just after `key` on `line`, whatever the quotes (`x', 'x', ‘x’).
fn quoted_after(line: &str, key: &str) -> Option<String> {
    let rest = &line[line.find(key)? + key.len()..];
    let rest = rest.trim_start_matches(['`', '\'', '‘', '"']);
    let end = rest.find(['`', '\'', '’', '"'])?;
    Some(rest[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_build_names_what_qcg_lacks() {
        let said = "/usr/bin/ld: /tmp/ccX.o: in function `MAIN__':\n\
            io.f90:(.text+0x5c): undefined reference to `mpi_file_open_'\n\
            io.f90:(.text+0x9c): undefined reference to `mpi_file_open_'\n\
            x.c:(.text+0x1): undefined reference to `PMPI_Win_create'\n\
            x.c:(.text+0x1): undefined reference to `not_mpi_at_all'\n\
            io.f90:7:30:\n\
            Error: Symbol 'mpi_mode_create' at (1) has no IMPLICIT type\n\
            Error: Symbol 'my_var' at (1) has no IMPLICIT type\n";
        let got = absent_named(said);
        assert_eq!(
            got,
            vec![
                "qcg does not provide MPI_FILE_OPEN (I/O, MPI 3.1 chapter 13)".to_string(),
                "qcg does not provide MPI_Win_create (one-sided communication, MPI 3.1 chapter 11)"
                    .to_string(),
                "qcg does not provide MPI_MODE_CREATE (I/O or one-sided communication, MPI 3.1 \
                 chapters 11 and 13): qcg's `mpi` module and mpif.h leave it out"
                    .to_string(),
            ]
        );
        assert!(absent_named("undefined reference to `mpi_send_'\n").is_empty());
        assert!(absent_named("").is_empty());
    }

    #[test]
    fn linking_adds_the_library_and_its_rpath_compiling_does_not() {
        let p = Paths {
            include: "/i".into(),
            lib: "/l".into(),
        };
        let link = command(&p, &["x.c".into(), "-o".into(), "x".into()]);
        assert_eq!(
            link,
            [
                "-I/i",
                "x.c",
                "-o",
                "x",
                "-L/l",
                "-Wl,-rpath,/l",
                "-lqcgmpi"
            ]
        );
        let compile = command(&p, &["-c".into(), "x.c".into()]);
        assert_eq!(compile, ["-I/i", "-c", "x.c"]);
    }
}
