//! `qcg-frontal`: a cluster's frontal, started from one config file.

use clap::Parser;
use std::path::PathBuf;

/// The qcg frontal: runs on a cluster's gateway, links the cluster's helpers to the
/// broker and caches the broker's answers.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML): `cluster`, `policy`, `nat`, `public_address`,
    /// `broker`, `listen`, `ca`, `cert`, `key`, and optionally `internal_latency_ms`,
    /// `internal_bandwidth_mbps` and `[[nodes]]` entries (`name`, `slots`,
    /// `cpu_speed_mhz`, `memory_mib`) overriding what each node's helper reports.
    /// See configs/frontal-*.toml.
    #[arg(long, short)]
    config: PathBuf,
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    let cfg = match qcg_frontal::config::Config::load(&cli.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qcg-frontal: {e}");
            std::process::exit(2);
        }
    };
    let id = match cfg.identity() {
        Ok(id) => id,
        Err(e) => {
            eprintln!("qcg-frontal: {e}");
            std::process::exit(2);
        }
    };
    let frontal = match qcg_frontal::Frontal::start_with(
        id,
        cfg.cluster(),
        cfg.broker,
        cfg.listen,
        cfg.settings(),
    )
    .await
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("qcg-frontal: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "qcg-frontal: cluster {} serving helpers on {}",
        cfg.cluster, frontal.addr
    );
    let _ = tokio::signal::ctrl_c().await;
    frontal.shutdown().await;
}
