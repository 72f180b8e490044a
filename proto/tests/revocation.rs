//! Certificate lifetimes and revocation, over real QUIC handshakes on loopback: a
//! server endpoint under the grid CA answering every request, and clients holding
//! expired, not-yet-valid, revoked and re-issued certificates.

use anyhow::{anyhow, Result};
use qcg_proto::quic;
use qcg_proto::tls::{Ca, Identity, Role};
use qcg_proto::{Request, Response};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

const DAY: Duration = Duration::from_secs(86_400);

/// A server that answers `Ok` to anything, stopped on drop.
struct Server {
    addr: SocketAddr,
    ep: quinn::Endpoint,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.ep.close(0u32.into(), b"test over");
    }
}

fn serve(id: &Identity) -> Result<Server> {
    let ep = quic::server_endpoint(([127, 0, 0, 1], 0).into(), id)?;
    let addr = ep.local_addr()?;
    let e = ep.clone();
    tokio::spawn(async move {
        while let Some(inc) = e.accept().await {
            tokio::spawn(async move {
                if let Ok(conn) = inc.await {
                    quic::serve(conn, |_req| async { Response::Ok }).await;
                }
            });
        }
    });
    Ok(Server { addr, ep })
}

/// Connects with `id` and makes one request: Ok(()) when the server answered.
async fn try_request(id: &Identity, addr: SocketAddr) -> Result<()> {
    let ep = quic::client_endpoint(id)?;
    let r = async {
        let conn = quic::connect(&ep, addr, Role::Broker).await?;
        // In TLS 1.3 the server checks the client's certificate after the client
        // considers the handshake done: the refusal shows on the first request.
        let req = Request::Echo {
            payload: "x".into(),
        };
        match tokio::time::timeout(Duration::from_secs(20), quic::request(&conn, &req)).await {
            Ok(Ok(Response::Ok)) => Ok(()),
            Ok(Ok(other)) => Err(anyhow!("unexpected answer {other:?}")),
            // The stream may break before the close frame is read: wait for the
            // connection's close, which carries the TLS alert.
            Ok(Err(e)) => {
                let why = tokio::time::timeout(Duration::from_secs(20), conn.closed())
                    .await
                    .map_or_else(|_| "not closed".to_string(), |c| c.to_string());
                Err(anyhow!("{e}; connection closed: {why}"))
            }
            Err(_) => Err(anyhow!("no answer in 20 s")),
        }
    }
    .await;
    ep.close(0u32.into(), b"done");
    r
}

fn identity(ca: &Ca, dir: &Path, role: Role, name: &str) -> Result<Identity> {
    let issued = ca.issue(role, name)?;
    Ca::record_issued(dir, name, &issued)?;
    let (c, k) = issued.save(dir, name)?;
    Ok(Identity::load(&c, &k, &dir.join("ca.pem"))?)
}

fn setup() -> Result<(tempfile::TempDir, Ca)> {
    let dir = tempfile::tempdir()?;
    let ca = Ca::generate()?;
    ca.save(dir.path())?;
    Ok((dir, ca))
}

#[tokio::test]
async fn expired_and_not_yet_valid_clients_are_refused() -> Result<()> {
    let (dir, ca) = setup()?;
    let server = serve(&identity(&ca, dir.path(), Role::Broker, "b")?)?;
    let ca_pem = dir.path().join("ca.pem");
    let now = SystemTime::now();
    let mk = |from: SystemTime, to: SystemTime| -> Result<Identity> {
        let i = ca.issue_between(Role::Frontal, "f", from, to)?;
        Ok(Identity::from_pem(
            &i.cert_pem,
            &i.key_pem,
            &std::fs::read_to_string(&ca_pem)?,
        )?)
    };
    let expired = mk(now - 10 * DAY, now - DAY)?;
    let future = mk(now + DAY, now + 10 * DAY)?;
    let good = mk(now - DAY, now + DAY)?;
    let e = try_request(&expired, server.addr).await.unwrap_err();
    assert!(format!("{e:#}").to_lowercase().contains("expired"), "{e:#}");
    let e = try_request(&future, server.addr).await.unwrap_err();
    assert!(
        format!("{e:#}").to_lowercase().contains("not valid yet")
            || format!("{e:#}").to_lowercase().contains("notvalidyet"),
        "{e:#}"
    );
    try_request(&good, server.addr).await?;
    Ok(())
}

#[tokio::test]
async fn an_expired_server_is_refused_by_its_clients() -> Result<()> {
    let (dir, ca) = setup()?;
    let now = SystemTime::now();
    let i = ca.issue_between(Role::Broker, "b", now - 10 * DAY, now - DAY)?;
    let ca_pem = std::fs::read_to_string(dir.path().join("ca.pem"))?;
    let server = serve(&Identity::from_pem(&i.cert_pem, &i.key_pem, &ca_pem)?)?;
    let client = identity(&ca, dir.path(), Role::Frontal, "f")?;
    let e = try_request(&client, server.addr).await.unwrap_err();
    assert!(format!("{e:#}").to_lowercase().contains("expired"), "{e:#}");
    Ok(())
}

