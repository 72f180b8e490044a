//! The frontal's configuration file.

use qcg_proto::config::{load, resolve, ConfigError};
use qcg_proto::tls::Identity;
use qcg_proto::{ClusterConfig, Nat, Policy};
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// `qcg-frontal --config frontal.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This cluster's name, unique in the grid.
    pub cluster: String,
    /// Inbound policy of the cluster's firewall: `open`, `port-range LO-HI`,
    /// `syn-block` or `closed`.
    pub policy: Policy,
    /// The gateway's address translation: `none` (or false), `port-preserving` (or
    /// true) or `random-port`.
    #[serde(default)]
    pub nat: Nat,
    /// The gateway's public address (needed with `nat = true`).
    pub public_address: Option<IpAddr>,
    /// The broker's QUIC address.
    pub broker: SocketAddr,
    /// UDP address for the cluster's helpers (QUIC).
    pub listen: SocketAddr,
    /// The grid CA certificate (PEM), relative to this file.
    pub ca: PathBuf,
    /// This frontal's certificate (PEM, role frontal).
    pub cert: PathBuf,
    /// This frontal's private key (PEM).
    pub key: PathBuf,
    /// The grid's revocation list (PEM, `qcg ca revoke` writes it as `crl.pem` in the
    /// CA folder). Peers whose certificate it lists fail the handshake; the file is
    /// read again whenever it changes. Omit to check no revocations.
    pub crl: Option<PathBuf>,
    /// Figures of the cluster's nodes (`[[nodes]]` with `name` and any of `slots`,
    /// `cpu_speed_mhz`, `memory_mib`), overriding what each node's helper reports.
    /// A node is offered to jobs while its helper is connected.
    #[serde(default)]
    pub nodes: Vec<crate::nodes::NodeOverride>,
    /// Latency inside the cluster in ms (default: measured to the helpers).
    pub internal_latency_ms: Option<f64>,
    /// Bandwidth inside the cluster in Mbit/s (default 1000).
    pub internal_bandwidth_mbps: Option<f64>,
    /// The cluster's nodes are run by Slurm: ranks are started with `salloc` and
    /// `srun`, cancelled with `scancel` ([`crate::slurm`]). Absent: the nodes'
    /// helpers start them.
    pub slurm: Option<crate::slurm::SlurmConfig>,
    /// TCP address of the Prometheus metrics listener (`GET /metrics`, aggregate
    /// figures only); omit to serve none. It must be a loopback address unless
    /// `metrics_public` is true.
    pub metrics_listen: Option<SocketAddr>,
    /// Serve metrics on a non-loopback address (default false).
    #[serde(default)]
    pub metrics_public: bool,
}

