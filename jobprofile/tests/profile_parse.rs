//! Parsing the example profiles and rejecting bad ones with precise errors.

use qcg_jobprofile::profile::{JobProfile, ProfileError};

fn example(name: &str) -> String {
    let path = format!("{}/examples-xml/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("example file is readable")
}

#[test]
fn ray2mesh_example_parses_into_the_expected_model() {
    let p = JobProfile::parse(&example("ray2mesh.xml")).unwrap();
    assert_eq!(p.app_id, "ray2mesh-job");
    assert_eq!(p.network_templates.len(), 2);
    let high = p.network_template("net-high").unwrap();
    assert_eq!(high.bandwidth.unwrap().min, Some(100.0));
    assert_eq!(high.latency, None);
    assert_eq!(
        p.network_template("net-local")
            .unwrap()
            .latency
            .unwrap()
            .max,
        Some(5.0)
    );
    let worker = p.computing_template("worker-node").unwrap();
    assert_eq!(worker.memory.unwrap().min, Some(512.0));
    assert_eq!(p.task.id, "ray2mesh-task1");
    let ids: Vec<&str> = p.task.groups.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(ids, ["central_master", "group1", "group2"]);
    let master = &p.task.groups[0];
    assert_eq!(master.processes, 1);
    assert_eq!(master.network_template.as_deref(), Some("net-local"));
    assert_eq!(master.connections.len(), 2);
    assert_eq!(master.connections[1].endpoint, "group2");
    assert_eq!(master.connections[1].network_template, "net-high");
    assert_eq!(p.task.groups[1].processes, 6);
    assert_eq!(
        p.task.groups[1].computing_template.as_deref(),
        Some("worker-node")
    );
    let ex = p.task.execution.as_ref().unwrap();
    assert_eq!(ex.kind, "open_mpi");
    assert_eq!(ex.executable, "ray2mesh");
    assert_eq!(ex.arguments, ["--chunks", "400"]);
    assert_eq!(ex.environment[0].name, "RAY2MESH_MESH");
    assert_eq!(ex.environment[0].value, "earth.mesh");
    assert_eq!(ex.stdout.as_deref(), Some("ray2mesh.out"));
    assert_eq!(ex.stdin, None);
    assert_eq!(p.total_processes(), 13);
}

#[test]
fn every_example_round_trips() {
    for name in ["ray2mesh.xml", "single-group.xml", "four-groups.xml"] {
        let p = JobProfile::parse(&example(name)).unwrap();
        let xml = p.to_xml();
        let again = JobProfile::parse(&xml).unwrap_or_else(|e| panic!("{name}: {e}\n{xml}"));
        assert_eq!(p, again, "{name}");
        assert_eq!(xml, again.to_xml(), "{name}: writing is stable");
    }
    let single = JobProfile::parse(&example("single-group.xml")).unwrap();
    let ex = single.task.execution.unwrap();
    assert_eq!(ex.arguments[1], "wing & body.msh");
    assert_eq!(ex.working_directory.as_deref(), Some("/scratch/cfd"));
    let four = JobProfile::parse(&example("four-groups.xml")).unwrap();
    assert_eq!(four.task.groups.len(), 4);
    assert_eq!(four.total_processes(), 36);
}

/// A small valid document; tests replace pieces of it to break it.
const BASE: &str = r#"<grmsJob appId="j">
  <resourceTemplates>
    <networkResourceTemplate templateId="net">
      <networkParameter name="latency"><max>5</max></networkParameter>
    </networkResourceTemplate>
    <computingResourceTemplate templateId="cpu">
      <hostParameter name="memory"><min>512</min></hostParameter>
    </computingResourceTemplate>
  </resourceTemplates>
  <task taskId="t">
    <resourcesDescription>
      <topology>
        <group groupId="a">
          <processes>
            <processesCount><value>2</value></processesCount>
            <computingResource><templateIdReference>cpu</templateIdReference></computingResource>
          </processes>
          <processesConnection>
            <networkResource><templateIdReference>net</templateIdReference></networkResource>
            <groupConnection endpointGroupId="b">
              <networkResource><templateIdReference>net</templateIdReference></networkResource>
            </groupConnection>
          </processesConnection>
        </group>
        <group groupId="b">
          <processes>
            <processesCount><value>3</value></processesCount>
          </processes>
        </group>
      </topology>
    </resourcesDescription>
  </task>
</grmsJob>
"#;

fn broken(from: &str, to: &str) -> ProfileError {
    assert!(BASE.contains(from), "{from}");
    let doc = BASE.replacen(from, to, 1);
    JobProfile::parse(&doc).expect_err("document should be rejected")
}

#[test]
fn base_document_is_valid() {
    let p = JobProfile::parse(BASE).unwrap();
    assert_eq!(p.task.groups[1].processes, 3);
    assert!(p.task.execution.is_none());
}

#[test]
fn malformed_xml_is_located() {
    let e = broken(
        "</processes>\n          <processesConnection>",
        "</process>\n          <processesConnection>",
    );
    assert!(matches!(e, ProfileError::Malformed { .. }), "{e}");
    assert_eq!(e.line(), 17);
    let e = JobProfile::parse("<grmsJob appId=\"x\">\n  <task taskId='t'>").unwrap_err();
    assert!(matches!(e, ProfileError::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("expected </task>"), "{e}");
    let e = JobProfile::parse("<grmsJob appId=\"a&b\"/>").unwrap_err();
    assert!(matches!(e, ProfileError::Malformed { .. }), "{e}");
}

#[test]
fn unknown_element_names_parent_and_alternatives() {
    let e = broken(
        "<processes>\n            <processesCount><value>3",
        "<foo/><processes>\n            <processesCount><value>3",
    );
    assert_eq!(
        e.to_string(),
        "line 26, column 11: unknown element <foo> in <group>; expected one of <processes>, <processesConnection>"
    );
    let e = JobProfile::parse("<job/>").unwrap_err();
    assert!(e.to_string().contains("expected <grmsJob>"), "{e}");
    let e = broken("<max>5</max>", "<max>5<unit/></max>");
    assert!(
        e.to_string()
            .contains("in <max>; expected no child elements"),
        "{e}"
    );
}

#[test]
fn unknown_attribute_is_reported() {
    let e = broken("<group groupId=\"b\">", "<group groupId=\"b\" size=\"3\">");
    assert_eq!(
        e.to_string(),
        "line 25, column 28: unknown attribute `size` on <group>; expected `groupId`"
    );
    let e = broken("<topology>", "<topology kind=\"x\">");
    assert!(e.to_string().contains("expected no attributes"), "{e}");
}

#[test]
fn unknown_parameter_name_is_reported() {
    let e = broken("name=\"latency\"", "name=\"jitter\"");
    assert_eq!(e.line(), 4);
    assert!(
        e.to_string()
            .contains("unknown network parameter \"jitter\" in <networkParameter>; expected one of bandwidth, latency"),
        "{e}"
    );
    let e = broken("name=\"memory\"", "name=\"disk\"");
    assert!(
        e.to_string().contains("one of cpucount, cpuspeed, memory"),
        "{e}"
    );
}

#[test]
fn missing_processes_count_is_reported() {
    let e = broken("<processesCount><value>3</value></processesCount>", "");
    assert_eq!(
        e.to_string(),
        "line 26, column 11: <processes> is missing <processesCount>"
    );
    let e = broken("<value>3</value>", "");
    assert!(
        e.to_string()
            .contains("<processesCount> is missing <value>"),
        "{e}"
    );
    let e = broken("<group groupId=\"b\">", "<group>");
    assert!(
        e.to_string()
            .contains("<group> is missing attribute `groupId`"),
        "{e}"
    );
    let e = broken("<value>3</value>", "<value>0</value>");
    assert!(
        e.to_string().contains("whole number of processes >= 1"),
        "{e}"
    );
    let e = broken("<value>3</value>", "<value>2.5</value>");
    assert!(matches!(e, ProfileError::BadNumber { .. }), "{e}");
}

#[test]
fn undefined_and_mistyped_references_are_reported() {
    let e = broken("endpointGroupId=\"b\"", "endpointGroupId=\"c\"");
    assert_eq!(
        e.to_string(),
        "line 20, column 30: group \"c\" is not defined; expected one of \"a\", \"b\""
    );
    let e = broken(
        "<computingResource><templateIdReference>cpu",
        "<computingResource><templateIdReference>gpu",
    );
    assert_eq!(
        e.to_string(),
        "line 16, column 53: computing template \"gpu\" is not defined; expected \"cpu\""
    );
    let e = broken(
        "<computingResource><templateIdReference>cpu",
        "<computingResource><templateIdReference>net",
    );
    assert_eq!(
        e.to_string(),
        "line 16, column 53: template \"net\" is a network template but <computingResource> needs a computing template"
    );
    let e = broken(
        "<networkResource><templateIdReference>net</templateIdReference></networkResource>\n            <groupConnection",
        "<networkResource><templateIdReference>cpu</templateIdReference></networkResource>\n            <groupConnection",
    );
    assert!(matches!(e, ProfileError::WrongTemplateKind { .. }), "{e}");
    let e = broken("endpointGroupId=\"b\"", "endpointGroupId=\"a\"");
    assert!(e.to_string().contains("connects to itself"), "{e}");
}

#[test]
fn bad_figures_are_reported() {
    let e = broken("<max>5</max>", "<max>10ms</max>");
    assert_eq!(
        e.to_string(),
        "line 4, column 45: invalid figure \"10ms\" in <max> of <latency>: the unit is implied: ms; write the bare number 10"
    );
    let e = broken("<min>512</min>", "<min>1 GiB</min>");
    assert!(e.to_string().contains("the unit is implied: MiB"), "{e}");
    let e = broken("<max>5</max>", "<max>-3</max>");
    assert!(e.to_string().contains("expected a number >= 0"), "{e}");
    let e = broken("<max>5</max>", "<max>fast</max>");
    assert!(e.to_string().contains("expected a bare number"), "{e}");
    let e = broken("<max>5</max>", "<max>NaN</max>");
    assert!(e.to_string().contains("finite"), "{e}");
    let e = broken("<max>5</max>", "<min>9</min><max>5</max>");
    assert!(e.to_string().contains("greater than <max>"), "{e}");
    let e = broken("name=\"memory\"><min>512", "name=\"cpucount\"><min>1.5");
    assert!(e.to_string().contains("whole number"), "{e}");
    assert_eq!(e.line(), 7);
    let ok = JobProfile::parse(&BASE.replacen("<max>5</max>", "<max> 0.25 </max>", 1)).unwrap();
    assert_eq!(ok.network_templates[0].latency.unwrap().max, Some(0.25));
}

#[test]
fn duplicates_are_reported() {
    let e = broken("templateId=\"cpu\"", "templateId=\"net\"");
    assert_eq!(
        e.to_string(),
        "line 6, column 32: duplicate template id \"net\" (first at line 3, column 30)"
    );
    let e = broken("groupId=\"b\"", "groupId=\"a\"");
    assert!(e.to_string().contains("duplicate group id \"a\""), "{e}");
    let e = broken(
        "<networkParameter name=\"latency\"><max>5</max></networkParameter>",
        "<networkParameter name=\"latency\"><max>5</max></networkParameter><networkParameter name=\"latency\"/>",
    );
    assert!(e.to_string().contains("duplicate network parameter"), "{e}");
    let e = broken("<task taskId=\"t\">", "<task taskId=\"t\"><execution type=\"x\"><executable>e</executable><environment><variable name=\"A\">1</variable><variable name=\"A\">2</variable></environment></execution>");
    assert!(
        e.to_string()
            .contains("duplicate environment variable \"A\""),
        "{e}"
    );
    let e = broken(
        "</resourcesDescription>",
        "</resourcesDescription><resourcesDescription/>",
    );
    assert!(matches!(e, ProfileError::Repeated { .. }), "{e}");
}

#[test]
fn stray_text_and_missing_parts_are_reported() {
    let e = broken("<topology>", "<topology>oops");
    assert!(
        e.to_string()
            .contains("unexpected text \"oops\" in <topology>"),
        "{e}"
    );
    let e = broken("<group groupId=\"b\">\n          <processes>\n            <processesCount><value>3</value></processesCount>\n          </processes>\n        </group>", "");
    assert!(
        e.to_string().contains("groupConnection")
            || matches!(e, ProfileError::UndefinedReference { .. }),
        "{e}"
    );
    let doc = "<grmsJob appId=\"j\"><task taskId=\"t\"><resourcesDescription><topology/></resourcesDescription></task></grmsJob>";
    let e = JobProfile::parse(doc).unwrap_err();
    assert!(e.to_string().contains("at least one <group>"), "{e}");
    let e = JobProfile::parse("<grmsJob appId=\"j\"/>").unwrap_err();
    assert!(e.to_string().contains("<grmsJob> is missing <task>"), "{e}");
}
