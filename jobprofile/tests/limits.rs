//! Bounded work for every profile: deep nesting, huge documents and absurd counts
//! are refused with a clear error and a position, before anything is built.

use qcg_jobprofile::profile::limits::*;
use qcg_jobprofile::profile::{JobProfile, ProfileError};

fn nested(levels: usize) -> String {
    let mut s = String::with_capacity(levels * 7 + 20);
    s.push_str("<grmsJob appId=\"x\">");
    for _ in 0..levels {
        s.push_str("<a>");
    }
    for _ in 0..levels {
        s.push_str("</a>");
    }
    s.push_str("</grmsJob>");
    s
}

fn groups(counts: &[&str]) -> String {
    let gs: String = counts
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "<group groupId=\"g{i}\"><processes><processesCount><value>{c}</value>\
                 </processesCount></processes></group>\n"
            )
        })
        .collect();
    format!(
        "<grmsJob appId=\"x\">\n<task taskId=\"t\"><resourcesDescription><topology>\n{gs}\
         </topology></resourcesDescription>\
         <execution type=\"x\"><executable>e</executable></execution></task></grmsJob>"
    )
}

fn limit(r: Result<JobProfile, ProfileError>) -> (usize, usize, String) {
    match r {
        Err(e @ ProfileError::Limit { .. }) => (e.line(), e.column(), e.to_string()),
        other => panic!("expected a limit error, got {other:?}"),
    }
}

#[test]
fn forty_thousand_levels_are_refused_at_the_limit_depth() {
    let doc = nested(40_000);
    assert!(doc.len() < MAX_DOCUMENT_BYTES);
    let (line, column, msg) = limit(JobProfile::parse(&doc));
    assert!(msg.contains("nested more than 64 deep"), "{msg}");
    // The 64th <a> (the 65th element) is where it went over.
    assert_eq!((line, column), (1, 20 + 63 * 3));
}

#[test]
fn a_million_levels_are_refused_by_size_before_parsing() {
    let (line, column, msg) = limit(JobProfile::parse(&nested(1_000_000)));
    assert_eq!((line, column), (1, 1));
    assert!(msg.contains("bytes"), "{msg}");
}

#[test]
fn nesting_up_to_the_limit_is_only_a_schema_error() {
    // 64 levels deep in all: the reader builds it, the schema walk refuses <a>.
    let e = JobProfile::parse(&nested(63)).unwrap_err();
    assert!(matches!(e, ProfileError::UnknownElement { .. }), "{e}");
}

#[test]
fn two_groups_of_four_billion_processes_are_refused() {
    let max = u32::MAX.to_string();
    let (line, column, msg) = limit(JobProfile::parse(&groups(&[&max, &max])));
    assert_eq!(line, 3, "{msg}");
    assert!(column > 1, "{msg}");
    assert!(msg.contains("4294967295 processes"), "{msg}");
}

#[test]
fn groups_adding_up_past_the_maximum_are_refused_at_the_group_that_does() {
    let half = (MAX_PROCESSES / 2 + 1).to_string();
    let (line, _, msg) = limit(JobProfile::parse(&groups(&[&half, &half])));
    assert_eq!(line, 4, "{msg}");
    assert!(msg.contains("g1"), "{msg}");
    let ok = (MAX_PROCESSES / 2).to_string();
    let p = JobProfile::parse(&groups(&[&ok, &ok])).unwrap();
    assert_eq!(p.total_processes(), MAX_PROCESSES);
}

#[test]
fn too_many_groups_and_arguments_are_refused() {
    let many = vec!["1"; MAX_GROUPS + 1];
    let (line, _, msg) = limit(JobProfile::parse(&groups(&many)));
    assert_eq!(line, MAX_GROUPS + 3, "{msg}");
    let args: String = (0..=MAX_PARAMETERS).map(|_| "<value>a</value>").collect();
    let doc = groups(&["1"]).replace(
        "<executable>e</executable>",
        &format!("<executable>e</executable><arguments>{args}</arguments>"),
    );
    let (_, _, msg) = limit(JobProfile::parse(&doc));
    assert!(msg.contains("arguments"), "{msg}");
}

#[test]
fn too_many_elements_are_refused() {
    let args: String = (0..MAX_ELEMENTS).map(|_| "<b/>").collect();
    let doc = format!("<grmsJob appId=\"x\">{args}</grmsJob>");
    let (_, _, msg) = limit(JobProfile::parse(&doc));
    assert!(msg.contains("elements"), "{msg}");
}
