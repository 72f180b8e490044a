//! JobProfile model, resource topology and topology-aware scheduler of qcg.
//!
//! * [`profile`]: reads and writes the QosCosGrid JobProfile XML, which
//!   describes an application's process groups and their requirements.
//! * [`topology`]: the clusters, nodes and measured links on offer.
//! * [`sched`]: maps the groups of a profile onto the topology.
//!
//! Everything here is pure: no network and no file access.
//!
//! # The JobProfile schema
//!
//! The root is `<grmsJob appId="...">`. Element order inside a parent is
//! free; `?` marks an optional element, `*` one that may repeat, and an
//! element without a mark must appear exactly once. The writer emits the
//! order shown.
//!
//! ```text
//! grmsJob @appId
//!   resourceTemplates?
//!     networkResourceTemplate* @templateId
//!       networkParameter* @name = bandwidth | latency   (each name at most once)
//!         min?  max?
//!     computingResourceTemplate* @templateId
//!       hostParameter* @name = cpucount | cpuspeed | memory   (each at most once)
//!         min?  max?
//!   task @taskId
//!     resourcesDescription
//!       topology
//!         group+ @groupId
//!           processes
//!             processesCount
//!               value                      whole number >= 1
//!             computingResource?
//!               templateIdReference        a computing template
//!           processesConnection?
//!             networkResource?             links inside the group
//!               templateIdReference        a network template
//!             groupConnection* @endpointGroupId   links to another group
//!               networkResource
//!                 templateIdReference      a network template
//!     execution? @type
//!       executable
//!       arguments?    value*               kept verbatim
//!       environment?  variable* @name      value kept verbatim
//!       stdin?  stdout?  stderr?  workingDirectory?
//! ```
//!
//! Figures in `min` and `max` are bare, finite, non-negative numbers, possibly
//! decimal; the unit is implied by the parameter: **latency in ms, bandwidth
//! in Mbit/s, memory in MiB, cpuspeed in MHz**, and `cpucount` is a whole
//! number of slots. `min` may not exceed `max`. Writing a unit (`10ms`) is
//! an error that names the implied unit.
//!
//! Template ids share one namespace and are unique; group ids are unique;
//! every reference must name a defined template of the right kind or a
//! defined group other than the referring one. A single `task` is supported.
//! Text of identifiers, `executable` and file names is trimmed; argument
//! and variable values are kept verbatim. Comments, the XML declaration and
//! `xmlns` attributes are accepted and ignored; any other element or
//! attribute is an error. Each [`profile::ProfileError`] gives the line and
//! column of the problem and what was expected.
//!
//! # Example
//!
//! ```
//! use qcg_jobprofile::profile::JobProfile;
//! use qcg_jobprofile::sched::{schedule, FreeSlots, Strategy};
//! use qcg_jobprofile::topology::{Cluster, LinkQuality, Node, ResourceTopology};
//!
//! let xml = r#"<grmsJob appId="demo">
//!   <resourceTemplates>
//!     <networkResourceTemplate templateId="lan">
//!       <networkParameter name="latency"><max>1</max></networkParameter>
//!     </networkResourceTemplate>
//!   </resourceTemplates>
//!   <task taskId="main">
//!     <resourcesDescription><topology>
//!       <group groupId="workers">
//!         <processes><processesCount><value>4</value></processesCount></processes>
//!         <processesConnection>
//!           <networkResource><templateIdReference>lan</templateIdReference></networkResource>
//!         </processesConnection>
//!       </group>
//!     </topology></resourcesDescription>
//!     <execution type="open_mpi"><executable>worker</executable></execution>
//!   </task>
//! </grmsJob>"#;
//! let profile = JobProfile::parse(xml)?;
//! assert_eq!(JobProfile::parse(&profile.to_xml())?, profile);
//!
//! let topo = ResourceTopology {
//!     clusters: vec![Cluster {
//!         name: "nancy".into(),
//!         nodes: (0..2)
//!             .map(|i| Node {
//!                 name: format!("n{i}"),
//!                 slots: 2,
//!                 cpu_speed_mhz: 2400.0,
//!                 memory_mib: 4096.0,
//!                 submitters: None,
//!             })
//!             .collect(),
//!         internal: LinkQuality { latency_ms: 0.05, bandwidth_mbps: 1000.0 },
//!     }],
//!     links: vec![],
//! };
//! let mapping = schedule(&profile, &topo, &FreeSlots::all(&topo), Strategy::Spread)?;
//! let nodes: Vec<&str> = mapping.ranks.iter().map(|r| r.node.as_str()).collect();
//! assert_eq!(nodes, ["n0", "n1", "n0", "n1"]);
//!
//! let err = JobProfile::parse(&xml.replace("<max>1</max>", "<max>1ms</max>")).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "line 4, column 45: invalid figure \"1ms\" in <max> of <latency>: \
//!      the unit is implied: ms; write the bare number 1"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod profile;
pub mod sched;
pub mod topology;
