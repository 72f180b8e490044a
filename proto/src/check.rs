//! `--check-config`: what every service checks of its config before it would start,
//! each problem naming the config field and, where one exists, the command that
//! fixes it. Parsing is `config`'s (it names file, line and field already); here
//! the certificate, key, CA and CRL the fields point to, and the addresses to listen
//! on.

use crate::revocation::CrlWatch;
use crate::tls::Role;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::path::Path;
use std::sync::Arc;

/// One thing wrong: the config field and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The field (`cert`, `listen`, ...).
    pub field: String,
    /// What is wrong, and how to fix it.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field `{}`: {}", self.field, self.message)
    }
}

/// The TLS files of a service: the fields' paths (resolved) and who it is.
pub struct Tls<'a> {
    /// `ca`.
    pub ca: &'a Path,
    /// `cert`.
    pub cert: &'a Path,
    /// `key`.
    pub key: &'a Path,
    /// `crl`, if set.
    pub crl: Option<&'a Path>,
    /// The role its certificate must certify.
    pub role: Role,
    /// The name to issue a certificate for (`qcg ca issue --name`).
    pub name: &'a str,
}

fn problem(field: &str, message: impl Into<String>) -> Problem {
    Problem {
        field: field.into(),
        message: message.into(),
    }
}

impl Tls<'_> {
    /// The command that issues this service's certificate and key.
    fn issue(&self) -> String {
        let dir = self.ca.parent().unwrap_or(Path::new("."));
        format!(
            "qcg ca issue --dir {} --role {} --name {}",
            dir.display(),
            self.role.name(),
            self.name
        )
    }

    /// Every problem with the certificate, key, CA and CRL.
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let read = |field: &str, p: &Path, fix: &str, out: &mut Vec<Problem>| match std::fs::read(p)
        {
            Ok(b) => Some(b),
            Err(e) => {
                out.push(problem(field, format!("{}: {e} ({fix})", p.display())));
                None
            }
        };
        let init = format!(
            "make the grid's CA with: qcg ca init --dir {}",
            self.ca.parent().unwrap_or(Path::new(".")).display()
        );
        let issue = format!("issue it with: {}", self.issue());
        let ca = read("ca", self.ca, &init, &mut out);
        let cert = read("cert", self.cert, &issue, &mut out);
        let key = read("key", self.key, &issue, &mut out);
        let ca = ca.and_then(|b| match CertificateDer::pem_slice_iter(&b).next() {
            Some(Ok(c)) => Some(c),
            _ => {
                out.push(problem(
                    "ca",
                    format!("{}: no PEM certificate in it", self.ca.display()),
                ));
                None
            }
        });
        let chain = cert.and_then(|b| {
            match CertificateDer::pem_slice_iter(&b).collect::<Result<Vec<_>, _>>() {
                Ok(c) if !c.is_empty() => Some(c),
                _ => {
                    out.push(problem(
                        "cert",
                        format!(
                            "{}: no PEM certificate in it ({issue})",
                            self.cert.display()
                        ),
                    ));
                    None
                }
            }
        });
        let key = key.and_then(|b| match PrivateKeyDer::from_pem_slice(&b) {
            Ok(k) => Some(k),
            Err(e) => {
                out.push(problem(
                    "key",
                    format!("{}: not a PEM private key: {e}", self.key.display()),
                ));
                None
            }
        });
        if let (Some(ca), Some(chain)) = (&ca, &chain) {
            if let Some(p) = self.verify(ca, chain) {
                out.push(p);
            }
        }
        if let (Some(chain), Some(key)) = (&chain, key) {
            let signer = rustls::crypto::ring::sign::any_supported_type(&key);
            let matches =
                signer.and_then(|s| rustls::sign::CertifiedKey::new(chain.clone(), s).keys_match());
            if let Err(e) = matches {
                out.push(problem(
                    "key",
                    format!(
                        "{} is not the key of {} ({e}); {issue}",
                        self.key.display(),
                        self.cert.display()
                    ),
                ));
            }
        }
        if let Some(crl) = self.crl {
            match CrlWatch::open(crl) {
                Err(e) => out.push(problem(
                    "crl",
                    format!(
                        "{}: {e} (write it with: qcg ca revoke, or leave `crl` out)",
                        crl.display()
                    ),
                )),
                Ok(w) => {
                    if let Some(why) = chain.as_ref().and_then(|c| w.revokes(c[0].as_ref())) {
                        out.push(problem(
                            "cert",
                            format!("{} is revoked ({why}); {issue}", self.cert.display()),
                        ));
                    }
                }
            }
        }
        out
    }

    /// Whether the certificate chains to the CA, is valid now and certifies the role.
    fn verify(
        &self,
        ca: &CertificateDer<'_>,
        chain: &[CertificateDer<'static>],
    ) -> Option<Problem> {
        let mut roots = rustls::RootCertStore::empty();
        if let Err(e) = roots.add(ca.clone()) {
            return Some(problem("ca", format!("{}: {e}", self.ca.display())));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = match rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider,
        )
        .build()
        {
            Ok(v) => v,
            Err(e) => return Some(problem("ca", format!("{}: {e}", self.ca.display()))),
        };
        let name = ServerName::try_from(self.role.dns_name()).ok()?;
        use rustls::client::danger::ServerCertVerifier;
        let r = verifier.verify_server_cert(&chain[0], &chain[1..], &name, &[], UnixTime::now());
        let e = r.err()?;
        use rustls::{CertificateError as C, Error as E};
        let what = match &e {
            E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
                "has expired".to_string()
            }
            E::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => {
                "is not valid yet (is this machine's clock right?)".to_string()
            }
            E::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
                format!("was not signed by the CA in {}", self.ca.display())
            }
            E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
                format!("is not a {} certificate", self.role.name())
            }
            other => other.to_string(),
        };
        Some(problem(
            "cert",
            format!(
                "{} {what}; issue it with: {}",
                self.cert.display(),
                self.issue()
            ),
        ))
    }
}

