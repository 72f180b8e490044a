//! Fuzzing the frame decoder with arbitrary bytes, well-formed frames and their
//! mutations, and the regression corpus in `fuzz/corpus/frame/` (replayed on every
//! run). Decoding must never panic, never claim more bytes than it was given, and
//! give back what was encoded.
//!
//! More cases: `PROPTEST_CASES=100000 cargo test -p qcg-proto --test fuzz_frames`.

use proptest::prelude::*;
use qcg_proto::frame::{decode, encode};
use qcg_proto::{ProcName, Request, Response};

fn check(bytes: &[u8]) -> Result<(), String> {
    for r in [
        decode::<Request>(bytes).map(|o| o.map(|(_, n)| n)),
        decode::<Response>(bytes).map(|o| o.map(|(_, n)| n)),
    ] {
        if let Ok(Some(n)) = r {
            if n > bytes.len() {
                return Err(format!("used {n} of {} bytes", bytes.len()));
            }
        }
    }
    Ok(())
}

fn requests() -> Vec<Request> {
    vec![
        Request::NodeInfo,
        Request::Unregister {
            process: ProcName::new("job-1", 3),
        },
        Request::Lookup {
            from: ProcName::new("j", 0),
            target: ProcName::new("j", 1),
        },
        Request::JobEnd { job: "j".into() },
        Request::Echo {
            payload: "x".repeat(100),
        },
    ]
}

#[test]
fn the_corpus_replays_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/frame");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap_or_else(|e| panic!("{e}")).path();
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        check(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        n += 1;
    }
    assert!(n >= 3, "corpus has {n} files");
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        prop_assert!(check(&bytes).is_ok());
    }

    #[test]
    fn frames_round_trip_and_mutations_never_panic(
        which in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let reqs = requests();
        let req = &reqs[which.index(reqs.len())];
        let bytes = encode(req).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = decode::<Request>(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, Some((req.clone(), bytes.len())));
        // Every prefix is "more bytes needed", never an error or a panic.
        let prefix = &bytes[..cut.index(bytes.len())];
        prop_assert!(matches!(decode::<Request>(prefix), Ok(None)));
        let mut m = bytes.clone();
        for (i, b) in flips {
            let i = i.index(m.len());
            m[i] = b;
        }
        prop_assert!(check(&m).is_ok());
    }
}
