//! `qcg submit --check` on hostile profiles: refused with exit status 2 and a clear
//! error naming the file, line and column; no stack overflow.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;

fn nested(levels: usize) -> String {
    format!(
        "<grmsJob appId=\"x\">{}{}</grmsJob>",
        "<a>".repeat(levels),
        "</a>".repeat(levels)
    )
}

fn check(name: &str, doc: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let p = write(tmp.path(), name, doc);
    let t = std::time::Instant::now();
    let o = qcg(&["submit", "--check", p.to_str().unwrap()]);
    eprintln!("{name}: {} bytes refused in {:?}", doc.len(), t.elapsed());
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.contains(name), "{err}");
    err
}

#[test]
fn forty_thousand_levels_are_refused() {
    let err = check("deep.xml", &nested(40_000));
    assert!(err.contains("line 1, column 209: too large"), "{err}");
    assert!(err.contains("nested more than 64 deep"), "{err}");
}

#[test]
fn a_million_levels_are_refused() {
    let err = check("deeper.xml", &nested(1_000_000));
    assert!(err.contains("too large"), "{err}");
    assert!(err.contains("bytes"), "{err}");
}

#[test]
fn two_groups_of_four_billion_processes_are_refused() {
    let g = |id: &str| {
        format!(
            "<group groupId=\"{id}\"><processes><processesCount><value>4294967295</value>\
             </processesCount></processes></group>\n"
        )
    };
    let doc = format!(
        "<grmsJob appId=\"x\">\n<task taskId=\"t\"><resourcesDescription><topology>\n{}{}\
         </topology></resourcesDescription><execution type=\"x\"><executable>e</executable>\
         </execution></task></grmsJob>",
        g("a"),
        g("b")
    );
    let err = check("huge.xml", &doc);
    assert!(err.contains("line 3, column"), "{err}");
    assert!(err.contains("4294967295 processes in one group"), "{err}");
}
