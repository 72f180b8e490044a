//! `qcg-mpiexec` (also run as `mpirun` or `mpiexec` through the links that
//! `qcg-mpiexec --install-links DIR` makes): Open MPI's and MPICH's common options
//! mapped onto `qcg run`, which it then becomes (the `qcg` beside it).

use qcg_cli::mpiargs::{self, Mpiexec};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

const HELP: &str = "\
usage: qcg-mpiexec [OPTIONS] [--] PROGRAM [ARGS]   (also as mpirun, mpiexec)

Runs PROGRAM as `qcg run` does (an embedded grid on this machine, or --helper
sockets), with Open MPI's and MPICH's spellings of the common options:
  -n N, -np N, -c N           number of ranks
  -x VAR[=VALUE]              set VAR for every rank (Open MPI)
  -genv VAR VALUE, -env ...   the same (MPICH); -genvlist A,B exports A and B
  --tag-output, -l            prefix each output line with [RANK]
  --output-filename DIR       each rank's output in DIR/1/rank.N/stdout, stderr
  -wdir DIR, -wd DIR          start the ranks in DIR
  --timeout SECS              stop the job after SECS seconds
  --clusters C, --nodes-per-cluster K, --helper SOCKET   qcg run's own
Accepted and ignored (placement is qcg's, a note on stderr names them):
  --hostfile/-machinefile/-f FILE, -H/--host HOSTS, --map-by, --bind-to,
  --rank-by, -ppn, --npernode, --mca K V, --oversubscribe, --allow-run-as-root.
Stdin goes to rank 0. Exit status: the failed rank's, as mpirun.

  qcg-mpiexec --install-links DIR   make DIR/mpirun and DIR/mpiexec point here
";

fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    eprintln!("qcg-mpiexec: {msg}");
    std::process::exit(code)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(1, e));
    match mpiargs::mpiexec(&args).unwrap_or_else(|e| fail(2, e)) {
        Mpiexec::Help => print!("{HELP}"),
        Mpiexec::Version => println!("qcg-mpiexec (qcg) {}", env!("CARGO_PKG_VERSION")),
        Mpiexec::InstallLinks(dir) => install_links(&exe, Path::new(&dir)),
        Mpiexec::Run(m) => {
            if !m.ignored.is_empty() {
                eprintln!(
                    "qcg-mpiexec: ignored (placement is qcg's): {}",
                    m.ignored.join(", ")
                );
            }
            if let Some(d) = &m.wdir {
                std::env::set_current_dir(d).unwrap_or_else(|e| fail(2, format!("-wdir {d}: {e}")));
            }
            let qcg = exe.with_file_name("qcg");
            let e = std::process::Command::new(&qcg)
                .arg("run")
                .args(&m.run)
                .exec();
            fail(1, format!("cannot run {}: {e}", qcg.display()))
        }
    }
}

/// `DIR/mpirun` and `DIR/mpiexec` as symbolic links to this program; an existing
/// file of those names is replaced only when it is already a link.
fn install_links(exe: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(1, format!("{}: {e}", dir.display())));
    for name in ["mpirun", "mpiexec"] {
        let link: PathBuf = dir.join(name);
        if let Ok(m) = std::fs::symlink_metadata(&link) {
            if !m.file_type().is_symlink() {
                fail(
                    1,
                    format!("{} exists and is not a link: not replaced", link.display()),
                );
            }
            std::fs::remove_file(&link)
                .unwrap_or_else(|e| fail(1, format!("{}: {e}", link.display())));
        }
        std::os::unix::fs::symlink(exe, &link)
            .unwrap_or_else(|e| fail(1, format!("{}: {e}", link.display())));
        println!("{} -> {}", link.display(), exe.display());
    }
    println!(
        "put {} first on PATH to run mpirun/mpiexec through qcg",
        dir.display()
    );
}
