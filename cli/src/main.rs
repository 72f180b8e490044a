//! `qcg`: the user's command line.

use clap::{Parser, Subcommand};
use qcg_cli::{grid, launch};
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
    /// Run a job of N processes.
    ///
    /// Without --helper, starts an embedded local grid on loopback (a broker,
    /// --clusters frontals, --nodes-per-cluster helpers each, an ephemeral CA) and
    /// runs the job on it. With --helper, runs the job on already running helpers.
    /// Each line a rank prints is prefixed with `[RANK]`. Exits non-zero, naming the
    /// rank and its status, if any rank fails; the other ranks are then stopped.
    Run {
        /// Number of processes.
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
        /// The program and its arguments.
        #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum CaCmd {
    /// Create a grid CA (ca.pem, ca.key) in DIR.
    Init {
        /// Folder for the CA's files.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Issue a service certificate (NAME.pem, NAME.key) signed by the CA in DIR.
    Issue {
        /// Folder holding the CA (and receiving the certificate unless --out is given).
        #[arg(long)]
        dir: PathBuf,
        /// What the holder may be: broker, frontal, helper, proxy or client.
        #[arg(long)]
        role: Role,
        /// The holder's name (file names and certificate subject).
        #[arg(long)]
        name: String,
        /// Where to write the certificate and key (default: DIR).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    eprintln!("qcg: {msg}");
    std::process::exit(code)
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("QCG_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
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
        }) => {
            if name.is_empty() || name.contains('/') {
                fail(2, "--name must be non-empty and contain no `/`");
            }
            let ca = Ca::load(&dir).unwrap_or_else(|e| fail(2, e));
            let issued = ca.issue(role, &name).unwrap_or_else(|e| fail(1, e));
            let out = out.unwrap_or(dir);
            let (c, k) = issued.save(&out, &name).unwrap_or_else(|e| fail(1, e));
            println!(
                "{role} certificate for `{name}`: {} and {}",
                c.display(),
                k.display()
            );
        }
        Cmd::Run {
            n,
            clusters,
            nodes_per_cluster,
            helpers,
            timeout,
            command,
        } => {
            if n == 0 {
                fail(2, "-n must be at least 1");
            }
            let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| fail(1, e));
            let code = rt.block_on(run(
                n,
                clusters,
                nodes_per_cluster,
                helpers,
                timeout,
                command,
            ));
            std::process::exit(code);
        }
    }
}

async fn run(
    n: u32,
    clusters: usize,
    nodes_per_cluster: usize,
    helpers: Vec<PathBuf>,
    timeout: Option<u64>,
    command: Vec<String>,
) -> i32 {
    let (grid, sockets) = if helpers.is_empty() {
        let policies = vec![qcg_proto::Policy::Open; clusters.max(1)];
        let g = grid::LocalGrid::start(&policies, nodes_per_cluster)
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
        id: grid::job_id(),
        secret: grid::secret(),
        program: PathBuf::from(&command[0]),
        args: command[1..].to_vec(),
        sockets,
    };
    let outcome = match timeout {
        Some(secs) => {
            match tokio::time::timeout(std::time::Duration::from_secs(secs), launch::run(&job))
                .await
            {
                Ok(o) => o,
                Err(_) => fail(
                    1,
                    format!(
                        "job {} timed out after {secs} s; its processes were stopped",
                        job.id
                    ),
                ),
            }
        }
        None => launch::run(&job).await,
    };
    let outcome = outcome.unwrap_or_else(|e| fail(1, e));
    if let Err(e) = launch::end_job(&job.sockets[0], &job.id).await {
        tracing::warn!(error = %e, "could not tell the grid the job ended");
    }
    if let Some(g) = grid {
        g.shutdown().await;
    }
    if let Some((rank, why)) = &outcome.failure {
        eprintln!("qcg: job {} failed: rank {rank} {why}", job.id);
    }
    outcome.code()
}
