//! `qcg-broker`: the grid's broker, started from one config file.

use clap::Parser;
use qcg_proto::service::fail;
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
    /// Check the config and exit (0: fine; 2: each problem printed, naming the
    /// field and how to fix it): it parses, its certificate, key and CA are there,
    /// match and are of this service's role, and its ports are free. Run it before
    /// starting the service (systemd: `ExecStartPre`).
    #[arg(long)]
    check_config: bool,
}

#[tokio::main]
async fn main() {
    qcg_proto::service::init_logging();
    qcg_proto::limits::raise_nofile("qcg-broker");
    let cli = Cli::parse();
    let shutdown = qcg_proto::service::Shutdown::install();
    let cfg =
        qcg_broker::config::Config::load(&cli.config).unwrap_or_else(|e| fail("qcg-broker", 2, e));
    if cli.check_config {
        qcg_proto::check::report("qcg-broker", &cli.config, &cfg.problems());
    }
    let id = cfg.identity().unwrap_or_else(|e| fail("qcg-broker", 2, e));
    let broker = qcg_broker::Broker::start_with(id, cfg.options())
        .await
        .unwrap_or_else(|e| fail("qcg-broker", 1, e));
    println!("qcg-broker: QUIC on {}", broker.quic_addr);
    if let Some(a) = broker.http_addr {
        println!("qcg-broker: HTTP API on http://{a}");
    }
    if let Some(a) = broker.https_addr {
        println!("qcg-broker: HTTPS API on https://{a}");
    }
    shutdown.wait().await;
    broker.shutdown().await;
}
