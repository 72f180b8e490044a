//! `qcg`: the user's command line.
// The commands' doc comments are their --help texts, which name JobProfile elements
// as `<workingDirectory>`: rustdoc would read those as HTML tags.
#![allow(rustdoc::invalid_html_tags)]

use clap::{Args, Parser, Subcommand};
use qcg_cli::{mpiargs, submit};
use qcg_grid::{client, launch};
use qcg_proto::tls::{Ca, Role};
use std::path::PathBuf;

/// qcg: run parallel programs across clusters behind firewalls and NATs.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Manage the grid's certificate authority.
    #[command(subcommand)]
    Ca(CaCmd),
    /// Run a job of N processes, as mpirun does.
    ///
    /// Without --helper, starts an embedded local grid on loopback (a broker,
    /// --clusters frontals, --nodes-per-cluster helpers each, an ephemeral CA) and
    /// runs the job on it. With --helper, runs the job on already running helpers.
    /// What ranks print passes as they print it (`--tag-output` puts `[RANK] ` before
    /// each line); rank 0 reads `qcg run`'s stdin. Exits non-zero, naming the rank and
    /// its status, if any rank fails; the other ranks are then stopped. Open MPI's
    /// spellings work too: `qcg run -np 4 ./a.out` (`--` before the program is
    /// optional).
    Run {
        /// Number of processes (`-np N` works too).
        #[arg(short = 'n', long = "np")]
        n: u32,
        /// Clusters of the embedded grid (ranks are cut into one block per cluster).
        #[arg(long, default_value_t = 1)]
        clusters: usize,
        /// Nodes per cluster of the embedded grid (ranks go round-robin over them).
        #[arg(long, default_value_t = 1)]
        nodes_per_cluster: usize,
        /// Use this running helper's socket instead of an embedded grid; repeat for
        /// several nodes (ranks go round-robin over them).
        #[arg(long = "helper", value_name = "SOCKET")]
        helpers: Vec<PathBuf>,
        /// Stop the job after this many seconds.
        #[arg(long, value_name = "SECS")]
        timeout: Option<u64>,
        /// Set VAR for every rank: to VALUE, or to its value here (repeatable).
        #[arg(short = 'x', value_name = "VAR[=VALUE]")]
        export: Vec<String>,
        /// Put `[RANK] ` before each line a rank prints.
        #[arg(long)]
        tag_output: bool,
        /// Write each rank's stdout and stderr to DIR/1/rank.N/stdout and stderr
        /// (Open MPI's layout) instead of the terminal.
        #[arg(long, value_name = "DIR")]
        output_filename: Option<PathBuf>,
        /// Accepted for mpirun's sake and ignored: ranks go where --clusters,
        /// --nodes-per-cluster or --helper put them (a note on stderr says so).
        #[arg(long, visible_alias = "machinefile", value_name = "FILE")]
        hostfile: Option<PathBuf>,
        /// Accepted for mpirun's sake: qcg never limits ranks to the cores.
        #[arg(long)]
        oversubscribe: bool,
        /// The program and its arguments.
        #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
        command: Vec<String>,
    },
    /// Submit a JobProfile (XML) and follow the job to its end.
    ///
    /// The broker schedules the profile's groups onto its clusters, reserves the
    /// slots and has the frontals start the processes. Each line a rank prints is
    /// shown prefixed with `[RANK]` as it comes. Without --broker (or QCG_BROKER),
    /// runs the job on an embedded local grid on loopback with one cluster per
    /// group. Ctrl-C cancels the job. A job without <workingDirectory> runs in the
    /// current directory. Exit status: 0 when every rank succeeded, 1 when one
    /// failed (it is named, the others are stopped), 2 when the profile is invalid
    /// or the job can never run on the grid (nothing is reserved), 3 when the job
    /// was cancelled.
    Submit {
        /// The JobProfile file.
        #[arg(value_name = "JOB.xml")]
        job: PathBuf,
        /// Only validate the profile: exit 0 when it is valid, 2 with the error
        /// (file, line and column) when it is not. Nothing is submitted.
        #[arg(long)]
        check: bool,
        /// Submit and return at once, printing only the job id on stdout; follow it
        /// later with `qcg output ID --follow` (needs --broker).
        #[arg(long)]
        detach: bool,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// List your jobs (an admin certificate: every job), one line each as squeue:
    /// JOBID, NAME (the profile's appId), USER, ST (PD queued, R running, CD done,
    /// F failed, CA cancelled), TIME (how long it ran or has been running:
    /// M:SS, H:MM:SS or D-HH:MM:SS; `-` for a job read back from the broker's
    /// database), RANKS, NODELIST(REASON).
    Jobs {
        /// Jobs asked of the broker per request (1 to 10000): the list comes a page
        /// at a time, however long it is.
        #[arg(long, default_value_t = submit::JOBS_PAGE as u64, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        page: u64,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Print what a submitted job's ranks have printed (`[RANK] line`), as far as the
    /// broker keeps it; with --follow, then what they print until the job ends, and
    /// exit as `qcg submit` would (Ctrl-C stops following, not the job).
    Output {
        /// The job id `qcg submit` printed.
        id: String,
        /// Go on until the job ends.
        #[arg(long, short = 'f')]
        follow: bool,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Show a submitted job: its state and where each rank runs.
    Status {
        /// The job id `qcg submit` printed.
        id: String,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Back up the broker's database into OUT while it runs (an admin certificate).
    ///
    /// The broker copies its database from one read transaction: a consistent copy
    /// of its last commit, taken without stopping it. OUT is written mode 0600 (it
    /// holds every job's secret). To restore, stop the broker and point its
    /// `database` at the copy.
    Backup {
        /// Where to write the copy.
        #[arg(value_name = "OUT")]
        out: PathBuf,
        #[command(flatten)]
        broker: BrokerArgs,
    },
    /// Cancel a submitted job: every process of it is stopped on every node.
    Cancel {
        /// The job id `qcg submit` printed.
        id: String,
        #[command(flatten)]
        broker: BrokerArgs,
    },
}

/// How to reach the broker's job API.
#[derive(Args)]
struct BrokerArgs {
    /// The broker's HTTPS job API, `https://HOST:PORT` (its `https_listen`).
    #[arg(long, env = "QCG_BROKER", value_name = "URL")]
    broker: Option<String>,
    /// Client certificate (PEM) from the grid CA, of role client
    /// (`qcg ca issue --role client --name NAME`).
    #[arg(long, env = "QCG_CERT", value_name = "PEM")]
    cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, env = "QCG_KEY", value_name = "PEM")]
    key: Option<PathBuf>,
    /// The grid CA's certificate (PEM).
    #[arg(long, env = "QCG_CA", value_name = "PEM")]
    ca: Option<PathBuf>,
}

impl BrokerArgs {
    fn client(&self) -> Option<client::Client> {
        let url = self.broker.as_ref()?;
        let (Some(cert), Some(key), Some(ca)) = (&self.cert, &self.key, &self.ca) else {
            fail(
                2,
                "--broker needs --cert, --key and --ca (a client certificate from the grid CA)",
            )
        };
        let id = qcg_proto::tls::Identity::load(cert, key, ca).unwrap_or_else(|e| fail(2, e));
        Some(client::Client::new(url, &id).unwrap_or_else(|e| fail(2, e)))
    }

    fn required(&self) -> client::Client {
        self.client()
            .unwrap_or_else(|| fail(2, "--broker URL (or QCG_BROKER) is required"))
    }
}

#[derive(Subcommand)]
enum CaCmd {
    /// Create a grid CA (ca.pem, ca.key) in DIR.
    Init {
        /// Folder for the CA's files.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Issue a certificate (NAME.pem, NAME.key, the key mode 0600) signed by the CA
    /// in DIR, valid from now for --days (default: 90 for client and admin, 365 for
    /// services). The certificate is recorded in DIR/issued.txt for `qcg ca revoke`.
    Issue {
        /// Folder holding the CA (and receiving the certificate unless --out is given).
        #[arg(long)]
        dir: PathBuf,
        /// What the holder may be: broker, frontal, helper, proxy, client or admin.
        #[arg(long)]
        role: Role,
        /// The holder's name (file names and certificate subject).
        #[arg(long)]
        name: String,
        /// Where to write the certificate and key (default: DIR).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Days the certificate stays valid, from now.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=36_500))]
        days: Option<u32>,
    },
    /// Revoke every certificate issued for NAME: adds them to DIR/crl.pem, the CRL
    /// signed by the CA. Services whose config names that file (`crl`) refuse them
    /// from their next handshake on; a certificate issued for NAME afterwards works.
    Revoke {
        /// Folder holding the CA.
        #[arg(long)]
        dir: PathBuf,
        /// The holder's name, as given to `qcg ca issue --name`.
        name: String,
    },
}

fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    eprintln!("qcg: {msg}");
    std::process::exit(code)
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env(qcg_proto::env::LOG).unwrap_or_else(|_| {
                // The grid `qcg run` embeds lives on loopback: its broker's view of
                // the gateways (probes that time out on a loaded machine, a frontal
                // gone at the end) is no news to the user and would mix with the
                // job's own output (MPICH's test runner counts any extra line as a
                // failure). Its errors still show; the variable shows the rest.
                "warn,qcg_broker::grid=error,qcg_broker::core=error".into()
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("run") {
        let rest = mpiargs::normalize_run(&argv[2..]);
        argv.truncate(2);
        argv.extend(rest);
    }
    let cli = Cli::parse_from(argv);
    match cli.cmd {
        Cmd::Ca(CaCmd::Init { dir }) => {
            if dir.join("ca.key").exists() {
                fail(
                    2,
                    format!(
                        "{} already holds a CA; refusing to overwrite it",
                        dir.display()
                    ),
                );
            }
            let ca = Ca::generate().unwrap_or_else(|e| fail(1, e));
            ca.save(&dir).unwrap_or_else(|e| fail(1, e));
            println!(
                "CA written to {}/ca.pem and ca.key (keep ca.key secret)",
                dir.display()
            );
        }
        Cmd::Ca(CaCmd::Issue {
            dir,
            role,
            name,
            out,
            days,
        }) => {
            if name.is_empty() || name.contains('/') || name.contains(char::is_whitespace) {
                fail(2, "--name must be non-empty and contain no `/` or spaces");
            }
            let ca = Ca::load(&dir).unwrap_or_else(|e| fail(2, e));
            let days = days.unwrap_or(qcg_proto::revocation::default_days(role));
            let issued = ca
                .issue_for_days(role, &name, days)
                .unwrap_or_else(|e| fail(1, e));
            Ca::record_issued(&dir, &name, &issued).unwrap_or_else(|e| fail(1, e));
            let out = out.unwrap_or(dir);
            let (c, k) = issued.save(&out, &name).unwrap_or_else(|e| fail(1, e));
            println!(
                "{role} certificate for `{name}`, valid {days} days: {} and {}",
                c.display(),
                k.display()
            );
        }
        Cmd::Ca(CaCmd::Revoke { dir, name }) => {
            let ca = Ca::load(&dir).unwrap_or_else(|e| fail(2, e));
            let fresh = ca.revoke(&dir, &name).unwrap_or_else(|e| fail(2, e));
            println!(
                "revoked {} certificate(s) of `{name}`; {} now lists them",
                fresh.len(),
                dir.join(qcg_proto::revocation::CRL_FILE).display()
            );
        }
        Cmd::Submit {
            job,
            check,
            detach,
            broker,
        } => {
            let (xml, profile) = submit::check(&job).unwrap_or_else(|f| fail(f.code, f.message));
            if check {
                println!(
                    "{}: valid JobProfile `{}`: {} groups, {} processes",
                    job.display(),
                    profile.app_id,
                    profile.task.groups.len(),
                    profile.total_processes()
                );
                return;
            }
            let cwd = std::env::current_dir().unwrap_or_else(|e| fail(1, e));
            let workdir = Some(cwd.to_string_lossy().into_owned());
            let client = broker.client();
            let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(1, e));
            if detach {
                let client = client.unwrap_or_else(|| {
                    fail(2, "--detach needs --broker URL (or QCG_BROKER): an embedded grid ends with qcg")
                });
                match rt.block_on(submit::submit(&client, &xml, workdir.as_deref())) {
                    Ok((id, _)) => {
                        eprintln!("qcg: job {id} submitted; `qcg output {id} --follow` follows it");
                        println!("{id}");
                        return;
                    }
                    Err(f) => fail(f.code, f.message),
                }
            }
            let mut sinks = submit::Sinks::for_profile(&profile, &cwd)
                .unwrap_or_else(|f| fail(f.code, f.message));
            let r = rt.block_on(async {
                match client {
                    Some(c) => {
                        submit::submit_and_follow(&c, &xml, workdir.as_deref(), &mut sinks).await
                    }
                    None => {
                        submit::run_embedded(&profile, &xml, workdir.as_deref(), &mut sinks).await
                    }
                }
            });
            match r {
                Ok(code) => std::process::exit(code),
                Err(f) => fail(f.code, f.message),
            }
        }
        Cmd::Jobs { page, broker } => {
            let client = broker.required();
            let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(1, e));
            if let Err(f) = rt.block_on(submit::jobs(&client, page as usize)) {
                fail(f.code, f.message)
            }
        }
        Cmd::Output { id, follow, broker } => {
            let client = broker.required();
            let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(1, e));
            if follow {
                let mut sinks = submit::Sinks::default();
                match rt.block_on(submit::follow(&client, &id, &mut sinks, false)) {
                    Ok(code) => std::process::exit(code),
                    Err(f) => fail(f.code, f.message),
                }
            }
            match rt.block_on(submit::output(&client, &id)) {
                Ok(true) => {}
                Ok(false) => fail(1, format!("no job `{id}` at this broker")),
                Err(f) => fail(f.code, f.message),
            }
        }
        Cmd::Status { id, broker } => {
            let client = broker.required();
            let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(1, e));
            match rt.block_on(submit::status(&client, &id)) {
                Ok(true) => {}
                Ok(false) => fail(1, format!("no job `{id}` at this broker")),
                Err(f) => fail(f.code, f.message),
            }
        }
        Cmd::Backup { out, broker } => {
            let client = broker.required();
            let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(1, e));
            match rt.block_on(submit::backup(&client, &out)) {
                Ok(bytes) => println!(
                    "broker database backed up to {} ({bytes} bytes)",
                    out.display()
                ),
                Err(f) => fail(f.code, f.message),
            }
        }
        Cmd::Cancel { id, broker } => {
            let client = broker.required();
            let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(1, e));
            match rt.block_on(submit::cancel(&client, &id)) {
                Ok(true) => {}
                Ok(false) => fail(1, format!("no job `{id}` at this broker")),
                Err(f) => fail(f.code, f.message),
            }
        }
        Cmd::Run {
            n,
            clusters,
            nodes_per_cluster,
            helpers,
            timeout,
            export,
            tag_output,
            output_filename,
            hostfile,
            oversubscribe: _,
            command,
        } => {
            if n == 0 {
                fail(2, "-n must be at least 1");
            }
            if let Some(h) = hostfile {
                eprintln!(
                    "qcg: --hostfile {} ignored: ranks go where --clusters, \
                     --nodes-per-cluster or --helper put them",
                    h.display()
                );
            }
            let io = launch::Io {
                tag_output,
                output_dir: output_filename,
                stdin_to_rank0: stdin_is_ours(),
                env: export
                    .iter()
                    .map(|x| exported(x))
                    .collect::<Result<_, _>>()
                    .unwrap_or_else(|e| fail(2, e)),
            };
            let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(1, e));
            let code = rt.block_on(run(
                n,
                clusters,
                nodes_per_cluster,
                helpers,
                timeout,
                io,
                command,
            ));
            std::process::exit(code);
        }
    }
}

