//! Command lines as mpirun users type them, turned into `qcg run`'s.
//!
//! Two pure functions: [`normalize_run`] lets `qcg run` take Open MPI's single-dash
//! long options (`-np 4`) and a program without `--`; [`mpiexec`] maps the common
//! options of Open MPI's and MPICH's `mpiexec` onto `qcg run`'s, for `qcg-mpiexec`
//! (and the `mpirun`/`mpiexec` links to it). Options that make no sense on qcg's
//! grid (placement and binding, MCA parameters) are named in [`Mapped::ignored`], so
//! the caller can say so.

/// `qcg run`'s options that take a value (the next word, unless given as `--opt=V`).
const RUN_VALUED: &[&str] = &[
    "-n",
    "--np",
    "--clusters",
    "--nodes-per-cluster",
    "--helper",
    "--timeout",
    "-x",
    "--output-filename",
    "--hostfile",
    "--machinefile",
];

/// Open MPI's single-dash spellings of long options `qcg run` knows.
fn single_dash(word: &str) -> Option<&'static str> {
    Some(match word {
        "-np" => "--np",
        "-hostfile" => "--hostfile",
        "-machinefile" => "--machinefile",
        "-oversubscribe" => "--oversubscribe",
        "-tag-output" => "--tag-output",
        "-output-filename" => "--output-filename",
        "-timeout" => "--timeout",
        _ => return None,
    })
}

/// `qcg run`'s arguments (what follows `run`) made ready for clap: `-np` becomes
/// `--np` (clap would read `-np 2` as `-n p`), and `--` is put before the program
/// when it is missing (the first word that is neither an option nor an option's
/// value). Words after the program are the program's and are left alone.
pub fn normalize_run(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len() + 1);
    let mut i = 0;
    while i < args.len() {
        let w = args[i].as_str();
        if w == "--" {
            out.extend(args[i..].iter().cloned());
            return out;
        }
        if !w.starts_with('-') || w == "-" {
            out.push("--".to_string());
            out.extend(args[i..].iter().cloned());
            return out;
        }
        let w = single_dash(w).unwrap_or(w);
        out.push(w.to_string());
        if RUN_VALUED.contains(&w) {
            if let Some(v) = args.get(i + 1) {
                out.push(v.clone());
                i += 1;
            }
        }
        i += 1;
    }
    out
}

/// What `qcg-mpiexec` makes of its command line.
#[derive(Debug, PartialEq, Eq)]
pub enum Mpiexec {
    /// Run `qcg run` with these arguments (program included, after `--`), in
    /// `wdir` when one was given.
    Run(Mapped),
    /// `--help`.
    Help,
    /// `--version`.
    Version,
    /// `--install-links DIR`: put `mpirun` and `mpiexec` links to this program in DIR.
    InstallLinks(String),
}

/// An mpiexec command line mapped onto `qcg run`'s.
#[derive(Debug, PartialEq, Eq, Default)]
pub struct Mapped {
    /// `qcg run`'s arguments.
    pub run: Vec<String>,
    /// The working directory the ranks start in (`-wdir`).
    pub wdir: Option<String>,
    /// Options accepted and ignored, as given (said once on stderr).
    pub ignored: Vec<String>,
}

/// A bad `qcg-mpiexec` command line.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MpiexecError {
    /// An option qcg does not know.
    #[error("unknown option `{0}` (`qcg-mpiexec --help` lists the options it maps)")]
    Unknown(String),
    /// An option without its value.
    #[error("option `{0}` needs a value")]
    MissingValue(String),
    /// No program was given.
    #[error("no program to run (`qcg-mpiexec -n N PROGRAM [ARGS]`)")]
    NoProgram,
    /// MPMD (`A : B`) is not supported.
    #[error(
        "several programs separated by `:` (MPMD) are not supported: qcg runs one program per job"
    )]
    Mpmd,
}

