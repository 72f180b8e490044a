//! A lab brought up for one benchmark run, under a prefix of its own, and taken down
//! when the run ends (on error too).

use qcg_lab::ops;
use std::path::{Path, PathBuf};

/// A running lab; down on drop.
pub(crate) struct LabRun {
    /// The lab's prefix.
    pub prefix: String,
    /// The folder of this binary, where the qcg services and `qcg-lab` are.
    pub bins: PathBuf,
}

impl Drop for LabRun {
    fn drop(&mut self) {
        let _ = ops::down(&self.prefix);
    }
}

impl LabRun {
    /// Checks for root and brings up `topo` under `TAG<pid>`.
    pub fn up(topo: &Path, tag: &str) -> anyhow::Result<LabRun> {
        anyhow::ensure!(
            qcg_lab::sys::is_root(),
            "the lab needs root (network namespaces, nftables)"
        );
        let bins = std::env::current_exe()?
            .parent()
            .ok_or_else(|| anyhow::anyhow!("no folder for this binary"))?
            .to_path_buf();
        let prefix = format!("{tag}{}", std::process::id() % 10_000);
        ops::up(topo, Some(&prefix))?;
        Ok(LabRun { prefix, bins })
    }
}
