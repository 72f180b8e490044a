//! The proxy's configuration file.

use qcg_proto::config::{load, resolve, ConfigError};
use qcg_proto::tls::Identity;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// `qcg-proxy --config proxy.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// TCP address processes connect to.
    pub listen: SocketAddr,
    /// The address processes should use, if not `listen` (e.g. behind a port forward).
    pub public_address: Option<SocketAddr>,
    /// The broker's QUIC address.
    pub broker: SocketAddr,
    /// The grid CA certificate (PEM), relative to this file.
    pub ca: PathBuf,
    /// This proxy's certificate (PEM, role proxy).
    pub cert: PathBuf,
    /// This proxy's private key (PEM).
    pub key: PathBuf,
    /// The grid's revocation list (PEM, `qcg ca revoke` writes it as `crl.pem` in the
    /// CA folder). Peers whose certificate it lists fail the handshake; the file is
    /// read again whenever it changes. Omit to check no revocations.
    pub crl: Option<PathBuf>,
}

impl Config {
    /// Loads a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (mut c, _): (Config, _) = load(path)?;
        c.ca = resolve(path, &c.ca);
        c.cert = resolve(path, &c.cert);
        c.key = resolve(path, &c.key);
        c.crl = c.crl.map(|p| resolve(path, &p));
        Ok(c)
    }

    /// Loads the TLS identity the config names.
    pub fn identity(&self) -> Result<Identity, qcg_proto::tls::TlsError> {
        Identity::load(&self.cert, &self.key, &self.ca)?.with_crl(self.crl.as_deref())
    }
}
