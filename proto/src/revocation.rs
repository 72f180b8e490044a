//! Certificate lifetimes and revocation.
//!
//! `qcg ca issue` records each certificate it signs in the CA folder's `issued.txt`
//! (serial, expiry, name); `qcg ca revoke NAME` adds every unrevoked certificate of
//! that name to `revoked.txt` and writes `crl.pem`, an X.509 CRL signed by the CA, in
//! one rename (a service never reads half a file). A certificate issued for the same
//! name afterwards has a new serial and is not revoked.
//!
//! A service whose config names a `crl` checks every peer certificate against it, on
//! both sides of the handshake ([`Identity::server_config`] and
//! [`Identity::client_config`]). The file is looked at (one `stat`) on every
//! handshake and read again when it changed, so a revocation takes effect on the next
//! handshake without a restart; a CRL that cannot be read or parsed is logged and the
//! last good one kept. Every refused certificate is logged with its serial and the
//! reason (revoked, expired, not yet valid, unknown issuer).
//!
//! [`Identity::server_config`]: crate::tls::Identity::server_config
//! [`Identity::client_config`]: crate::tls::Identity::client_config

use crate::der::cert_info;
use crate::tls::{Ca, Issued, TlsError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// File names inside a CA folder.
pub const CRL_FILE: &str = "crl.pem";
const ISSUED_FILE: &str = "issued.txt";
const REVOKED_FILE: &str = "revoked.txt";

/// How long a certificate of `role` lives unless `--days` says otherwise: people's
/// certificates (clients, admins) 90 days, services' one year.
pub fn default_days(role: crate::tls::Role) -> u32 {
    match role.name() {
        "client" | "admin" => 90,
        _ => 365,
    }
}

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::File {
        path: path.to_path_buf(),
        source,
    }
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// One line of `issued.txt` or `revoked.txt`: serial (hex), a time (Unix seconds),
/// the holder's name.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    serial: Vec<u8>,
    at: u64,
    name: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn read_entries(path: &Path) -> Result<Vec<Entry>, TlsError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(file_err(path)(e)),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let mut it = l.splitn(3, ' ');
            let parsed = (|| {
                Some(Entry {
                    serial: unhex(it.next()?)?,
                    at: it.next()?.parse().ok()?,
                    name: it.next()?.to_string(),
                })
            })();
            parsed.ok_or_else(|| TlsError::Pem {
                what: format!("{}:{}", path.display(), i + 1),
                detail: "expected `SERIAL-HEX UNIX-SECONDS NAME`".into(),
            })
        })
        .collect()
}

fn append_entry(path: &Path, e: &Entry) -> Result<(), TlsError> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(file_err(path))?;
    writeln!(f, "{} {} {}", hex(&e.serial), e.at, e.name).map_err(file_err(path))
}

/// Writes `data` to `path` through a temporary file and a rename, so that a reader
/// sees the old file or the new one, never a part.
pub(crate) fn write_atomic(path: &Path, data: &str) -> Result<(), TlsError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, data).map_err(file_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(file_err(path))
}

impl Ca {
    /// Records a certificate this CA issued for `name` in `dir/issued.txt`, so that
    /// `revoke` finds it wherever its files went.
    pub fn record_issued(dir: &Path, name: &str, issued: &Issued) -> Result<(), TlsError> {
        let der = CertificateDer::from_pem_slice(issued.cert_pem.as_bytes()).map_err(|e| {
            TlsError::Pem {
                what: format!("certificate of {name}"),
                detail: e.to_string(),
            }
        })?;
        let info = cert_info(&der).map_err(|e| TlsError::Pem {
            what: format!("certificate of {name}"),
            detail: e.to_string(),
        })?;
        append_entry(
            &dir.join(ISSUED_FILE),
            &Entry {
                serial: info.serial,
                at: secs(info.not_after),
                name: name.to_string(),
            },
        )
    }

    /// Revokes every certificate issued for `name` (found in `dir/issued.txt`, or
    /// `dir/NAME.pem` for certificates issued before the record existed) that is not
    /// revoked yet, and writes `dir/crl.pem` again. Returns the serials revoked now.
    pub fn revoke(&self, dir: &Path, name: &str) -> Result<Vec<Vec<u8>>, TlsError> {
        let revoked_path = dir.join(REVOKED_FILE);
        let revoked = read_entries(&revoked_path)?;
        let mut serials: Vec<Vec<u8>> = read_entries(&dir.join(ISSUED_FILE))?
            .into_iter()
            .filter(|e| e.name == name)
            .map(|e| e.serial)
            .collect();
        let pem_path = dir.join(format!("{name}.pem"));
        if let Ok(pem) = std::fs::read(&pem_path) {
            if let Ok(der) = CertificateDer::from_pem_slice(&pem) {
                if let Ok(info) = cert_info(&der) {
                    serials.push(info.serial);
                }
            }
        }
        serials.sort();
        serials.dedup();
        if serials.is_empty() {
            return Err(TlsError::Pem {
                what: name.to_string(),
                detail: format!(
                    "no certificate issued for `{name}` in {} (no {ISSUED_FILE} entry, no {name}.pem)",
                    dir.display()
                ),
            });
        }
        let now = secs(SystemTime::now());
        let mut fresh = Vec::new();
        for s in serials {
            if revoked.iter().any(|e| e.serial == s) {
                continue;
            }
            append_entry(
                &revoked_path,
                &Entry {
                    serial: s.clone(),
                    at: now,
                    name: name.to_string(),
                },
            )?;
            fresh.push(s);
        }
        self.write_crl(dir)?;
        Ok(fresh)
    }

