//! Schema walk: turns the element tree into a [`JobProfile`], checking every
//! element, attribute, figure and reference on the way.

use std::collections::HashMap;

use super::error::{expected_elements, expected_words, Locator, ProfileError};
use super::walker::{defined_list, Kind, Ref, Result, Walker};
use super::xmltree::{parse_tree, Element};
use super::{
    limits, Bounds, ComputingTemplate, EnvVar, Execution, Group, GroupConnection, JobProfile,
    NetworkTemplate, Task,
};

pub(crate) fn parse(input: &str) -> Result<JobProfile> {
    let root = parse_tree(input)?;
    let mut walker = Walker {
        loc: Locator::new(input),
        templates: HashMap::new(),
        refs: Vec::new(),
    };
    walker.job(&root)
}

impl Walker<'_> {
    fn job(&mut self, root: &Element) -> Result<JobProfile> {
        if root.name != "grmsJob" {
            let (line, column) = self.at(root.pos);
            return Err(ProfileError::UnknownElement {
                line,
                column,
                name: root.name.clone(),
                parent: "document".into(),
                expected: expected_elements(&["grmsJob"]),
            });
        }
        self.shape(root, &["appId"], &["resourceTemplates", "task"])?;
        let (app_id, at) = self.attr(root, "appId")?;
        if app_id.len() > limits::MAX_APP_ID {
            return Err(self.limit(
                at,
                format!(
                    "an appId of {} bytes (at most {})",
                    app_id.len(),
                    limits::MAX_APP_ID
                ),
            ));
        }
        let mut network_templates = Vec::new();
        let mut computing_templates = Vec::new();
        if let Some(rt) = self.once(root, "resourceTemplates")? {
            self.shape(
                rt,
                &[],
                &["networkResourceTemplate", "computingResourceTemplate"],
            )?;
            if let Some(t) = rt.children.get(limits::MAX_TEMPLATES) {
                return Err(self.limit(
                    t.pos,
                    format!("more than {} resource templates", limits::MAX_TEMPLATES),
                ));
            }
            for t in &rt.children {
                if t.name == "networkResourceTemplate" {
                    network_templates.push(self.network_template(t)?);
                } else {
                    computing_templates.push(self.computing_template(t)?);
                }
            }
        }
        let task = self.task(self.required(root, "task")?)?;
        self.resolve(&task)?;
        Ok(JobProfile {
            app_id: app_id.to_string(),
            network_templates,
            computing_templates,
            task,
        })
    }

    fn template_id(&mut self, el: &Element, kind: Kind) -> Result<String> {
        let (id, pos) = self.attr(el, "templateId")?;
        if let Some(&(_, first)) = self.templates.get(id) {
            return Err(self.duplicate(pos, first, "template id", id));
        }
        self.templates.insert(id.to_string(), (kind, pos));
        Ok(id.to_string())
    }

    fn network_template(&mut self, el: &Element) -> Result<NetworkTemplate> {
        self.shape(el, &["templateId"], &["networkParameter"])?;
        let id = self.template_id(el, Kind::Network)?;
        let mut t = NetworkTemplate {
            id,
            bandwidth: None,
            latency: None,
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for p in &el.children {
            let (name, pos) = self.attr(p, "name")?;
            let (slot, unit) = match name {
                "bandwidth" => (&mut t.bandwidth, "Mbit/s"),
                "latency" => (&mut t.latency, "ms"),
                other => {
                    let (line, column) = self.at(pos);
                    return Err(ProfileError::UnknownValue {
                        line,
                        column,
                        what: "network parameter".into(),
                        value: other.into(),
                        element: p.name.clone(),
                        expected: expected_words(&["bandwidth", "latency"]),
                    });
                }
            };
            if let Some(first) = seen.insert(name, pos) {
                return Err(self.duplicate(pos, first, "network parameter", name));
            }
            *slot = Some(self.bounds(p, name, Some(unit), false)?);
        }
        Ok(t)
    }

    fn computing_template(&mut self, el: &Element) -> Result<ComputingTemplate> {
        self.shape(el, &["templateId"], &["hostParameter"])?;
        let id = self.template_id(el, Kind::Computing)?;
        let mut t = ComputingTemplate {
            id,
            cpucount: None,
            cpuspeed: None,
            memory: None,
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for p in &el.children {
            let (name, pos) = self.attr(p, "name")?;
            let (slot, unit, whole) = match name {
                "cpucount" => (&mut t.cpucount, None, true),
                "cpuspeed" => (&mut t.cpuspeed, Some("MHz"), false),
                "memory" => (&mut t.memory, Some("MiB"), false),
                other => {
                    let (line, column) = self.at(pos);
                    return Err(ProfileError::UnknownValue {
                        line,
                        column,
                        what: "host parameter".into(),
                        value: other.into(),
                        element: p.name.clone(),
                        expected: expected_words(&["cpucount", "cpuspeed", "memory"]),
                    });
                }
            };
            if let Some(first) = seen.insert(name, pos) {
                return Err(self.duplicate(pos, first, "host parameter", name));
            }
            *slot = Some(self.bounds(p, name, unit, whole)?);
        }
        Ok(t)
    }

    fn bounds(&self, el: &Element, param: &str, unit: Option<&str>, whole: bool) -> Result<Bounds> {
        self.shape(el, &["name"], &["min", "max"])?;
        let mut b = Bounds::default();
        if let Some(m) = self.once(el, "min")? {
            b.min = Some(self.figure(m, param, unit, whole)?);
        }
        if let Some(m) = self.once(el, "max")? {
            b.max = Some(self.figure(m, param, unit, whole)?);
        }
        if let (Some(min), Some(max)) = (b.min, b.max) {
            if min > max {
                return Err(self.invalid(
                    el.pos,
                    format!("{param}: <min> {min} is greater than <max> {max}"),
                ));
            }
        }
        Ok(b)
    }

    fn task(&mut self, el: &Element) -> Result<Task> {
        self.shape(el, &["taskId"], &["resourcesDescription", "execution"])?;
        let (id, _) = self.attr(el, "taskId")?;
        let rd = self.required(el, "resourcesDescription")?;
        self.shape(rd, &[], &["topology"])?;
        let topo = self.required(rd, "topology")?;
        self.shape(topo, &[], &["group"])?;
        let mut groups = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        if let Some(g) = topo.children.get(limits::MAX_GROUPS) {
            return Err(self.limit(g.pos, format!("more than {} groups", limits::MAX_GROUPS)));
        }
        let mut total = 0u64;
        for g in &topo.children {
            let (gid, pos) = self.attr(g, "groupId")?;
            if let Some(&first) = seen.get(gid) {
                return Err(self.duplicate(pos, first, "group id", gid));
            }
            seen.insert(gid.to_string(), pos);
            let group = self.group(g, gid)?;
            total += u64::from(group.processes);
            if total > limits::MAX_PROCESSES {
                return Err(self.limit(
                    g.pos,
                    format!(
                        "the groups up to <group groupId=\"{gid}\"> add up to {total} processes; \
                         a job has at most {}",
                        limits::MAX_PROCESSES
                    ),
                ));
            }
            groups.push(group);
        }
        if groups.is_empty() {
            let (line, column) = self.at(topo.pos);
            return Err(ProfileError::Missing {
                line,
                column,
                element: "topology".into(),
                expected: "at least one <group>".into(),
            });
        }
        let execution = self
            .once(el, "execution")?
            .map(|e| self.execution(e))
            .transpose()?;
        Ok(Task {
            id: id.to_string(),
            groups,
            execution,
        })
    }

    /// The templateIdReference inside a `<computingResource>`/`<networkResource>`.
    fn template_ref(&mut self, el: &Element, kind: Kind) -> Result<String> {
        self.shape(el, &[], &["templateIdReference"])?;
        let r = self.required(el, "templateIdReference")?;
        let id = self.id_text(r)?.to_string();
        self.refs.push(Ref::Template {
            id: id.clone(),
            kind,
            element: if kind == Kind::Network {
                "networkResource"
            } else {
                "computingResource"
            },
            pos: r.text_pos.unwrap_or(r.pos),
        });
        Ok(id)
    }

    fn group(&mut self, el: &Element, id: &str) -> Result<Group> {
        self.shape(el, &["groupId"], &["processes", "processesConnection"])?;
        let procs = self.required(el, "processes")?;
        self.shape(procs, &[], &["processesCount", "computingResource"])?;
        let count = self.required(procs, "processesCount")?;
        self.shape(count, &[], &["value"])?;
        let value = self.required(count, "value")?;
        let processes = self.count(value)?;
        let computing_template = match self.once(procs, "computingResource")? {
            Some(c) => Some(self.template_ref(c, Kind::Computing)?),
            None => None,
        };
        let mut group = Group {
            id: id.to_string(),
            processes,
            computing_template,
            network_template: None,
            connections: Vec::new(),
        };
        let Some(conn) = self.once(el, "processesConnection")? else {
            return Ok(group);
        };
        self.shape(conn, &[], &["networkResource", "groupConnection"])?;
        if let Some(n) = self.once(conn, "networkResource")? {
            group.network_template = Some(self.template_ref(n, Kind::Network)?);
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for gc in conn.children.iter().filter(|c| c.name == "groupConnection") {
            self.shape(gc, &["endpointGroupId"], &["networkResource"])?;
            let (endpoint, pos) = self.attr(gc, "endpointGroupId")?;
            if let Some(first) = seen.insert(endpoint, pos) {
                return Err(self.duplicate(pos, first, "groupConnection to", endpoint));
            }
            self.refs.push(Ref::Group {
                id: endpoint.to_string(),
                from: id.to_string(),
                pos,
            });
            let net = self.required(gc, "networkResource")?;
            group.connections.push(GroupConnection {
                endpoint: endpoint.to_string(),
                network_template: self.template_ref(net, Kind::Network)?,
            });
        }
        Ok(group)
    }

    fn execution(&self, el: &Element) -> Result<Execution> {
        self.shape(
            el,
            &["type"],
            &[
                "executable",
                "arguments",
                "environment",
                "stdin",
                "stdout",
                "stderr",
                "workingDirectory",
            ],
        )?;
        let (kind, _) = self.attr(el, "type")?;
        let exe = self.required(el, "executable")?;
        let mut ex = Execution {
            kind: kind.to_string(),
            executable: self.id_text(exe)?.to_string(),
            ..Execution::default()
        };
        if let Some(args) = self.once(el, "arguments")? {
            self.shape(args, &[], &["value"])?;
            if let Some(v) = args.children.get(limits::MAX_PARAMETERS) {
                return Err(self.limit(
                    v.pos,
                    format!("more than {} arguments", limits::MAX_PARAMETERS),
                ));
            }
            for v in &args.children {
                ex.arguments.push(self.leaf(v, false)?.to_string());
            }
        }
        if let Some(env) = self.once(el, "environment")? {
            self.shape(env, &[], &["variable"])?;
            if let Some(v) = env.children.get(limits::MAX_PARAMETERS) {
                return Err(self.limit(
                    v.pos,
                    format!("more than {} environment variables", limits::MAX_PARAMETERS),
                ));
            }
            let mut seen: HashMap<&str, usize> = HashMap::new();
            for v in &env.children {
                let (name, pos) = self.attr(v, "name")?;
                if let Some(first) = seen.insert(name, pos) {
                    return Err(self.duplicate(pos, first, "environment variable", name));
                }
                self.shape(v, &["name"], &[])?;
                ex.environment.push(EnvVar {
                    name: name.to_string(),
                    value: v.text.clone(),
                });
            }
        }
        ex.stdin = self.optional_text(el, "stdin")?;
        ex.stdout = self.optional_text(el, "stdout")?;
        ex.stderr = self.optional_text(el, "stderr")?;
        ex.working_directory = self.optional_text(el, "workingDirectory")?;
        Ok(ex)
    }

    /// Checks every reference collected during the walk, in document order.
    fn resolve(&self, task: &Task) -> Result<()> {
        for r in &self.refs {
            match r {
                Ref::Template {
                    id,
                    kind,
                    element,
                    pos,
                } => {
                    let (line, column) = self.at(*pos);
                    match self.templates.get(id) {
                        Some((found, _)) if found == kind => {}
                        Some((found, _)) => {
                            return Err(ProfileError::WrongTemplateKind {
                                line,
                                column,
                                id: id.clone(),
                                found: found.word().into(),
                                expected: kind.word().into(),
                                element: (*element).into(),
                            })
                        }
                        None => {
                            let mut ids: Vec<(&String, usize)> = self
                                .templates
                                .iter()
                                .filter(|(_, (k, _))| k == kind)
                                .map(|(id, (_, p))| (id, *p))
                                .collect();
                            ids.sort_by_key(|(_, p)| *p);
                            let names: Vec<String> =
                                ids.iter().map(|(id, _)| format!("\"{id}\"")).collect();
                            return Err(ProfileError::UndefinedReference {
                                line,
                                column,
                                kind: format!("{} template", kind.word()),
                                id: id.clone(),
                                expected: defined_list(
                                    &names,
                                    &format!("{} template", kind.word()),
                                ),
                            });
                        }
                    }
                }
                Ref::Group { id, from, pos } => {
                    if id == from {
                        return Err(self.invalid(
                            *pos,
                            format!(
                                "group \"{id}\" connects to itself; put the requirement in the \
                                 <networkResource> of its <processesConnection>"
                            ),
                        ));
                    }
                    if !task.groups.iter().any(|g| &g.id == id) {
                        let (line, column) = self.at(*pos);
                        let names: Vec<String> = task
                            .groups
                            .iter()
                            .map(|g| format!("\"{}\"", g.id))
                            .collect();
                        return Err(ProfileError::UndefinedReference {
                            line,
                            column,
                            kind: "group".into(),
                            id: id.clone(),
                            expected: defined_list(&names, "group"),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
