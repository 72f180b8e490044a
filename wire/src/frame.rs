//! Length-prefixed, versioned JSON frames.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of JSON:
//! `{"v": PROTOCOL_VERSION, "body": …}`. The length is checked against
//! [`MAX_FRAME`] before anything is allocated, and the version before the body is
//! interpreted, so a peer speaking another version gets a clear answer instead of a
//! confusing parse error.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
#[cfg(feature = "async")]
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest frame body accepted, in bytes. Control messages are small; 1 MiB leaves room
/// for a registry listing while bounding what a peer can make us allocate.
pub const MAX_FRAME: usize = 1 << 20;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The announced length is larger than [`MAX_FRAME`].
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Announced length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The frame's version is not [`PROTOCOL_VERSION`].
    #[error(
        "protocol version {got} is not supported (this side speaks version {PROTOCOL_VERSION})"
    )]
    Version {
        /// Version the peer sent.
        got: u32,
    },
    /// The body is not a valid message.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The stream ended inside a frame.
    #[error("connection closed in the middle of a frame")]
    Truncated,
    /// The underlying transport failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl FrameError {
    /// The error kind to report back to the peer.
    pub fn kind(&self) -> crate::msg::ErrorKind {
        use crate::msg::ErrorKind;
        match self {
            FrameError::TooLarge { .. } => ErrorKind::TooLarge,
            FrameError::Version { .. } => ErrorKind::Version,
            _ => ErrorKind::Malformed,
        }
    }
}

#[derive(Serialize)]
struct EnvelopeOut<'a, T> {
    v: u32,
    body: &'a T,
}

#[derive(Deserialize)]
struct Head {
    v: u32,
}

#[derive(Deserialize)]
struct EnvelopeIn<T> {
    #[allow(dead_code)]
    v: u32,
    body: T,
}

/// Serialises `msg` into one complete frame (length prefix included).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut out = vec![0u8; 4];
    serde_json::to_writer(
        &mut out,
        &EnvelopeOut {
            v: PROTOCOL_VERSION,
            body: msg,
        },
    )
    .map_err(|e| FrameError::Malformed(e.to_string()))?;
    let len = out.len() - 4;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge {
            len,
            max: MAX_FRAME,
        });
    }
    out[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(out)
}

/// Checks a frame's announced length.
pub fn check_len(prefix: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge {
            len,
            max: MAX_FRAME,
        });
    }
    Ok(len)
}

/// Interprets a frame body (without its length prefix).
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    let head: Head =
        serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if head.v != PROTOCOL_VERSION {
        return Err(FrameError::Version { got: head.v });
    }
    let env: EnvelopeIn<T> =
        serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))?;
    Ok(env.body)
}

/// Decodes one frame from the front of `buf`.
///
/// `Ok(None)` means more bytes are needed (kept apart from real errors, as mini-redis
/// does); `Ok(Some((msg, used)))` gives the message and how many bytes it took.
pub fn decode<T: DeserializeOwned>(buf: &[u8]) -> Result<Option<(T, usize)>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = check_len([buf[0], buf[1], buf[2], buf[3]])?;
    if buf.len() < 4 + len {
        return Ok(None);
    }
    let msg = decode_body(&buf[4..4 + len])?;
    Ok(Some((msg, 4 + len)))
}

#[cfg(feature = "async")]
/// Reads one frame from an async stream. `Ok(None)` on a clean end of stream before
/// the first byte of a frame.
pub async fn read_frame<T: DeserializeOwned, R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<T>, FrameError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut prefix[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        got += n;
    }
    let len = check_len(prefix)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Truncated
        } else {
            FrameError::Io(e)
        }
    })?;
    decode_body(&body).map(Some)
}

#[cfg(feature = "async")]
/// Writes one frame to an async stream.
pub async fn write_frame<T: Serialize, W: AsyncWrite + Unpin>(
    w: &mut W,
    msg: &T,
) -> Result<(), FrameError> {
    let bytes = encode(msg)?;
    w.write_all(&bytes).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one frame from a blocking stream (used by libqcg, which has no runtime).
pub fn read_frame_sync<T: DeserializeOwned, R: std::io::Read>(
    r: &mut R,
) -> Result<Option<T>, FrameError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut prefix[got..])?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        got += n;
    }
    let len = check_len(prefix)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Truncated
        } else {
            FrameError::Io(e)
        }
    })?;
    decode_body(&body).map(Some)
}