impl Config {
    /// Loads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (mut c, text): (Config, _) = load(path)?;
        qcg_proto::metrics::check_listen(path, &text, c.metrics_listen, c.metrics_public)?;
        if c.cluster.trim().is_empty() {
            return Err(ConfigError::field(
                path,
                &text,
                "cluster",
                "must not be empty",
            ));
        }
        if c.nat.is_nat() && c.public_address.is_none() {
            return Err(ConfigError::field(
                path,
                &text,
                "nat",
                "a cluster behind NAT needs `public_address` (the gateway's public address)",
            ));
        }
        for (what, v) in [
            ("internal_latency_ms", c.internal_latency_ms),
            ("internal_bandwidth_mbps", c.internal_bandwidth_mbps),
        ] {
            if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
                return Err(ConfigError::field(
                    path,
                    &text,
                    what,
                    "must be a finite number >= 0",
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for n in &c.nodes {
            if n.name.trim().is_empty() || !seen.insert(n.name.clone()) {
                return Err(ConfigError::field(
                    path,
                    &text,
                    "name",
                    format!(
                        "node names in [[nodes]] must be non-empty and unique (`{}`)",
                        n.name
                    ),
                ));
            }
            if n.slots == Some(0) {
                return Err(ConfigError::field(
                    path,
                    &text,
                    "slots",
                    "must be at least 1",
                ));
            }
            for v in [n.cpu_speed_mhz, n.memory_mib].into_iter().flatten() {
                if !v.is_finite() || v < 0.0 {
                    return Err(ConfigError::field(
                        path,
                        &text,
                        if Some(v) == n.memory_mib {
                            "memory_mib"
                        } else {
                            "cpu_speed_mhz"
                        },
                        "must be a finite number >= 0",
                    ));
                }
            }
        }
        c.ca = resolve(path, &c.ca);
        c.cert = resolve(path, &c.cert);
        c.key = resolve(path, &c.key);
        c.crl = c.crl.map(|p| resolve(path, &p));
        if let Some(s) = &mut c.slurm {
            if s.helper_socket.trim().is_empty() {
                return Err(ConfigError::field(
                    path,
                    &text,
                    "helper_socket",
                    "must name the socket of a node's helper (`{node}` is the node's name)",
                ));
            }
            if s.partition.as_deref().is_some_and(|p| p.trim().is_empty()) {
                return Err(ConfigError::field(
                    path,
                    &text,
                    "partition",
                    "must not be empty (omit it for Slurm's default partition)",
                ));
            }
            s.helper_socket = resolve(path, Path::new(&s.helper_socket))
                .display()
                .to_string();
            s.conf = s.conf.as_ref().map(|p| resolve(path, p));
            s.bin_dir = s.bin_dir.as_ref().map(|p| resolve(path, p));
        }
        Ok(c)
    }

    /// The cluster configuration this frontal registers.
    pub fn cluster(&self) -> ClusterConfig {
        ClusterConfig {
            name: self.cluster.clone(),
            policy: self.policy,
            nat: self.nat,
            public_address: self.public_address,
        }
    }

    /// What the frontal tells the scheduler beyond its policy.
    pub fn settings(&self) -> crate::nodes::Settings {
        crate::nodes::Settings {
            nodes: self.nodes.clone(),
            internal_latency_ms: self.internal_latency_ms,
            internal_bandwidth_mbps: self.internal_bandwidth_mbps.unwrap_or(1000.0),
            slurm: self.slurm.clone(),
        }
    }

    /// Loads the TLS identity the config names.
    pub fn identity(&self) -> Result<Identity, qcg_proto::tls::TlsError> {
        Identity::load(&self.cert, &self.key, &self.ca)?.with_crl(self.crl.as_deref())
    }
}

impl Config {
    /// What `--check-config` finds wrong: certificates and the QUIC port.
    pub fn problems(&self) -> Vec<qcg_proto::check::Problem> {
        let mut out = qcg_proto::check::Tls {
            ca: &self.ca,
            cert: &self.cert,
            key: &self.key,
            crl: self.crl.as_deref(),
            role: qcg_proto::tls::Role::Frontal,
            name: &self.cluster,
        }
        .problems();
        out.extend(qcg_proto::check::port_free("listen", self.listen, true));
        if let Some(s) = &self.slurm {
            out.extend(s.problems(crate::slurm::running_as_root()));
        }
        out.extend(
            self.metrics_listen
                .and_then(|a| qcg_proto::check::port_free("metrics_listen", a, false)),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(name: &str, text: &str) -> Result<Config, ConfigError> {
        let path =
            std::env::temp_dir().join(format!("qcg-frontal-{}-{name}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let r = Config::load(&path);
        let _ = std::fs::remove_file(&path);
        r
    }

    const BASE: &str = "cluster = \"a\"\npolicy = \"open\"\nbroker = \"127.0.0.1:1\"\nlisten = \"127.0.0.1:0\"\nca = \"c\"\ncert = \"c\"\nkey = \"k\"\n";

    #[test]
    fn node_overrides_load_and_bad_ones_name_line_and_field() {
        let c = load_text(
            "ok",
            &format!(
                "{BASE}internal_bandwidth_mbps = 10000\n[[nodes]]\nname = \"n1\"\nslots = 8\n"
            ),
        )
        .unwrap();
        let s = c.settings();
        assert_eq!(s.nodes[0].slots, Some(8));
        assert_eq!(s.internal_bandwidth_mbps, 10000.0);
        let e = load_text(
            "unknown",
            &format!("{BASE}[[nodes]]\nname = \"n1\"\ncores = 8\n"),
        )
        .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(10), Some("cores")),
            "{e}"
        );
        let e = load_text(
            "zero",
            &format!("{BASE}[[nodes]]\nname = \"n1\"\nslots = 0\n"),
        )
        .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(10), Some("slots")),
            "{e}"
        );
        let e = load_text("neg", &format!("{BASE}internal_latency_ms = -1\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("internal_latency_ms"), "{e}");
    }

    #[test]
    fn the_slurm_section_loads_and_bad_fields_are_named() {
        let c = load_text(
            "slurm",
            &format!("{BASE}[slurm]\npartition = \"batch\"\nhelper_socket = \"run/{{node}}.sock\"\nconf = \"/etc/slurm/slurm.conf\"\n"),
        )
        .unwrap();
        let s = c.settings().slurm.unwrap();
        assert_eq!(s.partition.as_deref(), Some("batch"));
        assert!(!s.allow_root);
        // Relative to the config's folder, `{node}` kept for each node.
        let sock = s.socket_for("n1");
        assert!(
            sock.starts_with('/') && sock.ends_with("run/n1.sock"),
            "{sock}"
        );
        let e = load_text(
            "slurm-unknown",
            &format!("{BASE}[slurm]\nhelper_socket = \"x\"\nqueue = \"q\"\n"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("queue"), "{e}");
        let e = load_text(
            "slurm-empty",
            &format!("{BASE}[slurm]\npartition = \"\"\nhelper_socket = \"x\"\n"),
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("partition"), "{e}");
        let e = load_text(
            "slurm-nosock",
            &format!("{BASE}[slurm]\npartition = \"p\"\n"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("helper_socket"), "{e}");
    }
}
