//! Fuzzing every service's config loader with mutations of the example configs and
//! the regression corpus in `fuzz/corpus/config/` (replayed on every run): loading
//! never panics, and every refusal names the file.
//!
//! More cases: `PROPTEST_CASES=20000 cargo test -p qcg-cli --test fuzz_configs`.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

fn seeds() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut v: Vec<Vec<u8>> = files(&root.join("configs"))
        .into_iter()
        .chain(files(&root.join("fuzz/corpus/config")))
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    v.push(Vec::new());
    v
}

/// Loads `bytes` as each service's config; an error if any loader panics or gives
/// an error that does not name the file.
fn check(dir: &Path, bytes: &[u8]) -> Result<(), String> {
    let p = dir.join("fuzzed.toml");
    std::fs::write(&p, bytes).unwrap();
    let name = |e: String| {
        if e.contains("fuzzed.toml") {
            Ok(())
        } else {
            Err(format!("error without the file name: {e}"))
        }
    };
    let results = [
        qcg_broker::config::Config::load(&p)
            .map(drop)
            .map_err(|e| e.to_string()),
        qcg_frontal::config::Config::load(&p)
            .map(drop)
            .map_err(|e| e.to_string()),
        qcg_helper::config::Config::load(&p)
            .map(drop)
            .map_err(|e| e.to_string()),
        qcg_proxy::config::Config::load(&p)
            .map(drop)
            .map_err(|e| e.to_string()),
    ];
    for r in results {
        if let Err(e) = r {
            name(e)?;
        }
    }
    Ok(())
}

#[test]
fn the_corpus_replays_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    for s in seeds() {
        check(tmp.path(), &s).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn mutated_configs_never_panic(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), prop_oneof![
                prop::sample::select(b"=\"[]{}.#\n-0123456789:ex'\\".to_vec()),
                any::<u8>()
            ], 0u8..3),
            1..6,
        ),
    ) {
        let seeds = seeds();
        let mut v = seeds[seed.index(seeds.len())].clone();
        for (i, b, how) in edits {
            let at = if v.is_empty() { 0 } else { i.index(v.len()) };
            match how {
                0 if !v.is_empty() => v[at] = b,
                1 => v.insert(at, b),
                _ if !v.is_empty() => { v.remove(at); }
                _ => v.push(b),
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        let r = check(tmp.path(), &v);
        prop_assert!(r.is_ok(), "{}\n--- input ---\n{}", r.unwrap_err(), String::from_utf8_lossy(&v));
    }
}
