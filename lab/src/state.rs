//! The state of a running lab, kept in `/run/qcg-lab/PREFIX/state.json` so `exec`,
//! `check` and `down` find what `up` built.

use super::error::{LabError, Result};
use super::topo::Topology;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where labs keep their state.
pub const RUN_DIR: &str = "/run/qcg-lab";

/// What `up` built.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    /// Prefix of every namespace of the lab.
    pub prefix: String,
    /// The topology file it came from.
    pub topology_file: PathBuf,
    /// The topology.
    pub topology: Topology,
    /// Namespaces (all of them, created or about to be).
    pub namespaces: Vec<String>,
    /// The delay line's process, once started.
    pub delay_line_pid: Option<u32>,
}

/// The folder of the lab with `prefix`.
pub fn dir(prefix: &str) -> PathBuf {
    Path::new(RUN_DIR).join(prefix)
}

/// The state file of the lab with `prefix`.
pub fn file(prefix: &str) -> PathBuf {
    dir(prefix).join("state.json")
}

impl State {
    /// Writes the state file (atomically: a temporary file renamed over it).
    pub fn save(&self) -> Result<()> {
        let path = file(&self.prefix);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| LabError::State {
            path: path.clone(),
            message: e.to_string(),
        })?;
        std::fs::write(&tmp, text)
            .map_err(|e| LabError::io(format!("writing {}", tmp.display()), e))?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| LabError::io(format!("writing {}", path.display()), e))
    }

    /// Reads the state of the lab with `prefix`, if there is one.
    pub fn load(prefix: &str) -> Result<Option<State>> {
        let path = file(prefix);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LabError::io(format!("reading {}", path.display()), e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| LabError::State {
                path,
                message: e.to_string(),
            })
    }
}

/// Prefixes of the labs that have a state folder.
pub fn running() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(RUN_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The prefix meant: the one given, or the only lab running.
pub fn resolve_prefix(given: Option<&str>) -> Result<String> {
    if let Some(p) = given {
        return Ok(p.to_string());
    }
    let labs = running();
    match labs.as_slice() {
        [] => Err(LabError::NoLab(RUN_DIR.into())),
        [one] => Ok(one.clone()),
        many => Err(LabError::ManyLabs(many.join(", "))),
    }
}

/// The state of the lab meant (see [`resolve_prefix`]); an error if it is not up.
pub fn find(given: Option<&str>) -> Result<State> {
    let prefix = resolve_prefix(given)?;
    State::load(&prefix)?.ok_or_else(|| LabError::NoLab(dir(&prefix)))
}
