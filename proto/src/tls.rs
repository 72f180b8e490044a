//! The grid CA and the rustls configurations built on it.
//!
//! Every service certificate names its role as a DNS subject-alternative name,
//! `<role>.qcg`. A client checks the server's role through ordinary server-name
//! verification (it dials `broker.qcg`); a server checks the client's role with
//! [`peer_has_role`] right after the handshake. Only certificates signed by the grid's
//! CA are accepted on either side.
//!
//! Certificates live a bounded time ([`crate::revocation::default_days`]; not before
//! the moment of issue) and can be revoked: an [`Identity`] given a CRL
//! ([`Identity::with_crl`]) refuses revoked peers, on both sides of the handshake, and
//! follows changes to the CRL file ([`crate::revocation`]).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::revocation::{ClientVerifier, CrlWatch, ServerVerifier};

/// ALPN protocol name of the control plane.
pub const ALPN: &[u8] = b"qcg/1";

/// What a certificate allows its holder to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The grid's broker.
    Broker,
    /// A cluster's frontal.
    Frontal,
    /// A node's helper.
    Helper,
    /// A relay proxy.
    Proxy,
    /// A user submitting jobs.
    Client,
    /// A grid operator: sees, reads and cancels every user's jobs.
    Admin,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 6] = [
        Role::Broker,
        Role::Frontal,
        Role::Helper,
        Role::Proxy,
        Role::Client,
        Role::Admin,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Role::Broker => "broker",
            Role::Frontal => "frontal",
            Role::Helper => "helper",
            Role::Proxy => "proxy",
            Role::Client => "client",
            Role::Admin => "admin",
        }
    }

    /// The DNS name that certifies this role.
    pub fn dns_name(self) -> String {
        format!("{}.qcg", self.name())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
                format!("unknown role `{s}`: expected one of {}", names.join(", "))
            })
    }
}

/// What went wrong with certificates or keys.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating or signing failed.
    #[error("certificate generation failed: {0}")]
    Gen(#[from] rcgen::Error),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A PEM file holds nothing usable.
    #[error("{what}: no usable PEM data ({detail})")]
    Pem {
        /// Which input.
        what: String,
        /// Why.
        detail: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("client verifier: {0}")]
    Verifier(String),
}

const CA_CN: &str = "qcg grid CA";

/// A grid certificate authority (certificate and key, PEM).
pub struct Ca {
    /// CA certificate, PEM.
    pub cert_pem: String,
    key: KeyPair,
}

fn ca_params() -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_CN);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

