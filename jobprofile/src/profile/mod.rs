//! The JobProfile model: resource templates, process groups with their
//! network requirements, and the execution description.
//!
//! [`JobProfile::parse`] reads the XML form documented at the crate root and
//! [`JobProfile::to_xml`] writes it back; writing then parsing yields an equal
//! model.

mod error;
mod read;
mod walker;
mod write;
mod xmltree;

use serde::{Deserialize, Serialize};

pub use error::ProfileError;

/// What a profile may hold. A document past one of these is refused with the line
/// and column where it went over, before anything more is built from it: the
/// reader's work and memory stay bounded whatever a client posts.
pub mod limits {
    /// Bytes of the whole document (checked before parsing).
    pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
    /// Depth of element nesting (the schema needs 8).
    pub const MAX_DEPTH: usize = 64;
    /// Elements in the document.
    pub const MAX_ELEMENTS: usize = 100_000;
    /// Process groups in the task.
    pub const MAX_GROUPS: usize = 1024;
    /// Processes of a job (every group's count added up).
    pub const MAX_PROCESSES: u64 = 65_536;
    /// Resource templates.
    pub const MAX_TEMPLATES: usize = 1024;
    /// Values in `<arguments>` and variables in `<environment>`, each.
    pub const MAX_PARAMETERS: usize = 4096;
    /// Bytes of the `appId` (a name shown in listings and logs, not a payload).
    pub const MAX_APP_ID: usize = 256;
}

/// A whole JobProfile document (`<grmsJob>`), holding exactly one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobProfile {
    /// The `appId` attribute of `<grmsJob>`.
    pub app_id: String,
    /// `<networkResourceTemplate>` definitions, in document order.
    pub network_templates: Vec<NetworkTemplate>,
    /// `<computingResourceTemplate>` definitions, in document order.
    pub computing_templates: Vec<ComputingTemplate>,
    /// The task (`<task>`).
    pub task: Task,
}

/// An inclusive range; a missing end is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Bounds {
    /// Lower bound (`<min>`), if any.
    pub min: Option<f64>,
    /// Upper bound (`<max>`), if any.
    pub max: Option<f64>,
}

impl Bounds {
    /// True when `value` lies within the range.
    pub fn contains(&self, value: f64) -> bool {
        self.min.is_none_or(|m| value >= m) && self.max.is_none_or(|m| value <= m)
    }
}

/// Requirements on network links (`<networkResourceTemplate>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkTemplate {
    /// The `templateId`.
    pub id: String,
    /// Bandwidth range in Mbit/s.
    pub bandwidth: Option<Bounds>,
    /// Latency range in ms.
    pub latency: Option<Bounds>,
}

/// Requirements on the hosts running a group (`<computingResourceTemplate>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputingTemplate {
    /// The `templateId`.
    pub id: String,
    /// Slots a host must offer (whole numbers).
    pub cpucount: Option<Bounds>,
    /// CPU speed in MHz.
    pub cpuspeed: Option<Bounds>,
    /// Host memory in MiB.
    pub memory: Option<Bounds>,
}

/// A task: its process groups and how to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// The `taskId`.
    pub id: String,
    /// Process groups in document order; ranks are numbered in this order.
    pub groups: Vec<Group>,
    /// The `<execution>` element, if present.
    pub execution: Option<Execution>,
}

/// A process group of the virtual topology.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The `groupId`.
    pub id: String,
    /// Number of processes (at least 1).
    pub processes: u32,
    /// Computing template the group's hosts must satisfy.
    pub computing_template: Option<String>,
    /// Network template the links between the group's processes must satisfy.
    pub network_template: Option<String>,
    /// Requirements on links to other groups.
    pub connections: Vec<GroupConnection>,
}

/// A requirement on the links between a group and another one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupConnection {
    /// The `endpointGroupId`.
    pub endpoint: String,
    /// The network template the links must satisfy.
    pub network_template: String,
}

/// How to start the processes (`<execution>`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Execution {
    /// The `type` attribute (e.g. `open_mpi`).
    pub kind: String,
    /// The program to run.
    pub executable: String,
    /// Command-line arguments, verbatim.
    pub arguments: Vec<String>,
    /// Environment variables, in document order.
    pub environment: Vec<EnvVar>,
    /// File fed to standard input.
    pub stdin: Option<String>,
    /// File receiving standard output.
    pub stdout: Option<String>,
    /// File receiving standard error.
    pub stderr: Option<String>,
    /// Directory the processes start in.
    pub working_directory: Option<String>,
}

/// One environment variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Variable value, verbatim.
    pub value: String,
}

impl JobProfile {
    /// Parses and validates a JobProfile XML document.
    pub fn parse(input: &str) -> Result<JobProfile, ProfileError> {
        read::parse(input)
    }

    /// Writes the profile as an indented XML document that
    /// [`JobProfile::parse`] reads back into an equal model.
    pub fn to_xml(&self) -> String {
        write::to_xml(self)
    }

    /// The network template with this id.
    pub fn network_template(&self, id: &str) -> Option<&NetworkTemplate> {
        self.network_templates.iter().find(|t| t.id == id)
    }

    /// The computing template with this id.
    pub fn computing_template(&self, id: &str) -> Option<&ComputingTemplate> {
        self.computing_templates.iter().find(|t| t.id == id)
    }

    /// The group with this id.
    pub fn group(&self, id: &str) -> Option<&Group> {
        self.task.groups.iter().find(|g| g.id == id)
    }

    /// Total number of processes over all groups.
    pub fn total_processes(&self) -> u64 {
        self.task
            .groups
            .iter()
            .map(|g| u64::from(g.processes))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_contains() {
        let b = Bounds {
            min: Some(1.0),
            max: Some(5.0),
        };
        assert!(b.contains(1.0) && b.contains(5.0) && !b.contains(0.5) && !b.contains(5.5));
        assert!(Bounds::default().contains(1e9));
    }

    #[test]
    fn a_huge_app_id_is_refused_naming_it() {
        let doc = |id: &str| {
            format!(
                r#"<grmsJob appId="{id}"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>1</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>/bin/true</executable>
</execution></task></grmsJob>"#
            )
        };
        assert!(JobProfile::parse(&doc("fine")).is_ok());
        let e = JobProfile::parse(&doc(&"a".repeat(500_000)))
            .expect_err("a 500 KB appId")
            .to_string();
        assert!(e.contains("appId of 500000 bytes (at most 256)"), "{e}");
    }
}
