//! Who calls the HTTPS API: the identity a client certificate names (its subject's
//! common name, what `qcg ca issue --name` wrote) and whether it is an `admin`.
//!
//! A job belongs to the identity that submitted it ([`crate::jobs::Submission::owner`]);
//! only that identity or an admin may see it, read its output or cancel it. The
//! certificate was verified against the grid CA by the TLS handshake before it gets
//! here; this module only reads its subject, with a small DER walker (the only
//! fields read are the TBSCertificate's first six, and every length is checked
//! against what is left before anything is sliced).

use qcg_proto::tls::{peer_has_role, Role};
use rustls::pki_types::CertificateDer;

/// Longest identity accepted (a certificate's common name).
pub const MAX_NAME: usize = 128;

/// The holder of a client certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The certificate's identity (subject common name).
    pub name: String,
    /// Whether the certificate is of role `admin`.
    pub admin: bool,
}

/// Why a certificate does not make a caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallerError {
    /// Neither a `client` nor an `admin` certificate.
    #[error("a client certificate from the grid CA is required (qcg ca issue --role client)")]
    Role,
    /// The certificate's subject has no usable common name.
    #[error("the client certificate names no identity (its subject has no common name of 1 to {MAX_NAME} characters)")]
    NoName,
}

impl Caller {
    /// The caller a (CA-verified) end-entity certificate makes.
    pub fn of(cert: &CertificateDer<'_>) -> Result<Caller, CallerError> {
        let admin = peer_has_role(cert, Role::Admin);
        if !admin && !peer_has_role(cert, Role::Client) {
            return Err(CallerError::Role);
        }
        let name = common_name(cert.as_ref())
            .filter(|n| !n.is_empty() && n.len() <= MAX_NAME)
            .ok_or(CallerError::NoName)?;
        Ok(Caller { name, admin })
    }

    /// Whether this caller may see (read, cancel) a job of `owner`.
    pub fn may_see(&self, owner: &str) -> bool {
        self.admin || self.name == owner
    }
}

/// One DER element: its tag, its contents, and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// 2.5.4.3, id-at-commonName.
const CN_OID: &[u8] = &[0x55, 0x04, 0x03];

/// The subject common name of a DER certificate.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (SEQUENCE, cert, _) = element(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(cert)? else {
        return None;
    };
    let mut rest = tbs;
    // The optional explicit [0] version comes first.
    if rest.first() == Some(&0xa0) {
        rest = element(rest)?.2;
    }
    // serialNumber, signature, issuer, validity; then the subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (SEQUENCE, mut rdns, _) = element(rest)? else {
        return None;
    };
    while !rdns.is_empty() {
        let (tag, set, next) = element(rdns)?;
        rdns = next;
        if tag != SET {
            return None;
        }
        let mut attrs = set;
        while !attrs.is_empty() {
            let (tag, attr, next) = element(attrs)?;
            attrs = next;
            if tag != SEQUENCE {
                return None;
            }
            let (OID, oid, value) = element(attr)? else {
                return None;
            };
            if oid != CN_OID {
                continue;
            }
            let (tag, text, _) = element(value)?;
            // UTF8String, PrintableString, IA5String, T61String (taken as UTF-8).
            if ![0x0c, 0x13, 0x16, 0x14].contains(&tag) {
                return None;
            }
            return String::from_utf8(text.to_vec()).ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::tls::Ca;

    #[test]
    fn the_identity_and_role_come_from_the_certificate() {
        let ca = Ca::generate().unwrap();
        let alice = ca.identity(Role::Client, "alice").unwrap();
        assert_eq!(
            Caller::of(&alice.chain[0]),
            Ok(Caller {
                name: "alice".into(),
                admin: false
            })
        );
        let root = ca.identity(Role::Admin, "ops team").unwrap();
        let c = Caller::of(&root.chain[0]).unwrap();
        assert_eq!((c.name.as_str(), c.admin), ("ops team", true));
        assert!(c.may_see("alice"));
        let bob = Caller {
            name: "bob".into(),
            admin: false,
        };
        assert!(!bob.may_see("alice") && bob.may_see("bob"));
        let frontal = ca.identity(Role::Frontal, "alice").unwrap();
        assert_eq!(Caller::of(&frontal.chain[0]), Err(CallerError::Role));
        let long = ca
            .identity(Role::Client, &"x".repeat(MAX_NAME + 1))
            .unwrap();
        assert_eq!(Caller::of(&long.chain[0]), Err(CallerError::NoName));
    }

    #[test]
    fn truncated_or_garbled_certificates_name_nobody() {
        let ca = Ca::generate().unwrap();
        let der = ca.identity(Role::Client, "alice").unwrap().chain[0].to_vec();
        assert_eq!(common_name(&der).as_deref(), Some("alice"));
        for cut in 0..der.len() {
            // Cut short, every length runs past the end: no name, no panic.
            assert_eq!(common_name(&der[..cut]), None, "cut at {cut}");
        }
        for i in 0..der.len() {
            let mut bad = der.clone();
            bad[i] ^= 0xff;
            let _ = common_name(&bad);
        }
        assert_eq!(common_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }
}