/// Writes one frame to a blocking stream.
pub fn write_frame_sync<T: Serialize, W: std::io::Write>(
    w: &mut W,
    msg: &T,
) -> Result<(), FrameError> {
    let bytes = encode(msg)?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::*;
    use proptest::prelude::*;

    fn frame_of(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn incomplete_is_not_an_error() {
        let bytes = encode(&Request::ClusterInfo).unwrap();
        for cut in 0..bytes.len() {
            assert!(decode::<Request>(&bytes[..cut]).unwrap().is_none());
        }
    }

    #[test]
    fn oversized_frame_is_refused_before_allocating() {
        let prefix = ((MAX_FRAME + 1) as u32).to_be_bytes();
        match decode::<Request>(&prefix) {
            Err(FrameError::TooLarge { len, max }) => {
                assert_eq!(len, MAX_FRAME + 1);
                assert_eq!(max, MAX_FRAME);
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn unknown_version_is_named() {
        let f = frame_of(br#"{"v":7,"body":"ClusterInfo"}"#);
        let err = decode::<Request>(&f).unwrap_err();
        assert!(matches!(err, FrameError::Version { got: 7 }));
        assert!(err.to_string().contains("version 7"), "{err}");
    }

    #[test]
    fn malformed_frames_are_errors() {
        for body in [
            &b"not json"[..],
            br#"{"v":1}"#,
            br#"{"v":1,"body":{"Nope":1}}"#,
            b"",
        ] {
            let err = decode::<Request>(&frame_of(body)).unwrap_err();
            assert!(matches!(err, FrameError::Malformed(_)), "{body:?}: {err:?}");
        }
    }

    /// A peer older than a technique (a helper, frontal or broker of before
    /// `shared-memory`) gets a report naming it as a malformed frame that says
    /// which value it does not know and which it does, never a silent default.
    #[test]
    fn a_technique_this_build_does_not_know_is_named() {
        let body = br#"{"v":1,"body":{"Report":{"from":{"job":"j","rank":0},"target":{"job":"j","rank":1},"technique":"carrier-pigeon","ok":true}}}"#;
        let err = decode::<Request>(&frame_of(body)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Malformed);
        let text = err.to_string();
        assert!(
            text.contains("unknown variant `carrier-pigeon`") && text.contains("`shared-memory`"),
            "{text}"
        );
        // Every technique this build knows goes on the wire under its name.
        for t in Technique::ALL {
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.name()));
            assert_eq!(serde_json::from_str::<Technique>(&json).unwrap(), t);
        }
    }

    #[test]
    fn sync_reader_reports_truncation() {
        let bytes = encode(&Request::ClusterInfo).unwrap();
        let mut cut = &bytes[..bytes.len() - 1];
        assert!(matches!(
            read_frame_sync::<Request, _>(&mut cut),
            Err(FrameError::Truncated)
        ));
        let mut empty: &[u8] = &[];
        assert!(read_frame_sync::<Request, _>(&mut empty).unwrap().is_none());
    }

    fn arb_name() -> impl Strategy<Value = ProcName> {
        ("[a-z0-9-]{1,12}", any::<u32>()).prop_map(|(j, r)| ProcName::new(&j, r))
    }

    fn arb_policy() -> impl Strategy<Value = Policy> {
        prop_oneof![
            Just(Policy::Open),
            Just(Policy::SynBlock),
            Just(Policy::Closed),
            (1u16..60000, 0u16..1000).prop_map(|(lo, w)| Policy::PortRange {
                lo,
                hi: lo.saturating_add(w)
            }),
        ]
    }

    fn arb_ip() -> impl Strategy<Value = std::net::IpAddr> {
        any::<[u8; 4]>().prop_map(std::net::IpAddr::from)
    }

    fn arb_request() -> impl Strategy<Value = Request> {
        let ap = (
            arb_name(),
            "[a-z]{1,8}",
            "[a-z0-9]{1,8}",
            arb_ip(),
            proptest::option::of(arb_ip()),
            any::<u16>(),
        )
            .prop_map(
                |(process, cluster, node, private_addr, public_addr, port)| AccessPoint {
                    process,
                    cluster,
                    node,
                    private_addr,
                    public_addr,
                    port,
                },
            );
        let cluster = (
            "[a-z]{1,8}",
            arb_policy(),
            any::<bool>(),
            proptest::option::of(arb_ip()),
        )
            .prop_map(|(name, policy, nat, public_address)| ClusterConfig {
                name,
                policy,
                nat: if nat { Nat::PortPreserving } else { Nat::None },
                public_address,
            });
        prop_oneof![
            Just(Request::ClusterInfo),
            cluster.prop_map(Request::RegisterCluster),
            ap.prop_map(Request::Register),
            arb_name().prop_map(|process| Request::Unregister { process }),
            (arb_name(), arb_name()).prop_map(|(from, target)| Request::Lookup { from, target }),
            ("[a-z0-9-]{1,12}").prop_map(|job| Request::JobEnd { job }),
            (
                arb_name(),
                arb_name(),
                any::<bool>(),
                proptest::sample::select(Technique::ALL.to_vec())
            )
                .prop_map(|(from, target, ok, technique)| {
                    Request::Report {
                        from,
                        target,
                        technique,
                        ok,
                        rtt_us: ok.then_some(1234),
                        upgrade: ok,
                    }
                }),
        ]
    }

    proptest! {
        #[test]
        fn request_round_trip(req in arb_request()) {
            let bytes = encode(&req).unwrap();
            let (back, used) = decode::<Request>(&bytes).unwrap().unwrap();
            prop_assert_eq!(used, bytes.len());
            prop_assert_eq!(back, req);
        }

        #[test]
        fn response_round_trip(target in arb_name(), port in any::<u16>(), ip in arb_ip(), msg in ".{0,40}") {
            for resp in [
                Response::Ok,
                Response::Plan(Plan { target: target.clone(), attempts: vec![Attempt { technique: Technique::PortRange, addr: std::net::SocketAddr::new(ip, port) }], encrypt: None }),
                Response::Error(ErrorReply { kind: ErrorKind::UnknownProcess, message: msg.clone() }),
            ] {
                let bytes = encode(&resp).unwrap();
                let (back, _) = decode::<Response>(&bytes).unwrap().unwrap();
                prop_assert_eq!(back, resp);
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode::<Request>(&bytes);
        }
    }
}
