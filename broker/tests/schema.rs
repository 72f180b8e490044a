//! The schema version of the broker's database, checked by the real `qcg-broker` at
//! start: a database written by a newer broker is refused before it is touched, with
//! an error that names the file and both versions; one written before versions were
//! stored is migrated (its version written; the unit tests in `store.rs` show its
//! records read back).

#![allow(clippy::unwrap_used)]

use qcg_broker::store::SCHEMA_VERSION;
use qcg_proto::tls::{Ca, Role};
use redb::{Database, TableDefinition};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");

/// A folder with a CA, a broker certificate and a config using `state/broker.redb`.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::generate().unwrap();
    ca.save(&d.join("ca")).unwrap();
    ca.issue(Role::Broker, "broker")
        .unwrap()
        .save(&d.join("ca"), "broker")
        .unwrap();
    std::fs::write(
        d.join("broker.toml"),
        "listen = \"127.0.0.1:0\"\ndatabase = \"state/broker.redb\"\n\
         ca = \"ca/ca.pem\"\ncert = \"ca/broker.pem\"\nkey = \"ca/broker.key\"\n",
    )
    .unwrap();
    std::fs::create_dir(d.join("state")).unwrap();
    dir
}

fn version(path: &Path) -> Option<u64> {
    let db = Database::open(path).unwrap();
    let tx = db.begin_read().unwrap();
    let t = tx.open_table(META).ok()?;
    let v = t.get("schema").unwrap().map(|v| v.value());
    v
}

#[test]
fn a_database_of_a_newer_broker_is_refused_naming_the_file_and_both_versions() {
    let dir = setup();
    let db = dir.path().join("state/broker.redb");
    {
        let d = Database::create(&db).unwrap();
        let tx = d.begin_write().unwrap();
        tx.open_table(META)
            .unwrap()
            .insert("schema", SCHEMA_VERSION + 5)
            .unwrap();
        tx.commit().unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_qcg-broker"))
        .arg("--config")
        .arg(dir.path().join("broker.toml"))
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&db.display().to_string()), "{err}");
    assert!(
        err.contains(&format!(
            "schema version {} is newer than the {SCHEMA_VERSION} this qcg-broker knows",
            SCHEMA_VERSION + 5
        )),
        "{err}"
    );
    assert_eq!(version(&db), Some(SCHEMA_VERSION + 5), "left as it was");
}

#[test]
fn a_database_from_before_versions_is_migrated_to_the_current_one() {
    let dir = setup();
    let db = dir.path().join("state/broker.redb");
    {
        // What a broker of the previous release left: the jobs table, no version.
        let d = Database::create(&db).unwrap();
        let tx = d.begin_write().unwrap();
        tx.open_table(JOBS).unwrap();
        tx.commit().unwrap();
    }
    assert_eq!(version(&db), None);
    let mut broker = Command::new(env!("CARGO_BIN_EXE_qcg-broker"))
        .arg("--config")
        .arg(dir.path().join("broker.toml"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let first = BufReader::new(broker.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    assert!(first.starts_with("qcg-broker: QUIC on"), "{first}");
    broker.kill().unwrap();
    broker.wait().unwrap();
    assert_eq!(version(&db), Some(SCHEMA_VERSION));
}

/// Schema 2 (before the users of `qcg run` jobs were kept) is migrated: the real
/// broker starts on it, and leaves it at the current version with the table of
/// those users.
#[test]
fn a_database_of_schema_2_is_migrated_to_the_current_one() {
    let dir = setup();
    let db = dir.path().join("state/broker.redb");
    {
        let d = Database::create(&db).unwrap();
        let tx = d.begin_write().unwrap();
        tx.open_table(META).unwrap().insert("schema", 2).unwrap();
        tx.open_table(JOBS).unwrap();
        tx.commit().unwrap();
    }
    assert_eq!(version(&db), Some(2));
    let mut broker = Command::new(env!("CARGO_BIN_EXE_qcg-broker"))
        .arg("--config")
        .arg(dir.path().join("broker.toml"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let first = BufReader::new(broker.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    assert!(first.starts_with("qcg-broker: QUIC on"), "{first}");
    broker.kill().unwrap();
    broker.wait().unwrap();
    assert_eq!(version(&db), Some(SCHEMA_VERSION));
    let d = Database::open(&db).unwrap();
    let tx = d.begin_read().unwrap();
    let owners: TableDefinition<&str, &[u8]> = TableDefinition::new("run_owners");
    use redb::ReadableTableMetadata;
    assert_eq!(tx.open_table(owners).unwrap().len().unwrap(), 0);
}
