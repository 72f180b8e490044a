//! `qcg ca`: keys written private whatever the umask, bounded lifetimes, and
//! `qcg ca revoke` taking effect on a running broker started from its config file.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use qcg_proto::tls::{Identity, Role};
use qcg_proto::{quic, Request};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Runs `qcg ARGS` under umask 000, as a careless shell would.
fn qcg_umask0(args: &[&str]) {
    let o = Command::new("sh")
        .arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(bin("qcg"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn keys_are_mode_0600_whatever_the_umask() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");
    let d = dir.to_str().unwrap();
    qcg_umask0(&["ca", "init", "--dir", d]);
    assert_eq!(mode(&dir.join("ca.key")), 0o600);
    qcg_umask0(&[
        "ca", "issue", "--dir", d, "--role", "helper", "--name", "n1",
    ]);
    assert_eq!(mode(&dir.join("n1.key")), 0o600);
    // Issuing again over a key someone made world-readable makes it private again.
    std::fs::set_permissions(dir.join("n1.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    qcg_umask0(&[
        "ca", "issue", "--dir", d, "--role", "helper", "--name", "n1",
    ]);
    assert_eq!(mode(&dir.join("n1.key")), 0o600);
    // Certificates and the CRL are public.
    assert!(dir.join("crl.pem").exists());
    assert_eq!(mode(&dir.join("n1.pem")) & 0o044, 0o044);
}

#[test]
fn gitignore_keeps_the_example_certificates_out_of_the_repo() {
    let gi = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.gitignore"))
        .unwrap();
    assert!(gi.lines().any(|l| l.trim() == "/configs/certs/"), "{gi}");
}

#[test]
fn days_is_bounded_and_names_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_str().unwrap();
    assert!(qcg(&["ca", "init", "--dir", d]).status.success());
    let o = qcg(&[
        "ca", "issue", "--dir", d, "--role", "client", "--name", "a", "--days", "0",
    ]);
    assert!(!o.status.success());
    let o = qcg(&["ca", "revoke", "--dir", d, "nobody-issued"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no certificate issued for `nobody-issued`"),
        "{err}"
    );
}

async fn ask(id: &Identity, addr: std::net::SocketAddr) -> Result<(), String> {
    let ep = quic::client_endpoint(id).map_err(|e| e.to_string())?;
    let r = async {
        let conn = quic::connect(&ep, addr, Role::Broker)
            .await
            .map_err(|e| e.to_string())?;
        let req = Request::Echo {
            payload: String::new(),
        };
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            quic::request(&conn, &req),
        )
        .await
        .map_err(|_| "no answer in 20 s".to_string())?;
        match r {
            Ok(_) => Ok(()),
            // The stream may break before the close frame is read: wait for the
            // connection's close, which carries the server's TLS alert.
            Err(e) => {
                let why = tokio::time::timeout(std::time::Duration::from_secs(20), conn.closed())
                    .await
                    .map_or_else(|_| "not closed".to_string(), |c| c.to_string());
                Err(format!("{e}; connection closed: {why}"))
            }
        }
    }
    .await;
    ep.close(0u32.into(), b"done");
    r
}

#[test]
fn revoke_takes_effect_on_a_running_broker_and_a_reissued_certificate_works() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let c = certs.to_str().unwrap();
    assert!(qcg(&["ca", "init", "--dir", c]).status.success());
    issue(&certs, "broker", "broker");
    issue(&certs, "frontal", "orsay");
    issue(&certs, "frontal", "rennes");
    let cfg = write(
        tmp.path(),
        "broker.toml",
        "listen = \"127.0.0.1:0\"\nca = \"certs/ca.pem\"\ncert = \"certs/broker.pem\"\n\
         key = \"certs/broker.key\"\ncrl = \"certs/crl.pem\"\n",
    );
    let mut services = Services(Vec::new());
    let lines = start(&mut services, "qcg-broker", &cfg);
    let addr = wait_for(&lines, "qcg-broker: QUIC on").parse().unwrap();
    let id = |name: &str| {
        Identity::load(
            &certs.join(format!("{name}.pem")),
            &certs.join(format!("{name}.key")),
            &certs.join("ca.pem"),
        )
        .unwrap()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let orsay = id("orsay");
    rt.block_on(ask(&orsay, addr)).unwrap();

    let o = qcg(&["ca", "revoke", "--dir", c, "orsay"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("revoked 1 certificate"));
    let e = rt.block_on(ask(&orsay, addr)).unwrap_err();
    assert!(e.to_lowercase().contains("revoked"), "{e}");
    // Others go on; a new certificate for orsay works.
    rt.block_on(ask(&id("rennes"), addr)).unwrap();
    issue(&certs, "frontal", "orsay");
    rt.block_on(ask(&id("orsay"), addr)).unwrap();
    assert!(rt.block_on(ask(&orsay, addr)).is_err());
}

/// A keep-alive HTTPS connection to the job API, presenting `who`'s certificate.
struct KeptAlive {
    sender: hyper::client::conn::http1::SendRequest<http_body_util::Empty<hyper::body::Bytes>>,
}

impl KeptAlive {
    async fn open(certs: &Path, who: &str, addr: std::net::SocketAddr) -> Result<Self, String> {
        let id = Identity::load(
            &certs.join(format!("{who}.pem")),
            &certs.join(format!("{who}.key")),
            &certs.join("ca.pem"),
        )
        .unwrap();
        let mut tls = id.client_config().unwrap();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from(Role::Broker.dns_name()).unwrap();
        let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls))
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Ok(KeptAlive { sender })
    }

    /// `GET /v1/jobs` on this same connection: its status, or why it failed.
    async fn jobs(&mut self) -> Result<u16, String> {
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let req = hyper::Request::get("/v1/jobs")
            .header(hyper::header::HOST, "broker")
            .body(http_body_util::Empty::new())
            .unwrap();
        let resp = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        http_body_util::BodyExt::collect(resp.into_body())
            .await
            .map_err(|e| e.to_string())?;
        Ok(status)
    }
}

