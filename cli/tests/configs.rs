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

/// `--check-config` on the shipped configs, with the README's certificates: every
/// service's is fine; a helper given a frontal's certificate, a missing certificate
/// and a port in use are each named with the field and how to fix it (exit 2).
#[test]
fn check_config_names_the_field_and_the_fix() {
    let bin = |name: &str| {
        let exe = std::env::current_exe().unwrap();
        exe.parent().unwrap().parent().unwrap().join(name)
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("configs");
    std::fs::create_dir_all(&d).unwrap();
    for entry in std::fs::read_dir(configs()).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            // Ports moved to free ones: the machine may run the README's grid.
            let text = std::fs::read_to_string(&p)
                .unwrap()
                .replace(":7700\"", ":0\"")
                .replace(":7780\"", ":0\"")
                .replace(":7781\"", ":0\"")
                .replace(":7701\"", ":0\"")
                .replace(":7702\"", ":0\"")
                .replace(":7800\"", ":0\"");
            std::fs::write(d.join(p.file_name().unwrap()), text).unwrap();
        }
    }
    let certs = d.join("certs");
    let qcg = |args: &[&str]| {
        let o = std::process::Command::new(bin("qcg"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    };
    qcg(&["ca", "init", "--dir", certs.to_str().unwrap()]);
    for (role, name) in [
        ("broker", "broker"),
        ("frontal", "orsay"),
        ("helper", "orsay-1"),
        ("proxy", "proxy-1"),
    ] {
        qcg(&[
            "ca",
            "issue",
            "--dir",
            certs.to_str().unwrap(),
            "--role",
            role,
            "--name",
            name,
        ]);
    }
    let check = |service: &str, config: &str| {
        let o = std::process::Command::new(bin(service))
            .args(["--config", config, "--check-config"])
            .current_dir(dir.path())
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code(), text)
    };
    for (service, config) in [
        ("qcg-broker", "configs/broker.toml"),
        ("qcg-frontal", "configs/frontal-orsay.toml"),
        ("qcg-helper", "configs/helper-orsay-1.toml"),
        ("qcg-proxy", "configs/proxy.toml"),
    ] {
        let (code, text) = check(service, config);
        assert_eq!(code, Some(0), "{service}: {text}");
        assert!(text.contains("is fine"), "{text}");
    }
    // rennes has no certificate yet: the field, the path and the command.
    let (code, text) = check("qcg-frontal", "configs/frontal-rennes.toml");
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("field `cert`: configs/certs/rennes.pem")
            && text.contains("qcg ca issue --dir configs/certs --role frontal --name rennes"),
        "{text}"
    );
    // A helper given a frontal's certificate.
    let h = d.join("helper-orsay-1.toml");
    let t = std::fs::read_to_string(&h)
        .unwrap()
        .replace("orsay-1.pem", "orsay.pem")
        .replace("orsay-1.key", "orsay.key");
    std::fs::write(&h, t).unwrap();
    let (code, text) = check("qcg-helper", "configs/helper-orsay-1.toml");
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("is not a helper certificate"), "{text}");
    // A port in use.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = d.join("proxy.toml");
    let t = std::fs::read_to_string(&p).unwrap().replace(
        "127.0.0.1:0\"",
        &format!("{}\"", busy.local_addr().unwrap()),
    );
    std::fs::write(&p, t).unwrap();
    let (code, text) = check("qcg-proxy", "configs/proxy.toml");
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("field `listen`: cannot listen on"), "{text}");
}

/// `[accounts.pool]`: a range that holds an account, root or nobody, or pooled
/// processes with no group to reach the socket, is refused at load, naming the field.
#[test]
fn a_job_pool_is_checked_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let base = "node = \"n1\"\nfrontal = \"127.0.0.1:7701\"\nsocket = \"n1.sock\"\nbind_address = \"127.0.0.1\"\nca = \"ca.pem\"\ncert = \"n1.pem\"\nkey = \"n1.key\"\n";
    let load = |extra: &str| {
        let p = dir.path().join("helper.toml");
        std::fs::write(&p, format!("{base}{extra}")).unwrap();
        qcg_helper::config::Config::load(&p).map_err(|e| e.to_string())
    };
    let ok =
        load("socket_group = \"65534\"\n[accounts.pool]\nfirst = 61500\ncount = 100\n").unwrap();
    let pool = ok.accounts.pool.unwrap();
    assert_eq!((pool.first, pool.count, pool.gid), (61500, 100, 65534));
    let e = load("[accounts.pool]\nfirst = 61500\ncount = 100\n").unwrap_err();
    assert!(
        e.contains("accounts.pool") && e.contains("socket_group"),
        "{e}"
    );
    let e = load("[accounts.pool]\nfirst = 61500\ncount = 100\ngroup = \"0\"\n").unwrap_err();
    assert!(e.contains("group 0"), "{e}");
    let e = load("[accounts.pool]\nfirst = 65000\ncount = 1000\ngroup = \"65534\"\n").unwrap_err();
    assert!(e.contains("uid 65534"), "{e}");
    let e = load("[accounts.pool]\nfirst = 0\ncount = 10\ngroup = \"65534\"\n").unwrap_err();
    assert!(e.contains("uid 0"), "{e}");
    let e = load("[accounts.pool]\nfirst = 61500\ncount = 10\ngroup = \"no-such-group\"\n")
        .unwrap_err();
    assert!(e.contains("no group `no-such-group`"), "{e}");
    let e = load("[accounts.pool]\nfirst = 61500\n").unwrap_err();
    assert!(e.contains("count"), "{e}");
}