/// Options of mpiexec that qcg accepts and ignores, with the number of values each
/// takes: placement and binding are the grid's (`--clusters`, `--helper`), MCA
/// parameters are Open MPI's own.
fn ignored_arity(opt: &str) -> Option<usize> {
    Some(match opt {
        "--bind-to" | "--map-by" | "--rank-by" | "--npernode" | "--ppn" | "--host" | "--hosts"
        | "-H" | "--cpus-per-proc" | "--cpus-per-rank" | "--launcher" | "--bootstrap"
        | "--iface" => 1,
        "--mca" | "--gmca" => 2,
        "--allow-run-as-root"
        | "--quiet"
        | "-q"
        | "--verbose"
        | "-v"
        | "--display-map"
        | "--report-bindings"
        | "--bind-to-core"
        | "--bind-to-socket"
        | "--nooversubscribe"
        | "--genvall"
        | "--envall"
        | "--genvnone"
        | "--envnone" => 0,
        _ => return None,
    })
}

/// Maps an `mpiexec`/`mpirun` command line (without the program name) onto `qcg
/// run`'s. Open MPI's and MPICH's common spellings are both understood; a single
/// dash before a long option is taken as two (`-np`, `-hostfile`, `-genv`).
pub fn mpiexec(args: &[String]) -> Result<Mpiexec, MpiexecError> {
    let mut m = Mapped::default();
    let mut i = 0;
    let value = |i: usize, opt: &str| -> Result<String, MpiexecError> {
        args.get(i + 1)
            .cloned()
            .ok_or_else(|| MpiexecError::MissingValue(opt.to_string()))
    };
    while i < args.len() {
        let given = args[i].as_str();
        if given == "--" {
            i += 1;
            break;
        }
        if given == ":" {
            return Err(MpiexecError::Mpmd);
        }
        if !given.starts_with('-') {
            break;
        }
        // `--opt=value` and `-opt value` are the same as `--opt value`.
        let (opt, inline) = match given.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o.to_string(), Some(v.to_string())),
            _ => (given.to_string(), None),
        };
        let opt = if opt.len() > 2 && !opt.starts_with("--") {
            format!("-{opt}")
        } else {
            opt
        };
        let take = |i: &mut usize| -> Result<String, MpiexecError> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => {
                    let v = value(*i, &opt)?;
                    *i += 1;
                    Ok(v)
                }
            }
        };
        match opt.as_str() {
            "-h" | "--help" => return Ok(Mpiexec::Help),
            "-V" | "--version" => return Ok(Mpiexec::Version),
            "--install-links" => return Ok(Mpiexec::InstallLinks(take(&mut i)?)),
            "-n" | "--n" | "--np" | "-c" | "--c" => {
                let v = take(&mut i)?;
                m.run.extend(["-n".to_string(), v]);
            }
            "-x" | "--x" => {
                let v = take(&mut i)?;
                m.run.extend(["-x".to_string(), v]);
            }
            "--genv" | "--env" => {
                let var = take(&mut i)?;
                let val = value(i, &opt)?;
                i += 1;
                m.run.extend(["-x".to_string(), format!("{var}={val}")]);
            }
            "--genvlist" | "--envlist" => {
                for var in take(&mut i)?.split(',').filter(|v| !v.is_empty()) {
                    m.run.extend(["-x".to_string(), var.to_string()]);
                }
            }
            "--tag-output" | "-l" | "--prepend-rank" | "--timestamp-output" => {
                m.run.push("--tag-output".into())
            }
            "--output-filename" => {
                let v = take(&mut i)?;
                m.run.extend(["--output-filename".to_string(), v]);
            }
            "--hostfile" | "--machinefile" | "-f" | "--default-hostfile" => {
                let v = take(&mut i)?;
                m.run.extend(["--hostfile".to_string(), v]);
            }
            "--oversubscribe" => m.run.push("--oversubscribe".into()),
            "--wdir" | "--wd" => m.wdir = Some(take(&mut i)?),
            "--timeout" | "--clusters" | "--nodes-per-cluster" | "--helper" => {
                let v = take(&mut i)?;
                m.run.extend([opt.clone(), v]);
            }
            other => match ignored_arity(other) {
                Some(k) => {
                    let mut shown = given.to_string();
                    if inline.is_none() {
                        for _ in 0..k {
                            shown.push(' ');
                            shown.push_str(&value(i, other)?);
                            i += 1;
                        }
                    }
                    m.ignored.push(shown);
                }
                None => return Err(MpiexecError::Unknown(given.to_string())),
            },
        }
        i += 1;
    }
    let program = &args[i.min(args.len())..];
    if program.is_empty() {
        return Err(MpiexecError::NoProgram);
    }
    if program.iter().any(|w| w == ":") {
        return Err(MpiexecError::Mpmd);
    }
    m.run.push("--".into());
    m.run.extend(program.iter().cloned());
    Ok(Mpiexec::Run(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn run_takes_np_and_a_program_without_dashes() {
        assert_eq!(normalize_run(&v("-np 2 ./a")), v("--np 2 -- ./a"));
        assert_eq!(
            normalize_run(&v("-n 2 -- ./a -np 3")),
            v("-n 2 -- ./a -np 3")
        );
        assert_eq!(
            normalize_run(&v("-x A=1 --tag-output -np 4 prog -np 9 -x")),
            v("-x A=1 --tag-output --np 4 -- prog -np 9 -x")
        );
        assert_eq!(normalize_run(&v("--np=2 ./a")), v("--np=2 -- ./a"));
        assert_eq!(normalize_run(&v("-n4 ./a")), v("-n4 -- ./a"));
        // An option's value that looks like a program is the option's.
        assert_eq!(
            normalize_run(&v("--helper sock -n 2 prog")),
            v("--helper sock -n 2 -- prog")
        );
        assert_eq!(normalize_run(&v("--help")), v("--help"));
    }

    fn run(s: &str) -> Mapped {
        match mpiexec(&v(s)) {
            Ok(Mpiexec::Run(m)) => m,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn open_mpi_and_mpich_spellings_map_onto_qcg_run() {
        assert_eq!(run("-np 4 ./a b").run, v("-n 4 -- ./a b"));
        assert_eq!(run("-n 2 -- ./a").run, v("-n 2 -- ./a"));
        assert_eq!(run("--np=2 ./a").run, v("-n 2 -- ./a"));
        assert_eq!(
            run("-x A=1 -genv B 2 -envlist C,D ./a").run,
            v("-x A=1 -x B=2 -x C -x D -- ./a")
        );
        assert_eq!(run("-l -n 1 ./a").run, v("--tag-output -n 1 -- ./a"));
        assert_eq!(
            run("-f hosts --oversubscribe -np 2 ./a").run,
            v("--hostfile hosts --oversubscribe -n 2 -- ./a")
        );
        let m = run("--mca btl tcp,self --bind-to core -wdir /tmp -n 2 ./a");
        assert_eq!(m.run, v("-n 2 -- ./a"));
        assert_eq!(m.wdir.as_deref(), Some("/tmp"));
        assert_eq!(m.ignored, vec!["--mca btl tcp,self", "--bind-to core"]);
    }

    #[test]
    fn bad_command_lines_are_named() {
        assert_eq!(
            mpiexec(&v("--frobnicate -n 2 ./a")),
            Err(MpiexecError::Unknown("--frobnicate".into()))
        );
        assert_eq!(
            mpiexec(&v("-n")),
            Err(MpiexecError::MissingValue("-n".into()))
        );
        assert_eq!(mpiexec(&v("-n 2")), Err(MpiexecError::NoProgram));
        assert_eq!(mpiexec(&v("-n 1 ./a : -n 1 ./b")), Err(MpiexecError::Mpmd));
        assert_eq!(mpiexec(&v("--help")), Ok(Mpiexec::Help));
        assert_eq!(
            mpiexec(&v("--install-links bin")),
            Ok(Mpiexec::InstallLinks("bin".into()))
        );
    }
}
