//! `qcg-broker`: the grid's broker, started from one config file.

use clap::Parser;
use std::path::PathBuf;

/// The qcg broker: keeps the grid's clusters and processes and answers connection
/// requests with plans. Frontals connect to it over QUIC with mutual TLS.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML): `listen` (QUIC, for frontals), `http_listen`
    /// (read-only HTTP API), `https_listen` (HTTPS job API, client certificates),
    /// `probe_interval_secs`, `ca`, `cert`, `key`. See configs/broker.toml.
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
    let cfg = match qcg_broker::config::Config::load(&cli.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qcg-broker: {e}");
            std::process::exit(2);
        }
    };
    let id = match cfg.identity() {
        Ok(id) => id,
        Err(e) => {
            eprintln!("qcg-broker: {e}");
            std::process::exit(2);
        }
    };
    let broker = match qcg_broker::Broker::start_with(id, cfg.options()).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("qcg-broker: {e}");
            std::process::exit(1);
        }
    };
    println!("qcg-broker: QUIC on {}", broker.quic_addr);
    if let Some(a) = broker.http_addr {
        println!("qcg-broker: HTTP API on http://{a}");
    }
    if let Some(a) = broker.https_addr {
        println!("qcg-broker: HTTPS API on https://{a}");
    }
    let _ = tokio::signal::ctrl_c().await;
    broker.shutdown().await;
}