#[tokio::test]
async fn revoked_client_is_refused_at_once_and_a_reissued_one_works() -> Result<()> {
    let (dir, ca) = setup()?;
    let crl = dir.path().join("crl.pem");
    let server_id = identity(&ca, dir.path(), Role::Broker, "b")?.with_crl(Some(&crl))?;
    let server = serve(&server_id)?;
    let alice = identity(&ca, dir.path(), Role::Frontal, "alice")?;
    let bob = identity(&ca, dir.path(), Role::Frontal, "bob")?;
    try_request(&alice, server.addr).await?;

    let revoked = ca.revoke(dir.path(), "alice")?;
    assert_eq!(revoked.len(), 1);
    // The running server reads the new CRL on the next handshake: no restart.
    let e = try_request(&alice, server.addr).await.unwrap_err();
    assert!(format!("{e:#}").to_lowercase().contains("revoked"), "{e:#}");
    try_request(&bob, server.addr).await?;

    // Revoking again finds nothing new; a new certificate for the same name works.
    assert!(ca.revoke(dir.path(), "alice")?.is_empty());
    let alice2 = identity(&ca, dir.path(), Role::Frontal, "alice")?;
    try_request(&alice2, server.addr).await?;
    let e = try_request(&alice, server.addr).await.unwrap_err();
    assert!(format!("{e:#}").to_lowercase().contains("revoked"), "{e:#}");
    Ok(())
}

#[tokio::test]
async fn a_client_with_the_crl_refuses_a_revoked_server() -> Result<()> {
    let (dir, ca) = setup()?;
    let server = serve(&identity(&ca, dir.path(), Role::Broker, "b")?)?;
    let crl = dir.path().join("crl.pem");
    let client = identity(&ca, dir.path(), Role::Frontal, "f")?.with_crl(Some(&crl))?;
    try_request(&client, server.addr).await?;
    ca.revoke(dir.path(), "b")?;
    let e = try_request(&client, server.addr).await.unwrap_err();
    assert!(format!("{e:#}").to_lowercase().contains("revoked"), "{e:#}");
    Ok(())
}

#[tokio::test]
async fn a_broken_crl_is_refused_at_load_and_ignored_on_reload() -> Result<()> {
    let (dir, ca) = setup()?;
    let bad = dir.path().join("bad.pem");
    std::fs::write(&bad, "not a crl")?;
    let id = identity(&ca, dir.path(), Role::Broker, "b")?;
    let e = id.clone().with_crl(Some(&bad)).unwrap_err().to_string();
    assert!(e.contains("bad.pem"), "{e}");

    let crl = dir.path().join("crl.pem");
    let server = serve(&id.with_crl(Some(&crl))?)?;
    let alice = identity(&ca, dir.path(), Role::Frontal, "alice")?;
    ca.revoke(dir.path(), "alice")?;
    assert!(try_request(&alice, server.addr).await.is_err());
    // A garbled CRL later does not lift the revocation: the last good list stays.
    std::fs::write(
        &crl,
        "-----BEGIN X509 CRL-----\ngarbage\n-----END X509 CRL-----\n",
    )?;
    assert!(try_request(&alice, server.addr).await.is_err());
    Ok(())
}

#[test]
fn issued_certificates_live_a_year_or_ninety_days_from_now() -> Result<()> {
    use qcg_proto::der::cert_info;
    use rustls::pki_types::pem::PemObject;
    let ca = Ca::generate()?;
    for (role, days) in [(Role::Broker, 365), (Role::Helper, 365), (Role::Client, 90)] {
        let before = SystemTime::now() - Duration::from_secs(2);
        let i = ca.issue(role, "x")?;
        let after = SystemTime::now() + Duration::from_secs(2);
        let der = rustls::pki_types::CertificateDer::from_pem_slice(i.cert_pem.as_bytes())?;
        let info = cert_info(&der)?;
        assert!(
            info.not_before >= before && info.not_before <= after,
            "{role}"
        );
        let life = info.not_after.duration_since(info.not_before)?;
        assert_eq!(life.as_secs() / 86_400, days, "{role}");
    }
    let i = ca.issue_for_days(Role::Proxy, "p", 7)?;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(i.cert_pem.as_bytes())?;
    let info = cert_info(&der)?;
    assert_eq!(
        info.not_after.duration_since(info.not_before)?.as_secs(),
        7 * 86_400
    );
    Ok(())
}

#[test]
fn the_watch_names_a_revoked_certificate_once_the_list_changes() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = Ca::generate()?;
    ca.save(dir.path())?;
    let kept = ca.issue(Role::Helper, "kept")?;
    let gone = ca.issue(Role::Helper, "gone")?;
    Ca::record_issued(dir.path(), "kept", &kept)?;
    Ca::record_issued(dir.path(), "gone", &gone)?;
    let watch = qcg_proto::revocation::CrlWatch::open(&dir.path().join("crl.pem"))?;
    let der = |pem: &str| {
        <rustls::pki_types::CertificateDer as rustls::pki_types::pem::PemObject>::from_pem_slice(
            pem.as_bytes(),
        )
        .map(|c| c.to_vec())
        .map_err(|e| anyhow!("{e}"))
    };
    let (kept, gone) = (der(&kept.cert_pem)?, der(&gone.cert_pem)?);
    let before = watch.generation();
    assert_eq!(watch.revokes(&gone), None);
    ca.revoke(dir.path(), "gone")?;
    assert_ne!(watch.generation(), before);
    assert!(watch.revokes(&gone).is_some());
    assert_eq!(watch.revokes(&kept), None);
    Ok(())
}
