//! A small HTTPS client for the broker's job API: mutual TLS under the grid CA with
//! a `client` certificate, HTTP/1.1, one connection per request.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use qcg_proto::tls::{Identity, Role};
use std::sync::Arc;

/// Why a request failed before an HTTP answer came.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL is not `https://HOST:PORT`.
    #[error("bad broker URL `{0}`: expected https://HOST:PORT")]
    Url(String),
    /// TLS setup failed.
    #[error(transparent)]
    Tls(#[from] qcg_proto::tls::TlsError),
    /// Connecting, the handshake or the exchange failed.
    #[error("broker at {addr}: {detail}")]
    Io {
        /// The broker.
        addr: String,
        /// What happened.
        detail: String,
    },
}

/// A client of one broker.
#[derive(Clone)]
pub struct Client {
    host: String,
    connector: tokio_rustls::TlsConnector,
}

/// An answer: status and body.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (`null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The `error` field of a JSON error body, or the body as text.
    pub fn error_message(&self) -> String {
        match self.json().get("error").and_then(|e| e.as_str()) {
            Some(e) => e.to_string(),
            None => String::from_utf8_lossy(&self.body).into_owned(),
        }
    }
}

/// Percent-encodes a query parameter value.
pub fn encode_query(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Client {
    /// A client of the broker at `url` (`https://HOST:PORT`), presenting `id`.
    pub fn new(url: &str, id: &Identity) -> Result<Client, ClientError> {
        let host = url
            .strip_prefix("https://")
            .map(|h| h.trim_end_matches('/'))
            .filter(|h| !h.is_empty() && !h.contains('/') && h.contains(':'))
            .ok_or_else(|| ClientError::Url(url.to_string()))?;
        let mut tls = id.client_config()?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Client {
            host: host.to_string(),
            connector: tokio_rustls::TlsConnector::from(Arc::new(tls)),
        })
    }

    fn io(&self, detail: impl std::fmt::Display) -> ClientError {
        ClientError::Io {
            addr: self.host.clone(),
            detail: detail.to_string(),
        }
    }

    /// Sends one request and reads the whole answer.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Vec<u8>,
    ) -> Result<Answer, ClientError> {
        let tcp = tokio::net::TcpStream::connect(&self.host)
            .await
            .map_err(|e| self.io(format!("cannot connect: {e}")))?;
        // The broker proves its role through its certificate's name.
        let name = rustls_pki_types::ServerName::try_from(Role::Broker.dns_name())
            .map_err(|e| self.io(e))?;
        let tls = self
            .connector
            .connect(name, tcp)
            .await
            .map_err(|e| self.io(format!("TLS handshake failed: {e}")))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| self.io(e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, &self.host)
            .header(hyper::header::CONTENT_TYPE, "application/xml")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| self.io(e))?;
        let resp = sender.send_request(req).await.map_err(|e| self.io(e))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| self.io(e))?
            .to_bytes()
            .to_vec();
        Ok(Answer { status, body })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_encoded_and_urls_checked() {
        assert_eq!(encode_query("/a b/ü&"), "/a%20b/%C3%BC%26");
        let ca = qcg_proto::tls::Ca::generate().unwrap();
        let id = ca.identity(Role::Client, "me").unwrap();
        assert!(Client::new("https://127.0.0.1:7781", &id).is_ok());
        for bad in ["http://x:1", "https://", "https://host", "127.0.0.1:7781"] {
            assert!(Client::new(bad, &id).is_err(), "{bad}");
        }
    }
}