#[test]
fn revoking_a_client_cuts_its_open_https_connection_and_no_other() {
    let tmp = tempfile::tempdir().unwrap();
    let certs = tmp.path().join("certs");
    let c = certs.to_str().unwrap();
    assert!(qcg(&["ca", "init", "--dir", c]).status.success());
    issue(&certs, "broker", "broker");
    issue(&certs, "client", "alice");
    issue(&certs, "client", "bob");
    issue(&certs, "admin", "ops");
    let cfg = write(
        tmp.path(),
        "broker.toml",
        "listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\nca = \"certs/ca.pem\"\n\
         cert = \"certs/broker.pem\"\nkey = \"certs/broker.key\"\ncrl = \"certs/crl.pem\"\n",
    );
    let mut services = Services(Vec::new());
    let lines = start(&mut services, "qcg-broker", &cfg);
    let addr: std::net::SocketAddr = wait_for(&lines, "qcg-broker: HTTPS API on https://")
        .parse()
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut alice = KeptAlive::open(&certs, "alice", addr).await.unwrap();
        let mut bob = KeptAlive::open(&certs, "bob", addr).await.unwrap();
        let mut ops = KeptAlive::open(&certs, "ops", addr).await.unwrap();
        for k in [&mut alice, &mut bob, &mut ops] {
            assert_eq!(k.jobs().await, Ok(200));
        }

        let revoked_at = std::time::Instant::now();
        for who in ["alice", "ops"] {
            let o = qcg(&["ca", "revoke", "--dir", c, who]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        // A new connection is refused at once (the handshake reads the list; under
        // TLS 1.3 the client learns it at its first request).
        let refused = match KeptAlive::open(&certs, "alice", addr).await {
            Err(_) => true,
            Ok(mut k) => k.jobs().await.is_err(),
        };
        assert!(
            refused,
            "a new connection of alice's was served after the revocation"
        );
        // The open ones of the revoked: their next request, on the same connection,
        // fails once the broker has seen the change (it looks twice a second; the
        // test gives it 20 s on this shared machine).
        for (name, k) in [("alice", &mut alice), ("ops", &mut ops)] {
            let mut failed = None;
            for _ in 0..100 {
                match k.jobs().await {
                    Ok(200) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
                    other => {
                        failed = Some(other);
                        break;
                    }
                }
            }
            let failed = failed.unwrap_or_else(|| {
                panic!("{name}'s open connection still answered 20 s after the revocation")
            });
            assert!(failed.is_err(), "{name}: {failed:?}");
            println!(
                "{name}'s open connection cut {:.2} s after `qcg ca revoke` began",
                revoked_at.elapsed().as_secs_f64()
            );
        }
        // Bob's connection, open all along, goes on.
        assert_eq!(bob.jobs().await, Ok(200));
        let mut again = KeptAlive::open(&certs, "bob", addr).await.unwrap();
        assert_eq!(again.jobs().await, Ok(200));
    });
}
