//! `qcg-frontal`: a cluster's frontal, started from one config file.

use clap::Parser;
use qcg_proto::service::fail;
use std::path::PathBuf;

/// The qcg frontal: runs on a cluster's gateway, links the cluster's helpers to the
/// broker and caches the broker's answers.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML): `cluster`, `policy`, `nat`, `public_address`,
    /// `broker`, `listen`, `ca`, `cert`, `key`, and optionally `internal_latency_ms`,
    /// `internal_bandwidth_mbps` and `[[nodes]]` entries (`name`, `slots`,
    /// `cpu_speed_mhz`, `memory_mib`) overriding what each node's helper reports,
    /// `crl`, `metrics_listen` and `metrics_public`, and a `[slurm]` section when Slurm
    /// runs the cluster's nodes (`partition`, `helper_socket`, `conf`, `bin_dir`,
    /// `account`, `allow_root`; see the README's "A cluster run by Slurm"). See
    /// configs/frontal-*.toml.
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
    qcg_proto::limits::raise_nofile("qcg-frontal");
    let cli = Cli::parse();
    let shutdown = qcg_proto::service::Shutdown::install();
    let cfg = qcg_frontal::config::Config::load(&cli.config)
        .unwrap_or_else(|e| fail("qcg-frontal", 2, e));
    if cli.check_config {
        qcg_proto::check::report("qcg-frontal", &cli.config, &cfg.problems());
    }
    let id = cfg.identity().unwrap_or_else(|e| fail("qcg-frontal", 2, e));
    // Every listener is bound before the service says it serves: a taken port
    // stops it with the field's name, never just after a "serving" line.
    let metrics = match cfg.metrics_listen {
        Some(at) => Some(
            qcg_frontal::Frontal::bind_metrics(at)
                .await
                .unwrap_or_else(|e| fail("qcg-frontal", 1, e)),
        ),
        None => None,
    };
    let frontal =
        qcg_frontal::Frontal::start_with(id, cfg.cluster(), cfg.broker, cfg.listen, cfg.settings())
            .await
            .unwrap_or_else(|e| fail("qcg-frontal", 1, e));
    let metrics = metrics.map(|l| frontal.serve_metrics_on(l));
    println!(
        "qcg-frontal: cluster {} serving helpers on {}",
        cfg.cluster, frontal.addr
    );
    if let Some(at) = metrics {
        println!("qcg-frontal: metrics on http://{at}/metrics");
    }
    shutdown.wait().await;
    frontal.shutdown().await;
}
