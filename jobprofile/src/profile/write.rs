//! Writes a [`JobProfile`] as indented XML in the schema read by `read`.

use quick_xml::escape::escape;

use super::{Bounds, Execution, Group, JobProfile};

/// Accumulates indented lines.
struct Out {
    buf: String,
    depth: usize,
}

impl Out {
    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.buf.push_str("  ");
        }
        self.buf.push_str(text);
        self.buf.push('\n');
    }

    fn open(&mut self, tag: &str) {
        self.line(&format!("<{tag}>"));
        self.depth += 1;
    }

    fn close(&mut self, name: &str) {
        self.depth -= 1;
        self.line(&format!("</{name}>"));
    }

    /// `<name>text</name>` on one line, the text escaped and kept verbatim.
    fn leaf(&mut self, name: &str, text: &str) {
        self.line(&format!("<{name}>{}</{name}>", escape(text)));
    }
}

fn attr(name: &str, value: &str) -> String {
    format!("{name}=\"{}\"", escape(value))
}

pub(crate) fn to_xml(p: &JobProfile) -> String {
    let mut out = Out {
        buf: String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"),
        depth: 0,
    };
    out.open(&format!("grmsJob {}", attr("appId", &p.app_id)));
    if !p.network_templates.is_empty() || !p.computing_templates.is_empty() {
        out.open("resourceTemplates");
        for t in &p.network_templates {
            out.open(&format!(
                "networkResourceTemplate {}",
                attr("templateId", &t.id)
            ));
            bounds(&mut out, "networkParameter", "bandwidth", t.bandwidth);
            bounds(&mut out, "networkParameter", "latency", t.latency);
            out.close("networkResourceTemplate");
        }
        for t in &p.computing_templates {
            out.open(&format!(
                "computingResourceTemplate {}",
                attr("templateId", &t.id)
            ));
            bounds(&mut out, "hostParameter", "cpucount", t.cpucount);
            bounds(&mut out, "hostParameter", "cpuspeed", t.cpuspeed);
            bounds(&mut out, "hostParameter", "memory", t.memory);
            out.close("computingResourceTemplate");
        }
        out.close("resourceTemplates");
    }
    out.open(&format!("task {}", attr("taskId", &p.task.id)));
    out.open("resourcesDescription");
    out.open("topology");
    for g in &p.task.groups {
        group(&mut out, g);
    }
    out.close("topology");
    out.close("resourcesDescription");
    if let Some(ex) = &p.task.execution {
        execution(&mut out, ex);
    }
    out.close("task");
    out.close("grmsJob");
    out.buf
}

fn bounds(out: &mut Out, element: &str, name: &str, b: Option<Bounds>) {
    let Some(b) = b else { return };
    let tag = format!("{element} {}", attr("name", name));
    if b.min.is_none() && b.max.is_none() {
        out.line(&format!("<{tag}/>"));
        return;
    }
    out.open(&tag);
    if let Some(v) = b.min {
        out.leaf("min", &v.to_string());
    }
    if let Some(v) = b.max {
        out.leaf("max", &v.to_string());
    }
    out.close(element);
}

fn template_ref(out: &mut Out, element: &str, id: &str) {
    out.open(element);
    out.leaf("templateIdReference", id);
    out.close(element);
}

fn group(out: &mut Out, g: &Group) {
    out.open(&format!("group {}", attr("groupId", &g.id)));
    out.open("processes");
    out.line(&format!(
        "<processesCount><value>{}</value></processesCount>",
        g.processes
    ));
    if let Some(t) = &g.computing_template {
        template_ref(out, "computingResource", t);
    }
    out.close("processes");
    if g.network_template.is_some() || !g.connections.is_empty() {
        out.open("processesConnection");
        if let Some(t) = &g.network_template {
            template_ref(out, "networkResource", t);
        }
        for c in &g.connections {
            out.open(&format!(
                "groupConnection {}",
                attr("endpointGroupId", &c.endpoint)
            ));
            template_ref(out, "networkResource", &c.network_template);
            out.close("groupConnection");
        }
        out.close("processesConnection");
    }
    out.close("group");
}

fn execution(out: &mut Out, ex: &Execution) {
    out.open(&format!("execution {}", attr("type", &ex.kind)));
    out.leaf("executable", &ex.executable);
    if !ex.arguments.is_empty() {
        out.open("arguments");
        for a in &ex.arguments {
            out.leaf("value", a);
        }
        out.close("arguments");
    }
    if !ex.environment.is_empty() {
        out.open("environment");
        for v in &ex.environment {
            out.line(&format!(
                "<variable {}>{}</variable>",
                attr("name", &v.name),
                escape(v.value.as_str())
            ));
        }
        out.close("environment");
    }
    let optional = [
        ("stdin", &ex.stdin),
        ("stdout", &ex.stdout),
        ("stderr", &ex.stderr),
        ("workingDirectory", &ex.working_directory),
    ];
    for (name, value) in optional {
        if let Some(v) = value {
            out.leaf(name, v);
        }
    }
    out.close("execution");
}
