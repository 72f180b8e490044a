//! Fuzzing the JobProfile reader: arbitrary bytes and mutations of the examples and
//! of the regression corpus (`fuzz/corpus/jobprofile/`, replayed on every run). The
//! reader must never panic, must name a position in every error, and whatever it
//! accepts must survive writing and reading back.
//!
//! More cases: `PROPTEST_CASES=100000 cargo test -p qcg-jobprofile --test fuzz`.

use proptest::prelude::*;
use qcg_jobprofile::profile::JobProfile;
use std::path::PathBuf;

fn seeds() -> Vec<(PathBuf, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in [
        root.join("examples-xml"),
        root.join("../fuzz/corpus/jobprofile"),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for p in files {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            out.push((p, bytes));
        }
    }
    out
}

fn check(bytes: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(bytes);
    match JobProfile::parse(&text) {
        Ok(p) => {
            let back = JobProfile::parse(&p.to_xml())
                .map_err(|e| format!("accepted, but its own output is refused: {e}"))?;
            if back != p {
                return Err(format!("round trip changed the model:\n{p:?}\n{back:?}"));
            }
            Ok(())
        }
        Err(e) if e.line() >= 1 && e.column() >= 1 => Ok(()),
        Err(e) => Err(format!("error without a position: {e}")),
    }
}

/// One edit of a seed: overwrite, insert, delete or duplicate a span.
#[derive(Debug, Clone)]
enum Edit {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Repeat(usize, usize, u8),
}

fn apply(mut v: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let n = v.len().max(1);
        match e {
            Edit::Set(i, b) => {
                if !v.is_empty() {
                    let i = i % v.len();
                    v[i] = *b;
                }
            }
            Edit::Insert(i, bytes) => {
                let i = i % n.min(v.len() + 1);
                v.splice(i..i, bytes.iter().copied());
            }
            Edit::Delete(i, len) => {
                if !v.is_empty() {
                    let i = i % v.len();
                    let end = (i + len % 64).min(v.len());
                    v.drain(i..end);
                }
            }
            Edit::Repeat(i, len, times) => {
                if !v.is_empty() {
                    let i = i % v.len();
                    let end = (i + 1 + len % 64).min(v.len());
                    let span = v[i..end].to_vec();
                    for _ in 0..(*times % 8) {
                        v.splice(end..end, span.iter().copied());
                    }
                }
            }
        }
    }
    v
}

fn edit() -> impl Strategy<Value = Edit> {
    // Bytes that matter to XML, and any byte.
    let byte = prop_oneof![
        prop::sample::select(b"<>/=\"'&;![]-?x0 \n9.e".to_vec()),
        any::<u8>()
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Set(i, b)),
        (any::<usize>(), prop::collection::vec(byte, 1..8)).prop_map(|(i, b)| Edit::Insert(i, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, l)| Edit::Delete(i, l)),
        (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(|(i, l, t)| Edit::Repeat(i, l, t)),
    ]
}

#[test]
fn the_corpus_replays_cleanly() {
    let seeds = seeds();
    assert!(seeds.len() >= 4);
    for (path, bytes) in seeds {
        if let Err(e) = check(&bytes) {
            panic!("{}: {e}", path.display());
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        prop_assert!(check(&bytes).is_ok(), "{:?}", check(&bytes));
    }

    #[test]
    fn mutated_profiles_never_panic_and_round_trip(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let seeds = seeds();
        let (_, base) = &seeds[seed.index(seeds.len())];
        let input = apply(base.clone(), &edits);
        let r = check(&input);
        prop_assert!(r.is_ok(), "{}\n--- input ---\n{}", r.unwrap_err(), String::from_utf8_lossy(&input));
    }
}