/// Whether rank 0 may be given our stdin: not when it is the terminal and `qcg run`
/// runs in the background (`qcg run ... &`), where reading it would stop `qcg run`
/// (SIGTTIN); rank 0 then reads /dev/null.
fn stdin_is_ours() -> bool {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return true;
    }
    // /proc/self/stat after the command name: state ppid pgrp session tty_nr tpgid.
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    matches!((f.get(2), f.get(5)), (Some(pgrp), Some(tpgid)) if pgrp == tpgid)
}

/// `-x VAR=VALUE`, or `-x VAR` for VAR's value here.
fn exported(x: &str) -> Result<(String, String), String> {
    let (var, value) = match x.split_once('=') {
        Some((var, value)) => (var, Some(value.to_string())),
        None => (x, None),
    };
    if var.is_empty() || var.contains(char::is_whitespace) {
        return Err(format!(
            "-x {x}: not a variable name (-x VAR or -x VAR=VALUE)"
        ));
    }
    let value = match value {
        Some(v) => v,
        None => std::env::var(var).map_err(|_| format!("-x {var}: {var} is not set here"))?,
    };
    Ok((var.to_string(), value))
}

async fn run(
    n: u32,
    clusters: usize,
    nodes_per_cluster: usize,
    helpers: Vec<PathBuf>,
    timeout: Option<u64>,
    io: launch::Io,
    command: Vec<String>,
) -> i32 {
    // Ranks run in process groups of their own, out of reach of the terminal's
    // Ctrl-C: SIGINT and SIGTERM to `qcg run` are caught here and stop them all.
    let stop = stop_signal(timeout).unwrap_or_else(|e| fail(1, e));
    let (grid, sockets) = if helpers.is_empty() {
        let policies = vec![qcg_proto::Policy::Open; clusters.max(1)];
        let g = qcg_grid::Grid::builder()
            .clusters(&policies)
            .nodes_per_cluster(nodes_per_cluster)
            .start()
            .await
            .unwrap_or_else(|e| fail(1, format!("cannot start the local grid: {e}")));
        let sockets = g
            .placement(n as usize)
            .into_iter()
            .map(|s| s.socket)
            .collect();
        (Some(g), sockets)
    } else {
        let sockets = (0..n as usize)
            .map(|r| helpers[r % helpers.len()].clone())
            .collect();
        (None, sockets)
    };
    let job = launch::Job {
        id: qcg_grid::job_id(),
        secret: qcg_grid::secret(),
        program: PathBuf::from(&command[0]),
        args: command[1..].to_vec(),
        sockets,
        io,
    };
    let outcome = launch::run_until(&job, stop).await;
    let outcome = outcome.unwrap_or_else(|e| fail(1, e));
    if let Err(e) = launch::end_job(&job.sockets[0], &job.id).await {
        tracing::warn!(error = %e, "could not tell the grid the job ended");
    }
    if let Some(g) = grid {
        g.shutdown().await;
    }
    if let Some(why) = &outcome.stopped {
        if outcome.survivors.is_empty() {
            eprintln!("qcg: job {} {why}; its processes were stopped", job.id);
        } else {
            eprintln!(
                "qcg: job {} {why}; process groups {:?} could not be stopped",
                job.id, outcome.survivors
            );
        }
    } else if let Some((rank, why)) = &outcome.failure {
        eprintln!("qcg: job {} failed: rank {rank} {why}", job.id);
    }
    outcome.code()
}

/// Resolves when `qcg run` must stop its job: SIGINT, SIGTERM, or `timeout` seconds.
/// The handlers are installed at once, so a signal that comes while the grid starts
/// is not lost.
fn stop_signal(
    timeout: Option<u64>,
) -> std::io::Result<impl std::future::Future<Output = launch::Stop>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(async move {
        let limit = async {
            match timeout {
                Some(secs) => {
                    tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
                    launch::Stop::Timeout(secs)
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = int.recv() => launch::Stop::Signal(2),
            _ = term.recv() => launch::Stop::Signal(15),
            s = limit => s,
        }
    })
}
