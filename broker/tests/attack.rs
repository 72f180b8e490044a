//! Attacks on the broker's control plane over real QUIC with a real frontal
//! certificate: what one peer sends cannot make the broker keep megabytes, and the
//! broker keeps serving.

#![allow(clippy::unwrap_used)]

use qcg_proto::quic;
use qcg_proto::tls::{Ca, Role};
use qcg_proto::{AccessPoint, ClusterConfig, ErrorKind, Policy, ProcName, Request, Response};

fn ap(job: &str, rank: u32) -> AccessPoint {
    AccessPoint {
        process: ProcName::new(job, rank),
        cluster: "orsay".into(),
        node: "n0".into(),
        private_addr: [127, 0, 0, 1].into(),
        public_addr: None,
        port: 4000,
    }
}

/// Issue 11: 100 registrations with 1 MB job names raised the broker by 200 MB.
#[tokio::test]
async fn registrations_with_huge_names_or_past_the_limits_are_refused() {
    let ca = Ca::generate().unwrap();
    let lo = "127.0.0.1:0".parse().unwrap();
    let broker = qcg_broker::Broker::start_with(
        ca.identity(Role::Broker, "b").unwrap(),
        qcg_broker::Options {
            quic: lo,
            http: None,
            limits: qcg_broker::Limits {
                registrations_per_job: 8,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let ep = quic::client_endpoint(&ca.identity(Role::Frontal, "orsay").unwrap()).unwrap();
    let conn = quic::connect(&ep, broker.quic_addr, Role::Broker)
        .await
        .unwrap();
    let cluster = ClusterConfig {
        name: "orsay".into(),
        policy: Policy::Open,
        nat: qcg_proto::Nat::None,
        public_address: None,
    };
    let r = quic::request(&conn, &Request::RegisterCluster(cluster))
        .await
        .unwrap();
    assert_eq!(r, Response::Ok);

    let big = "j".repeat(1_000_000);
    for rank in 0..100 {
        let r = quic::request(&conn, &Request::Register(ap(&big, rank)))
            .await
            .unwrap();
        match r {
            Response::Error(e) => {
                assert_eq!(e.kind, ErrorKind::TooLarge, "{}", e.message);
                assert!(
                    e.message
                        .contains("job id of the process is 1000000 bytes long"),
                    "{}",
                    e.message
                );
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
    assert!(broker.state.lock().unwrap().processes().is_empty());

    // Past the per-job limit: refused, named; the broker keeps serving.
    for rank in 0..8 {
        let r = quic::request(&conn, &Request::Register(ap("job-1", rank)))
            .await
            .unwrap();
        assert_eq!(r, Response::Ok);
    }
    match quic::request(&conn, &Request::Register(ap("job-1", 8)))
        .await
        .unwrap()
    {
        Response::Error(e) => assert!(e.message.contains("per job"), "{}", e.message),
        other => panic!("{other:?}"),
    }
    let r = quic::request(&conn, &Request::Register(ap("job-2", 0)))
        .await
        .unwrap();
    assert_eq!(r, Response::Ok);
    assert_eq!(broker.state.lock().unwrap().processes().len(), 9);
    broker.shutdown().await;
}