    /// Writes `dir/crl.pem` from `dir/revoked.txt` (an empty CRL when nothing is
    /// revoked).
    pub fn write_crl(&self, dir: &Path) -> Result<PathBuf, TlsError> {
        let revoked = read_entries(&dir.join(REVOKED_FILE))?;
        let list: Vec<(Vec<u8>, SystemTime)> = revoked
            .into_iter()
            .map(|e| (e.serial, UNIX_EPOCH + Duration::from_secs(e.at)))
            .collect();
        let path = dir.join(CRL_FILE);
        write_atomic(&path, &self.crl_pem(&list)?)?;
        Ok(path)
    }

    /// A CRL, PEM, signed by this CA, listing `revoked` (serial, revocation time).
    pub fn crl_pem(&self, revoked: &[(Vec<u8>, SystemTime)]) -> Result<String, TlsError> {
        let now = SystemTime::now();
        let params = rcgen::CertificateRevocationListParams {
            this_update: now.into(),
            next_update: (now + Duration::from_secs(365 * 86_400)).into(),
            crl_number: rcgen::SerialNumber::from_slice(&secs(now).to_be_bytes()),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|(serial, at)| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from_slice(serial),
                    revocation_time: (*at).into(),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&self.issuer()?, self.key())?;
        Ok(crl.pem()?)
    }
}

type Stamp = Option<(SystemTime, u64, u64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

#[derive(Debug)]
struct Loaded {
    stamp: Stamp,
    generation: u64,
    crls: Arc<Vec<CertificateRevocationListDer<'static>>>,
}

/// A CRL file, read again whenever it changes.
#[derive(Debug)]
pub struct CrlWatch {
    path: PathBuf,
    state: Mutex<Loaded>,
}

fn parse_crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let pem = std::fs::read(path).map_err(file_err(path))?;
    let crls = CertificateRevocationListDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what: path.display().to_string(),
            detail: e.to_string(),
        })?;
    if crls.is_empty() {
        return Err(TlsError::Pem {
            what: path.display().to_string(),
            detail: "no X509 CRL block".into(),
        });
    }
    for c in &crls {
        webpki::BorrowedCertRevocationList::from_der(c).map_err(|e| TlsError::Pem {
            what: path.display().to_string(),
            detail: format!("not a CRL: {e:?}"),
        })?;
    }
    Ok(crls)
}

impl CrlWatch {
    /// Reads the CRL at `path`; an error if it cannot be read or parsed.
    pub fn open(path: &Path) -> Result<Arc<CrlWatch>, TlsError> {
        let st = stamp(path);
        let crls = parse_crls(path)?;
        Ok(Arc::new(CrlWatch {
            path: path.to_path_buf(),
            state: Mutex::new(Loaded {
                stamp: st,
                generation: 0,
                crls: Arc::new(crls),
            }),
        }))
    }

    /// The file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A number that changes whenever the list does (the file is read again first if
    /// it changed on disk).
    pub fn generation(&self) -> u64 {
        self.current().0
    }

    /// The serial (hex) of the DER certificate `cert` if the current list revokes it.
    pub fn revokes(&self, cert: &[u8]) -> Option<String> {
        let serial = cert_info(cert).ok()?.serial;
        let (_, crls) = self.current();
        crls.iter().find_map(|c| {
            let list = webpki::CertRevocationList::from(
                webpki::BorrowedCertRevocationList::from_der(c).ok()?,
            );
            matches!(list.find_serial(&serial), Ok(Some(_))).then(|| hex(&serial))
        })
    }