fn read(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::File {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `data` to `path`. A secret (a private key) is created mode 0600 whatever
/// the umask, so it is never readable by others, not even for a moment; an existing
/// file is made 0600 before it is truncated and written.
fn write(path: &Path, data: &str, secret: bool) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let err = |source| TlsError::File {
        path: path.to_path_buf(),
        source,
    };
    if !secret {
        return std::fs::write(path, data).map_err(err);
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    // `mode` only applies to a new file (and is masked by the umask, which can only
    // remove bits); set it on the open file in every case.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(err)?;
    f.set_len(0).map_err(err)?;
    f.write_all(data.as_bytes()).map_err(err)
}

impl Ca {
    /// Makes a new CA with a fresh key.
    pub fn generate() -> Result<Ca, TlsError> {
        let key = KeyPair::generate()?;
        let cert = ca_params()?.self_signed(&key)?;
        Ok(Ca {
            cert_pem: cert.pem(),
            key,
        })
    }

    /// Writes `ca.pem`, `ca.key` and an empty revocation list `crl.pem` into `dir`
    /// (created if needed).
    pub fn save(&self, dir: &Path) -> Result<(), TlsError> {
        std::fs::create_dir_all(dir).map_err(|source| TlsError::File {
            path: dir.to_path_buf(),
            source,
        })?;
        write(&dir.join("ca.pem"), &self.cert_pem, false)?;
        write(&dir.join("ca.key"), &self.key.serialize_pem(), true)?;
        self.write_crl(dir)?;
        Ok(())
    }

    /// The CA as the issuer of what it signs. Signing needs the issuer's name and
    /// key; the CA's name is fixed, so the issuer is rebuilt from its key without
    /// parsing the CA certificate.
    pub(crate) fn issuer(&self) -> Result<rcgen::Certificate, TlsError> {
        Ok(ca_params()?.self_signed(&self.key)?)
    }

    pub(crate) fn key(&self) -> &KeyPair {
        &self.key
    }

    /// Reads a CA written by [`Ca::save`].
    pub fn load(dir: &Path) -> Result<Ca, TlsError> {
        let cert_pem = read(&dir.join("ca.pem"))?;
        let key_path = dir.join("ca.key");
        let key = KeyPair::from_pem(&read(&key_path)?).map_err(|e| TlsError::Pem {
            what: key_path.display().to_string(),
            detail: e.to_string(),
        })?;
        Ok(Ca { cert_pem, key })
    }

    /// Issues a certificate for a holder of `role` called `name`, valid from now for
    /// the role's default lifetime ([`crate::revocation::default_days`]).
    pub fn issue(&self, role: Role, name: &str) -> Result<Issued, TlsError> {
        let days = crate::revocation::default_days(role);
        self.issue_for_days(role, name, days)
    }

    /// Issues a certificate valid from now for `days` days.
    pub fn issue_for_days(&self, role: Role, name: &str, days: u32) -> Result<Issued, TlsError> {
        let now = SystemTime::now();
        let end = now + Duration::from_secs(u64::from(days) * 86_400);
        self.issue_between(role, name, now, end)
    }

    /// Issues a certificate valid from `not_before` to `not_after` (tests make
    /// expired and not-yet-valid ones with it).
    pub fn issue_between(
        &self,
        role: Role,
        name: &str,
        not_before: SystemTime,
        not_after: SystemTime,
    ) -> Result<Issued, TlsError> {
        let issuer = self.issuer()?;
        let mut params = CertificateParams::new(vec![role.dns_name()])?;
        params.not_before = not_before.into();
        params.not_after = not_after.into();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        dn.push(DnType::OrganizationalUnitName, role.name());
        params.distinguished_name = dn;
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer, &self.key)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The identity a service of `role` called `name` would load from files issued by
    /// this CA, built in memory (for the embedded local grid).
    pub fn identity(&self, role: Role, name: &str) -> Result<Identity, TlsError> {
        let issued = self.issue(role, name)?;
        Identity::from_pem(&issued.cert_pem, &issued.key_pem, &self.cert_pem)
    }
}

/// A freshly issued service certificate.
pub struct Issued {
    /// Certificate, PEM.
    pub cert_pem: String,
    /// Private key, PEM.
    pub key_pem: String,
}

impl Issued {
    /// Writes `NAME.pem` and `NAME.key` into `dir`; returns their paths.
    pub fn save(&self, dir: &Path, name: &str) -> Result<(PathBuf, PathBuf), TlsError> {
        let cert = dir.join(format!("{name}.pem"));
        let key = dir.join(format!("{name}.key"));
        write(&cert, &self.cert_pem, false)?;
        write(&key, &self.key_pem, true)?;
        Ok((cert, key))
    }
}

/// What a service presents and trusts.
#[derive(Debug)]
pub struct Identity {
    /// Own certificate chain.
    pub chain: Vec<CertificateDer<'static>>,
    /// Own private key.
    pub key: PrivateKeyDer<'static>,
    /// The grid CA.
    pub ca: CertificateDer<'static>,
    /// The revocation list peers are checked against, if any.
    pub crl: Option<Arc<CrlWatch>>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
            ca: self.ca.clone(),
            crl: self.crl.clone(),
        }
    }
}

fn pem_err(what: &str, e: impl fmt::Display) -> TlsError {
    TlsError::Pem {
        what: what.to_string(),
        detail: e.to_string(),
    }
}

