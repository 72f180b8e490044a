//! The broker over real QUIC: bad frames get clear answers on their own stream and
//! the connection goes on serving.

#![allow(clippy::unwrap_used)]

use qcg_proto::frame;
use qcg_proto::quic;
use qcg_proto::tls::{Ca, Role};
use qcg_proto::{ClusterConfig, Policy, Request, Response};

async fn raw(conn: &quinn::Connection, bytes: &[u8]) -> Response {
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(bytes).await.unwrap();
    send.finish().unwrap();
    frame::read_frame(&mut recv).await.unwrap().unwrap()
}

fn error_kind(r: &Response) -> qcg_proto::ErrorKind {
    match r {
        Response::Error(e) => e.kind,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_frames_are_answered_and_the_connection_keeps_serving() {
    let ca = Ca::generate().unwrap();
    let lo = "127.0.0.1:0".parse().unwrap();
    let broker = qcg_broker::Broker::start(ca.identity(Role::Broker, "b").unwrap(), lo, None)
        .await
        .unwrap();
    let ep = quic::client_endpoint(&ca.identity(Role::Frontal, "f").unwrap()).unwrap();
    let conn = quic::connect(&ep, broker.quic_addr, Role::Broker)
        .await
        .unwrap();

    let frame_of = |body: &[u8]| {
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    };
    let r = raw(&conn, &frame_of(b"]]")).await;
    assert_eq!(error_kind(&r), qcg_proto::ErrorKind::Malformed);
    let r = raw(&conn, &u32::MAX.to_be_bytes()).await;
    assert_eq!(error_kind(&r), qcg_proto::ErrorKind::TooLarge);
    let r = raw(&conn, &frame_of(br#"{"v":2,"body":"ClusterInfo"}"#)).await;
    assert_eq!(error_kind(&r), qcg_proto::ErrorKind::Version);
    if let Response::Error(e) = &r {
        assert!(e.message.contains("version 2"), "{}", e.message);
    }

    // The same connection still works.
    let cluster = ClusterConfig {
        name: "orsay".into(),
        policy: Policy::Open,
        nat: qcg_proto::Nat::None,
        public_address: None,
    };
    let r = quic::request(&conn, &Request::RegisterCluster(cluster.clone()))
        .await
        .unwrap();
    assert_eq!(r, Response::Ok);
    let r = quic::request(&conn, &Request::ClusterInfo).await.unwrap();
    assert_eq!(r, Response::Cluster(cluster));
    // A frontal cannot speak for another cluster on the same connection.
    let other = ClusterConfig {
        name: "rennes".into(),
        policy: Policy::Open,
        nat: qcg_proto::Nat::None,
        public_address: None,
    };
    let r = quic::request(&conn, &Request::RegisterCluster(other.clone()))
        .await
        .unwrap();
    assert_eq!(error_kind(&r), qcg_proto::ErrorKind::Forbidden);
    broker.shutdown().await;
}