    /// The CRLs now (read again if the file changed) and a number that changes with
    /// them.
    fn current(&self) -> (u64, Arc<Vec<CertificateRevocationListDer<'static>>>) {
        let mut s = match self.state.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        let now = stamp(&self.path);
        if now != s.stamp {
            s.stamp = now;
            match parse_crls(&self.path) {
                Ok(crls) => {
                    s.generation += 1;
                    s.crls = Arc::new(crls);
                    tracing::info!(crl = %self.path.display(), "revocation list reloaded");
                }
                Err(e) => tracing::error!(
                    crl = %self.path.display(),
                    error = %e,
                    "cannot reload the revocation list; keeping the last good one"
                ),
            }
        }
        (s.generation, s.crls.clone())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn log_refusal(side: &str, cert: &CertificateDer<'_>, e: &rustls::Error) {
    let serial = cert_info(cert).map_or_else(|_| "?".into(), |i| hex(&i.serial));
    tracing::warn!(side, serial = %serial, reason = %e, "peer certificate refused");
}

/// Builds a verifier of the grid CA's certificates under a CRL.
type Build<V> = fn(
    &Arc<RootCertStore>,
    &Arc<CryptoProvider>,
    &[CertificateRevocationListDer<'static>],
) -> Result<Arc<V>, TlsError>;

/// A verifier rebuilt whenever the CRL changes: the last one built, with the
/// generation of the CRL it holds.
#[derive(Debug)]
struct Rebuilt<V: ?Sized> {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
    crl: Option<Arc<CrlWatch>>,
    build: Build<V>,
    cache: Mutex<(u64, Arc<V>)>,
}

impl<V: ?Sized> Rebuilt<V> {
    fn new(
        roots: Arc<RootCertStore>,
        provider: Arc<CryptoProvider>,
        crl: Option<Arc<CrlWatch>>,
        build: Build<V>,
    ) -> Result<Rebuilt<V>, TlsError> {
        let (generation, crls) = crl
            .as_ref()
            .map_or((0, Arc::new(Vec::new())), |c| c.current());
        let inner = build(&roots, &provider, &crls)?;
        Ok(Rebuilt {
            roots,
            provider,
            crl,
            build,
            cache: Mutex::new((generation, inner)),
        })
    }

    /// The verifier for the CRL as it is now (the last good one if the new one
    /// cannot be applied).
    fn current(&self) -> Arc<V> {
        let mut c = lock(&self.cache);
        if let Some(watch) = &self.crl {
            let (generation, crls) = watch.current();
            if generation != c.0 {
                match (self.build)(&self.roots, &self.provider, &crls) {
                    Ok(v) => *c = (generation, v),
                    Err(e) => tracing::error!(error = %e, "cannot apply the new revocation list"),
                }
            }
        }
        c.1.clone()
    }
}

fn build_client(
    roots: &Arc<RootCertStore>,
    provider: &Arc<CryptoProvider>,
    crls: &[CertificateRevocationListDer<'static>],
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        .with_crls(crls.iter().cloned())
        .only_check_end_entity_revocation()
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))
}

fn build_server(
    roots: &Arc<RootCertStore>,
    provider: &Arc<CryptoProvider>,
    crls: &[CertificateRevocationListDer<'static>],
) -> Result<Arc<dyn ServerCertVerifier>, TlsError> {
    let v = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .with_crls(crls.iter().cloned())
        .only_check_end_entity_revocation()
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    Ok(v)
}

/// The handshake-signature checks of a verifier, left to its current inner one
/// (the same in the client's trait and the server's).
macro_rules! signatures_of_current {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.inner
                .current()
                .verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.inner
                .current()
                .verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.inner.current().supported_verify_schemes()
        }
    };
}

/// Verifies client certificates against the grid CA and the current CRL.
#[derive(Debug)]
pub(crate) struct ClientVerifier {
    inner: Rebuilt<dyn ClientCertVerifier>,
    hints: Vec<DistinguishedName>,
}

impl ClientVerifier {
    pub(crate) fn new(
        roots: Arc<RootCertStore>,
        provider: Arc<CryptoProvider>,
        crl: Option<Arc<CrlWatch>>,
    ) -> Result<ClientVerifier, TlsError> {
        let inner = Rebuilt::new(roots, provider, crl, build_client)?;
        let hints = inner.current().root_hint_subjects().to_vec();
        Ok(ClientVerifier { inner, hints })
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.inner
            .current()
            .verify_client_cert(end_entity, intermediates, now)
            .inspect_err(|e| log_refusal("client", end_entity, e))
    }

    signatures_of_current!();
}

/// Verifies server certificates against the grid CA and the current CRL.
#[derive(Debug)]
pub(crate) struct ServerVerifier {
    inner: Rebuilt<dyn ServerCertVerifier>,
}

impl ServerVerifier {
    pub(crate) fn new(
        roots: Arc<RootCertStore>,
        provider: Arc<CryptoProvider>,
        crl: Option<Arc<CrlWatch>>,
    ) -> Result<ServerVerifier, TlsError> {
        let inner = Rebuilt::new(roots, provider, crl, build_server)?;
        Ok(ServerVerifier { inner })
    }
}

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .current()
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .inspect_err(|e| log_refusal("server", end_entity, e))
    }

    signatures_of_current!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        assert_eq!(
            unhex(&hex(&[0, 1, 0xab, 0xff])),
            Some(vec![0, 1, 0xab, 0xff])
        );
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_bad_record_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("revoked.txt");
        std::fs::write(&p, "00aa 12 alice\nnonsense\n").unwrap();
        let e = read_entries(&p).unwrap_err().to_string();
        assert!(e.contains("revoked.txt:2"), "{e}");
    }
}
