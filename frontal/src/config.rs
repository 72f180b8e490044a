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
}

impl Config {
    /// Loads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (mut c, text): (Config, _) = load(path)?;
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
        c.ca = resolve(path, &c.ca);
        c.cert = resolve(path, &c.cert);
        c.key = resolve(path, &c.key);
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

    /// Loads the TLS identity the config names.
    pub fn identity(&self) -> Result<Identity, qcg_proto::tls::TlsError> {
        Identity::load(&self.cert, &self.key, &self.ca)
    }
}
