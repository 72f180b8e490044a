//! The helper's configuration file.

use qcg_proto::config::{load, resolve, ConfigError};
use qcg_proto::tls::Identity;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// `qcg-helper --config helper.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This node's name.
    pub node: String,
    /// The cluster frontal's QUIC address.
    pub frontal: SocketAddr,
    /// Unix socket local processes connect to (relative to this file if relative).
    /// It is created mode 0660 whatever the umask.
    pub socket: PathBuf,
    /// The socket's group (a name from /etc/group, or a number): its members may
    /// connect. Omit to keep the helper's own group.
    pub socket_group: Option<String>,
    /// `socket_group` resolved to a group id at load time.
    #[serde(skip)]
    pub socket_gid: Option<u32>,
    /// The node's address inside the cluster: processes bind their listeners to it.
    pub bind_address: IpAddr,
    /// The grid CA certificate (PEM), relative to this file.
    pub ca: PathBuf,
    /// This helper's certificate (PEM, role helper).
    pub cert: PathBuf,
    /// This helper's private key (PEM).
    pub key: PathBuf,
    /// The grid's revocation list (PEM, `qcg ca revoke` writes it as `crl.pem` in the
    /// CA folder). Peers whose certificate it lists fail the handshake; the file is
    /// read again whenever it changes. Omit to check no revocations.
    pub crl: Option<PathBuf>,
    /// Which local account runs each submitter's processes (default: the `qcg`
    /// user for everyone, root refused).
    #[serde(default)]
    pub accounts: crate::accounts::Accounts,
    /// TCP address of the Prometheus metrics listener (`GET /metrics`, aggregate
    /// figures only); omit to serve none. It must be a loopback address unless
    /// `metrics_public` is true.
    pub metrics_listen: Option<SocketAddr>,
    /// Serve metrics on a non-loopback address (default false).
    #[serde(default)]
    pub metrics_public: bool,
}

/// A group's id from its name (looked up in the text of /etc/group) or its number.
pub fn group_id(group: &str, etc_group: String) -> Option<u32> {
    if let Ok(n) = group.parse() {
        return Some(n);
    }
    etc_group.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == group).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

impl Config {
    /// Loads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (mut c, text): (Config, _) = load(path)?;
        qcg_proto::metrics::check_listen(path, &text, c.metrics_listen, c.metrics_public)?;
        if c.node.trim().is_empty() {
            return Err(ConfigError::field(path, &text, "node", "must not be empty"));
        }
        if let Some(g) = &c.socket_group {
            let gid = group_id(g, std::fs::read_to_string("/etc/group").unwrap_or_default());
            match gid {
                Some(id) => c.socket_gid = Some(id),
                None => {
                    return Err(ConfigError::field(
                        path,
                        &text,
                        "socket_group",
                        format!("no group `{g}` in /etc/group (give a name or a number)"),
                    ))
                }
            }
        }
        if let Some(pool) = &mut c.accounts.pool {
            let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
            if let Err(why) = pool.check(&passwd) {
                return Err(ConfigError::field(path, &text, "accounts.pool", why));
            }
            let gid = match (&pool.group, c.socket_gid) {
                (Some(g), _) => {
                    group_id(g, std::fs::read_to_string("/etc/group").unwrap_or_default())
                        .ok_or_else(|| {
                            ConfigError::field(
                                path,
                                &text,
                                "accounts.pool.group",
                                format!("no group `{g}` in /etc/group (give a name or a number)"),
                            )
                        })?
                }
                (None, Some(gid)) => gid,
                (None, None) => {
                    return Err(ConfigError::field(
                        path,
                        &text,
                        "accounts.pool",
                        "give the pooled processes a group: `group` here, or the helper's \
                         `socket_group` (they need it to reach the helper socket)",
                    ))
                }
            };
            if gid == 0 {
                return Err(ConfigError::field(
                    path,
                    &text,
                    "accounts.pool.group",
                    "pooled processes must not run in group 0 (root's)",
                ));
            }
            pool.gid = gid;
        }
        c.socket = resolve(path, &c.socket);
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
    /// What `--check-config` finds wrong: certificates, the socket's folder and the
    /// address processes bind to.
    pub fn problems(&self) -> Vec<qcg_proto::check::Problem> {
        use qcg_proto::check::Problem;
        let mut out = qcg_proto::check::Tls {
            ca: &self.ca,
            cert: &self.cert,
            key: &self.key,
            crl: self.crl.as_deref(),
            role: qcg_proto::tls::Role::Helper,
            name: &self.node,
        }
        .problems();
        let folder = self.socket.parent().unwrap_or(std::path::Path::new("/"));
        if !folder.is_dir() {
            out.push(Problem {
                field: "socket".into(),
                message: format!("{} is not a folder", folder.display()),
            });
        }
        let here = std::net::SocketAddr::new(self.bind_address, 0);
        if let Err(e) = std::net::TcpListener::bind(here) {
            out.push(Problem {
                field: "bind_address".into(),
                message: format!("{}: {e} (an address of this node)", self.bind_address),
            });
        }
        out.extend(
            self.metrics_listen
                .and_then(|a| qcg_proto::check::port_free("metrics_listen", a, false)),
        );
        out
    }
}