impl Identity {
    /// Builds an identity from PEM text.
    pub fn from_pem(cert: &str, key: &str, ca: &str) -> Result<Identity, TlsError> {
        let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_err("certificate", e))?;
        if chain.is_empty() {
            return Err(pem_err("certificate", "no CERTIFICATE block"));
        }
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| pem_err("key", e))?;
        let ca = CertificateDer::from_pem_slice(ca.as_bytes()).map_err(|e| pem_err("CA", e))?;
        Ok(Identity {
            chain,
            key,
            ca,
            crl: None,
        })
    }

    /// Loads an identity from files.
    pub fn load(cert: &Path, key: &Path, ca: &Path) -> Result<Identity, TlsError> {
        let (c, k, a) = (read(cert)?, read(key)?, read(ca)?);
        Identity::from_pem(&c, &k, &a).map_err(|e| match e {
            TlsError::Pem { what, detail } => {
                let path = match what.as_str() {
                    "certificate" => cert,
                    "key" => key,
                    _ => ca,
                };
                TlsError::Pem {
                    what: path.display().to_string(),
                    detail,
                }
            }
            other => other,
        })
    }

    /// Checks peers against the CRL at `path` (read now, and again whenever the file
    /// changes); `None` leaves the identity as it is.
    pub fn with_crl(mut self, path: Option<&Path>) -> Result<Identity, TlsError> {
        if let Some(p) = path {
            self.crl = Some(CrlWatch::open(p)?);
        }
        Ok(self)
    }

    fn roots(&self) -> Result<rustls::RootCertStore, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone())?;
        Ok(roots)
    }

    /// A server configuration that requires a client certificate from the grid CA,
    /// valid now and not revoked. The client's role is checked after the handshake
    /// with [`peer_has_role`].
    pub fn server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            ClientVerifier::new(Arc::new(self.roots()?), provider.clone(), self.crl.clone())?;
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(Arc::new(verifier))
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        cfg.alpn_protocols = vec![ALPN.to_vec()];
        // A resumed session skips the client's certificate: a peer revoked since
        // would get back in. Every handshake is a full one.
        cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
        Ok(cfg)
    }

    /// A client configuration that presents this identity and trusts only the grid
    /// CA's certificates that are valid now and not revoked.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            ServerVerifier::new(Arc::new(self.roots()?), provider.clone(), self.crl.clone())?;
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())?;
        cfg.alpn_protocols = vec![ALPN.to_vec()];
        cfg.resumption = rustls::client::Resumption::disabled();
        Ok(cfg)
    }
}

/// Whether a (CA-verified) end-entity certificate certifies `role`.
pub fn peer_has_role(cert: &CertificateDer<'_>, role: Role) -> bool {
    let Ok(ee) = webpki::EndEntityCert::try_from(cert) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(role.dns_name()) else {
        return false;
    };
    ee.verify_is_valid_for_subject_name(&name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_carry_their_role_only() {
        let ca = Ca::generate().unwrap();
        let id = ca.identity(Role::Frontal, "orsay").unwrap();
        assert!(peer_has_role(&id.chain[0], Role::Frontal));
        for other in [
            Role::Broker,
            Role::Helper,
            Role::Proxy,
            Role::Client,
            Role::Admin,
        ] {
            assert!(!peer_has_role(&id.chain[0], other), "{other}");
        }
        id.server_config().unwrap();
        id.client_config().unwrap();
    }

    #[test]
    fn ca_survives_save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::generate().unwrap();
        ca.save(dir.path()).unwrap();
        let back = Ca::load(dir.path()).unwrap();
        assert_eq!(back.cert_pem, ca.cert_pem);
        let issued = back.issue(Role::Helper, "n1").unwrap();
        let (c, k) = issued.save(dir.path(), "n1").unwrap();
        Identity::load(&c, &k, &dir.path().join("ca.pem")).unwrap();
    }

    #[test]
    fn bad_pem_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("junk.pem");
        std::fs::write(&p, "hello").unwrap();
        let err = Identity::load(&p, &p, &p).unwrap_err().to_string();
        assert!(err.contains("junk.pem"), "{err}");
    }
}
