//! Where the broker keeps its jobs across restarts (kill -9 included): an embedded
//! database, one record per job ([`crate::jobs::JobRecord`], JSON), rewritten
//! whenever the job changes.
//!
//! Why `redb` rather than SQLite: the access pattern is a key-value one. The broker
//! writes a few whole records per event (a job's state, ranks, placement, reserved
//! slots and output offsets) and reads them all once, at start; it never queries
//! across jobs, so SQL and its C library would buy nothing. redb is pure Rust (no C
//! toolchain on the build machines), its commits are atomic and durable (a commit
//! that returned survives a crash; one cut short is rolled back), and it takes a lock
//! on the file, so two brokers cannot share one database by mistake.
//!
//! Registrations (processes' access points, clusters, proxies) are soft state and
//! are not stored: the services register them again.

use crate::jobs::JobRecord;
use redb::{Database, TableDefinition};
use std::path::{Path, PathBuf};

const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");

/// What went wrong with the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened, read or written.
    #[error("broker database {path}: {detail}")]
    Db {
        /// Its file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// A record could not be read back.
    #[error("broker database {path}: job `{job}`: {detail}")]
    Record {
        /// Its file.
        path: PathBuf,
        /// The job.
        job: String,
        /// Why.
        detail: String,
    },
}

/// The broker's database.
pub struct Store {
    db: Database,
    path: PathBuf,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens (creating it and its folder if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let fail = |e: &dyn std::fmt::Display| StoreError::Db {
            path: path.to_path_buf(),
            detail: e.to_string(),
        };
        // It holds every job's secret: a folder of ours only the broker's user may
        // enter, and a file only it may read, whatever the umask (which can only
        // take bits away from these modes).
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| fail(&e))?;
            }
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|e| fail(&e))?;
        // A database made by an older broker (0644) is closed to others too.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| fail(&e))?;
        let db = Database::create(path).map_err(|e| fail(&e))?;
        let store = Store {
            db,
            path: path.to_path_buf(),
        };
        // The table exists from the first open on, so reads never miss it.
        store.save(&[])?;
        Ok(store)
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Db {
            path: self.path.clone(),
            detail: e.to_string(),
        }
    }

    /// Writes `records` in one durable transaction.
    pub fn save(&self, records: &[JobRecord]) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut t = tx.open_table(JOBS).map_err(|e| self.err(e))?;
            for r in records {
                let bytes = serde_json::to_vec(r).map_err(|e| self.err(e))?;
                t.insert(r.id.as_str(), bytes.as_slice())
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Every stored job.
    pub fn load(&self) -> Result<Vec<JobRecord>, StoreError> {
        use redb::ReadableTable;
        let tx = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = tx.open_table(JOBS).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for entry in t.iter().map_err(|e| self.err(e))? {
            let (k, v) = entry.map_err(|e| self.err(e))?;
            let r: JobRecord =
                serde_json::from_slice(v.value()).map_err(|e| StoreError::Record {
                    path: self.path.clone(),
                    job: k.value().to_string(),
                    detail: e.to_string(),
                })?;
            out.push(r);
        }
        Ok(out)
    }
}
