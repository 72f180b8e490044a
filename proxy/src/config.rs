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
    /// TCP address of the Prometheus metrics listener (`GET /metrics`, aggregate
    /// figures only); omit to serve none. It must be a loopback address unless
    /// `metrics_public` is true.
    pub metrics_listen: Option<SocketAddr>,
    /// Serve metrics on a non-loopback address (default false).
    #[serde(default)]
    pub metrics_public: bool,
}

impl Config {
    /// Loads a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (mut c, text): (Config, _) = load(path)?;
        qcg_proto::metrics::check_listen(path, &text, c.metrics_listen, c.metrics_public)?;
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
impl Config {
    /// What `--check-config` finds wrong: certificates and the relay port.
    pub fn problems(&self) -> Vec<qcg_proto::check::Problem> {
        let name = self
            .cert
            .file_stem()
            .map_or("NAME".into(), |s| s.to_string_lossy().into_owned());
        let mut out = qcg_proto::check::Tls {
            ca: &self.ca,
            cert: &self.cert,
            key: &self.key,
            crl: self.crl.as_deref(),
            role: qcg_proto::tls::Role::Proxy,
            name: &name,
        }
        .problems();
        out.extend(qcg_proto::check::port_free("listen", self.listen, false));
        out.extend(
            self.metrics_listen
                .and_then(|a| qcg_proto::check::port_free("metrics_listen", a, false)),
        );
        out
    }
}
