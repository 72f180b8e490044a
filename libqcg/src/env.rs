//! The job's environment: what `qcg run` (or a frontal) tells each process.

use crate::error::{Error, Result};
/// Every variable of the job environment, and the settings read from it.
pub use qcg_wire::env as vars;
use std::path::PathBuf;

/// Job identifier.
pub const ENV_JOB: &str = qcg_wire::env::JOB;
/// This process's rank.
pub const ENV_RANK: &str = qcg_wire::env::RANK;
/// Number of processes in the job.
pub const ENV_SIZE: &str = qcg_wire::env::SIZE;
/// The node helper's unix socket.
pub const ENV_HELPER: &str = qcg_wire::env::HELPER;
/// The job's secret, 64 hex digits. Proves on every link that both ends belong to
/// the job; never sent over the network.
pub const ENV_SECRET: &str = qcg_wire::env::SECRET;

/// The job's process groups in rank order, `NAME:COUNT,…` (see
/// [`qcg_wire::groups`]). Absent: every rank is in one group, `all`.
pub const ENV_GROUPS: &str = qcg_wire::env::GROUPS;

/// The job's groups (name, number of processes) in rank order, from
/// [`ENV_GROUPS`]; one group `all` of `size` when it is not set. The counts must
/// add up to `size`.
pub fn groups_from_env(size: u32) -> Result<Vec<(String, u32)>> {
    match std::env::var(ENV_GROUPS) {
        Err(_) => Ok(vec![("all".to_string(), size)]),
        Ok(v) => parse_groups(&v, size),
    }
}

/// Parses a [`ENV_GROUPS`] value for a job of `size` ranks.
pub fn parse_groups(v: &str, size: u32) -> Result<Vec<(String, u32)>> {
    let err = |message: String| Error::Env {
        var: ENV_GROUPS,
        message,
    };
    let groups = qcg_wire::groups::decode(v).map_err(err)?;
    let total: u64 = groups.iter().map(|(_, c)| u64::from(*c)).sum();
    if total != u64::from(size) {
        return Err(err(format!(
            "the groups hold {total} processes but the job has {size}"
        )));
    }
    Ok(groups)
}

/// Everything a process needs to join its job.
#[derive(Clone)]
pub struct JobEnv {
    /// Job identifier.
    pub job: String,
    /// This process's rank.
    pub rank: u32,
    /// Number of processes.
    pub size: u32,
    /// The node helper's socket.
    pub helper: PathBuf,
    /// The job's secret.
    pub secret: [u8; 32],
}

impl std::fmt::Debug for JobEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobEnv")
            .field("job", &self.job)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("helper", &self.helper)
            .field("secret", &"<hidden>")
            .finish()
    }
}

fn var(name: &'static str) -> Result<String> {
    std::env::var(name).map_err(|_| Error::Env {
        var: name,
        message: "not set (start the program with `qcg run`)".into(),
    })
}

/// Parses a secret written as 64 hex digits.
pub fn parse_secret(s: &str) -> Option<[u8; 32]> {
    let bytes = hex::decode(s.trim()).ok()?;
    bytes.try_into().ok()
}

/// The secret read at the first init of this process.
static SECRET: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();

/// Reads the job's secret and takes it out of the environment, so that the
/// programs this process starts (a shell, a tool) do not inherit it. Kept for a
/// later init of the same process. (The kernel's copy of the initial environment,
/// `/proc/PID/environ`, is readable only by the same uid, which can read the
/// process's memory anyway: separate uids per job are what keeps jobs apart.)
fn take_secret() -> Result<[u8; 32]> {
    if let Some(s) = SECRET.get() {
        return Ok(*s);
    }
    let secret = parse_secret(&var(ENV_SECRET)?).ok_or(Error::Env {
        var: ENV_SECRET,
        message: "must be 64 hex digits".into(),
    })?;
    let _ = SECRET.set(secret);
    std::env::remove_var(ENV_SECRET);
    Ok(secret)
}

impl JobEnv {
    /// Reads the job's environment variables.
    pub fn from_env() -> Result<JobEnv> {
        let job = var(ENV_JOB)?;
        if job.is_empty() || job.len() > 200 {
            return Err(Error::Env {
                var: ENV_JOB,
                message: "must be 1 to 200 bytes".into(),
            });
        }
        let num = |name: &'static str| -> Result<u32> {
            let v = var(name)?;
            v.parse().map_err(|_| Error::Env {
                var: name,
                message: format!("`{v}` is not a number"),
            })
        };
        let (rank, size) = (num(ENV_RANK)?, num(ENV_SIZE)?);
        if rank >= size {
            return Err(Error::Env {
                var: ENV_RANK,
                message: format!("rank {rank} is not below the job size {size}"),
            });
        }
        let secret = take_secret()?;
        Ok(JobEnv {
            job,
            rank,
            size,
            helper: var(ENV_HELPER)?.into(),
            secret,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_leaves_the_environment_at_init_and_stays_for_a_second_one() {
        let hex = "ab".repeat(32);
        std::env::set_var(ENV_JOB, "job-env-test");
        std::env::set_var(ENV_RANK, "0");
        std::env::set_var(ENV_SIZE, "1");
        std::env::set_var(ENV_HELPER, "/nonexistent");
        std::env::set_var(ENV_SECRET, &hex);
        let first = JobEnv::from_env().expect("job environment");
        assert_eq!(first.secret, [0xab; 32]);
        assert!(std::env::var_os(ENV_SECRET).is_none());
        // A child started now does not inherit it.
        let out = std::process::Command::new("sh")
            .args(["-c", "echo \"[$QCG_JOB_SECRET]\""])
            .output()
            .expect("sh");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
        let again = JobEnv::from_env().expect("second init");
        assert_eq!(again.secret, first.secret);
    }
}
