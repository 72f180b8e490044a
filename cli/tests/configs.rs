//! The example configurations in configs/ load and say what the README says.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

fn configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

#[test]
fn every_example_config_loads() {
    let dir = configs();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".toml") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("crl = \"certs/crl.pem\""),
            "{name} names no CRL"
        );
        if name.starts_with("broker") {
            let c = qcg_broker::config::Config::load(&path).unwrap();
            assert_eq!(c.listen.port(), 7700);
            assert!(c.ca.ends_with("certs/ca.pem"));
            assert!(c.crl.unwrap().ends_with("certs/crl.pem"));
        } else if name.starts_with("frontal") {
            let c = qcg_frontal::config::Config::load(&path).unwrap();
            assert_eq!(c.broker.port(), 7700, "{name}");
            assert!(name.contains(&c.cluster), "{name}");
        } else if name.starts_with("helper") {
            let c = qcg_helper::config::Config::load(&path).unwrap();
            assert!(name.contains(&c.node), "{name}");
        } else if name.starts_with("proxy") {
            let c = qcg_proxy::config::Config::load(&path).unwrap();
            assert_eq!(c.broker.port(), 7700, "{name}");
        } else {
            panic!("{name}: which service is this for?");
        }
    }
    assert_eq!(seen, 6);
    let rennes = qcg_frontal::config::Config::load(&dir.join("frontal-rennes.toml")).unwrap();
    assert_eq!(
        rennes.policy,
        qcg_proto::Policy::PortRange {
            lo: 41000,
            hi: 41999
        }
    );
}