/// Whether `addr` can be listened on with TCP (`udp`: with UDP, as QUIC does).
pub fn port_free(field: &str, addr: std::net::SocketAddr, udp: bool) -> Option<Problem> {
    let r = if udp {
        std::net::UdpSocket::bind(addr).map(drop)
    } else {
        std::net::TcpListener::bind(addr).map(drop)
    };
    r.err().map(|e| {
        problem(
            field,
            format!(
                "cannot listen on {addr} ({}): {e} (another service there? pick a free port)",
                if udp { "UDP" } else { "TCP" }
            ),
        )
    })
}

/// Prints the outcome of `--check-config` for `service` and exits: 0 when there is
/// no problem, 2 otherwise (each problem on its own line).
pub fn report(service: &str, config: &Path, problems: &[Problem]) -> ! {
    if problems.is_empty() {
        println!("{service}: {} is fine", config.display());
        std::process::exit(0);
    }
    for p in problems {
        eprintln!("{service}: {}: {p}", config.display());
    }
    std::process::exit(2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::Ca;

    fn issued(dir: &Path, role: Role, name: &str) -> Ca {
        let ca = Ca::generate().unwrap();
        ca.save(dir).unwrap();
        ca.issue(role, name).unwrap().save(dir, name).unwrap();
        ca
    }

    fn tls<'a>(dir: &'a Path, ca: &'a Path, cert: &'a Path, key: &'a Path, role: Role) -> Tls<'a> {
        let _ = dir;
        Tls {
            ca,
            cert,
            key,
            crl: None,
            role,
            name: "orsay",
        }
    }

    #[test]
    fn a_good_identity_has_no_problem_and_each_fault_is_named_with_its_fix() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        issued(dir, Role::Frontal, "orsay");
        let (ca, cert, key) = (
            dir.join("ca.pem"),
            dir.join("orsay.pem"),
            dir.join("orsay.key"),
        );
        assert_eq!(tls(dir, &ca, &cert, &key, Role::Frontal).problems(), vec![]);
        // A helper's config given a frontal's certificate.
        let p = tls(dir, &ca, &cert, &key, Role::Helper).problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].field, "cert");
        assert!(
            p[0].message.contains("is not a helper certificate"),
            "{}",
            p[0]
        );
        assert!(p[0].message.contains("qcg ca issue --dir"), "{}", p[0]);
        // A missing certificate: the field, the path and the command.
        let gone = dir.join("orsay-9.pem");
        let p = tls(dir, &ca, &gone, &key, Role::Frontal).problems();
        assert_eq!(p[0].field, "cert");
        assert!(
            p[0].message.contains("orsay-9.pem")
                && p[0].message.contains("--role frontal --name orsay"),
            "{}",
            p[0]
        );
        // Another CA's certificate, and a key that is not the certificate's.
        let other = tempfile::tempdir().unwrap();
        issued(other.path(), Role::Frontal, "orsay");
        let (ocert, okey) = (
            other.path().join("orsay.pem"),
            other.path().join("orsay.key"),
        );
        let p = tls(dir, &ca, &ocert, &key, Role::Frontal).problems();
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert!(fields.contains(&"cert") && fields.contains(&"key"), "{p:?}");
        assert!(
            p.iter()
                .any(|p| p.message.contains("was not signed by the CA")),
            "{p:?}"
        );
        let p = tls(dir, &ca, &cert, &okey, Role::Frontal).problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].message.contains("is not the key of"), "{}", p[0]);
    }

    #[test]
    fn a_port_in_use_is_named() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = port_free("http_listen", l.local_addr().unwrap(), false).unwrap();
        assert_eq!(p.field, "http_listen");
        assert!(p.message.contains("cannot listen on"), "{p}");
        assert!(port_free("listen", "127.0.0.1:0".parse().unwrap(), true).is_none());
    }
}
