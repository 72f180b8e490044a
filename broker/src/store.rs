//! Where the broker keeps its jobs across restarts (kill -9 included): an embedded
//! database, one record per job ([`crate::jobs::JobRecord`], JSON), rewritten
//! whenever the job changes, and the job's profile apart (written once at
//! submission: a profile may be a megabyte, a record is a few hundred bytes).
//! Retention ([`crate::jobs::Changes`]) deletes records and profiles; the file is
//! then compacted (redb reuses freed pages but gives them back to the file system
//! only when compacted), at most once per [`COMPACT_INTERVAL`].
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
//! are not stored: the services register them again. Who each job of `qcg run`
//! belongs to ([`crate::users`]) is stored (`run_owners`, JSON of
//! [`crate::users::Owner`] by job): a restarted broker must not give such a job to
//! whichever user registers one of its processes first.
//!
//! The database carries its schema version ([`SCHEMA_VERSION`], in a `meta` table),
//! checked at every open: a database of a newer or unknown schema is refused, naming
//! the file and both versions, before anything is read or written; an older one is
//! migrated in place: one from before versions were stored (version 1: the same
//! tables, with profiles possibly inline) has its inline profiles moved at the first
//! load, as before; versions 1 and 2 get the (empty) `run_owners` table; then the
//! version is written.
//!
//! [`Store::backup`] copies the database while the broker runs (the job API's
//! `GET /v1/admin/backup` serves it): one redb read transaction is a consistent
//! snapshot of the last commit, so the copy holds every job as it was at one
//! instant, never half of a change. An offline `cp` of the file is consistent too,
//! but only with the broker stopped; a second process cannot open the file while
//! the broker holds it (redb's lock). The copy is a database of its own: restoring
//! is starting a broker with `database` pointing at it.

use crate::jobs::{Changes, JobRecord};
use redb::{Database, ReadableTable, TableDefinition, TableHandle};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");
const PROFILES: TableDefinition<&str, &str> = TableDefinition::new("profiles");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// The user of each job of `qcg run` ([`crate::users::Owner`], JSON), by job.
const RUN_OWNERS: TableDefinition<&str, &[u8]> = TableDefinition::new("run_owners");
/// The key of the schema version in [`META`].
const SCHEMA_KEY: &str = "schema";

/// The schema this broker reads and writes. 1: jobs and profiles, no version
/// stored (brokers before the version was); 2: the same, with the version; 3: and
/// the users of `qcg run` jobs (`run_owners`).
pub const SCHEMA_VERSION: u64 = 3;

/// Bytes of database pages kept in memory.
const CACHE_BYTES: usize = 4 << 20;

/// Least time between two compactions (a compaction rewrites the file and holds
/// the database meanwhile).
pub const COMPACT_INTERVAL: Duration = Duration::from_secs(60);

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
    /// The database was written with a schema this broker does not know.
    #[error(
        "broker database {path}: schema version {found} is newer than the {supported} this \
         qcg-broker knows: it was written by a newer qcg-broker; run that version (or a newer \
         one), or point `database` at a backup this version wrote"
    )]
    Newer {
        /// Its file.
        path: PathBuf,
        /// The version it carries.
        found: u64,
        /// [`SCHEMA_VERSION`].
        supported: u64,
    },
    /// The file is a database, but not one this broker can tell the schema of.
    #[error("broker database {path}: unknown schema ({detail}); this qcg-broker writes schema version {supported}: point `database` at a qcg-broker database or at a new file")]
    Unknown {
        /// Its file.
        path: PathBuf,
        /// What was found.
        detail: String,
        /// [`SCHEMA_VERSION`].
        supported: u64,
    },
}

/// What [`Store::backup`] copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backup {
    /// Job records.
    pub jobs: usize,
    /// Job profiles.
    pub profiles: usize,
    /// The copy's size.
    pub bytes: u64,
}

/// The broker's database.
pub struct Store {
    db: Database,
    path: PathBuf,
    /// Whether something was deleted since the last compaction.
    deleted: bool,
    /// When the file was last compacted.
    compacted: Option<Instant>,
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
        // redb caches up to 1 GiB of pages by default: reading every record at
        // start (to find the unfinished ones) would leave the whole file in memory.
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|e| fail(&e))?;
        let store = Store {
            db,
            path: path.to_path_buf(),
            deleted: false,
            compacted: None,
        };
        let found = store.schema()?;
        match found {
            Some(v) if v > SCHEMA_VERSION => {
                return Err(StoreError::Newer {
                    path: path.to_path_buf(),
                    found: v,
                    supported: SCHEMA_VERSION,
                })
            }
            Some(0) => {
                return Err(StoreError::Unknown {
                    path: path.to_path_buf(),
                    detail: "schema version 0".into(),
                    supported: SCHEMA_VERSION,
                })
            }
            _ => {}
        }
        // The tables exist from the first open on, so reads never miss them; the
        // version goes in with them (a version-1 database is migrated by that).
        let tx = store.db.begin_write().map_err(|e| store.err(e))?;
        {
            tx.open_table(JOBS).map_err(|e| store.err(e))?;
            tx.open_table(PROFILES).map_err(|e| store.err(e))?;
            tx.open_table(RUN_OWNERS).map_err(|e| store.err(e))?;
            tx.open_table(META)
                .map_err(|e| store.err(e))?
                .insert(SCHEMA_KEY, SCHEMA_VERSION)
                .map_err(|e| store.err(e))?;
        }
        tx.commit().map_err(|e| store.err(e))?;
        match found {
            Some(v) if v != SCHEMA_VERSION => {
                tracing::info!(database = %path.display(), from = v, to = SCHEMA_VERSION, "database schema version written")
            }
            // A new database: not worth a start-up line of its own.
            None => {
                tracing::debug!(database = %path.display(), to = SCHEMA_VERSION, "database schema version written")
            }
            Some(_) => {}
        }
        Ok(store)
    }

    /// The schema version the file carries: `None` for a new file, 1 for one of a
    /// broker from before versions were stored; an error for a file that is no
    /// broker database.
    fn schema(&self) -> Result<Option<u64>, StoreError> {
        let unknown = |detail: String| StoreError::Unknown {
            path: self.path.clone(),
            detail,
            supported: SCHEMA_VERSION,
        };
        let tx = self.db.begin_read().map_err(|e| self.err(e))?;
        let tables: Vec<String> = tx
            .list_tables()
            .map_err(|e| self.err(e))?
            .map(|t| t.name().to_string())
            .collect();
        if !tables.iter().any(|t| t == META.name()) {
            let ours = [JOBS.name(), PROFILES.name()];
            if let Some(other) = tables.iter().find(|t| !ours.contains(&t.as_str())) {
                return Err(unknown(format!(
                    "no version, and a table `{other}` no qcg-broker writes"
                )));
            }
            return Ok((!tables.is_empty()).then_some(1));
        }
        let meta = tx
            .open_table(META)
            .map_err(|e| unknown(format!("its `meta` table: {e}")))?;
        match meta.get(SCHEMA_KEY).map_err(|e| self.err(e))? {
            Some(v) => Ok(Some(v.value())),
            None => Err(unknown("a `meta` table without a schema version".into())),
        }
    }

    /// Copies the database as it is now into a new file `out` (created 0600; an
    /// existing file is not overwritten), from one read transaction: a consistent
    /// snapshot taken while the broker runs. Writers wait for the copy (the caller
    /// holds the store), and no compaction can run under it.
    pub fn backup(&self, out: &Path) -> Result<Backup, StoreError> {
        let fail = |e: &dyn std::fmt::Display| StoreError::Db {
            path: out.to_path_buf(),
            detail: e.to_string(),
        };
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(out)
            .map_err(|e| fail(&e))?;
        let copy = Database::create(out).map_err(|e| fail(&e))?;
        let snap = self.db.begin_read().map_err(|e| self.err(e))?;
        let (jobs, profiles, owners) = (
            snap.open_table(JOBS).map_err(|e| self.err(e))?,
            snap.open_table(PROFILES).map_err(|e| self.err(e))?,
            snap.open_table(RUN_OWNERS).map_err(|e| self.err(e))?,
        );
        let mut n = Backup {
            jobs: 0,
            profiles: 0,
            bytes: 0,
        };
        let tx = copy.begin_write().map_err(|e| fail(&e))?;
        {
            let mut t = tx.open_table(JOBS).map_err(|e| fail(&e))?;
            for entry in jobs.iter().map_err(|e| self.err(e))? {
                let (k, v) = entry.map_err(|e| self.err(e))?;
                t.insert(k.value(), v.value()).map_err(|e| fail(&e))?;
                n.jobs += 1;
            }
            let mut p = tx.open_table(PROFILES).map_err(|e| fail(&e))?;
            for entry in profiles.iter().map_err(|e| self.err(e))? {
                let (k, v) = entry.map_err(|e| self.err(e))?;
                p.insert(k.value(), v.value()).map_err(|e| fail(&e))?;
                n.profiles += 1;
            }
            let mut o = tx.open_table(RUN_OWNERS).map_err(|e| fail(&e))?;
            for entry in owners.iter().map_err(|e| self.err(e))? {
                let (k, v) = entry.map_err(|e| self.err(e))?;
                o.insert(k.value(), v.value()).map_err(|e| fail(&e))?;
            }
            tx.open_table(META)
                .map_err(|e| fail(&e))?
                .insert(SCHEMA_KEY, SCHEMA_VERSION)
                .map_err(|e| fail(&e))?;
        }
        tx.commit().map_err(|e| fail(&e))?;
        drop(copy);
        n.bytes = std::fs::metadata(out).map_or(0, |m| m.len());
        Ok(n)
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Db {
            path: self.path.clone(),
            detail: e.to_string(),
        }
    }

    /// Writes `records` in one durable transaction (their profiles too, for
    /// those that carry one).
    pub fn save(&mut self, records: &[JobRecord]) -> Result<(), StoreError> {
        let mut c = Changes::default();
        for r in records {
            if !r.profile.is_empty() {
                c.profiles.push((r.id.clone(), r.profile.clone()));
            }
            c.records.push(JobRecord {
                profile: String::new(),
                ..r.clone()
            });
        }
        self.apply(&c).map(|_| ())
    }

    /// Carries out `changes` in one durable transaction (writes, then deletions),
    /// then compacts the file if something was deleted and the last compaction is
    /// [`COMPACT_INTERVAL`] old. Returns whether it compacted.
    pub fn apply(&mut self, changes: &Changes) -> Result<bool, StoreError> {
        let tx = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut t = tx.open_table(JOBS).map_err(|e| self.err(e))?;
            let mut p = tx.open_table(PROFILES).map_err(|e| self.err(e))?;
            for (id, xml) in &changes.profiles {
                p.insert(id.as_str(), xml.as_str())
                    .map_err(|e| self.err(e))?;
            }
            for r in &changes.records {
                let bytes = serde_json::to_vec(r).map_err(|e| self.err(e))?;
                t.insert(r.id.as_str(), bytes.as_slice())
                    .map_err(|e| self.err(e))?;
            }
            for id in &changes.forget_profiles {
                self.deleted |= p.remove(id.as_str()).map_err(|e| self.err(e))?.is_some();
            }
            for id in &changes.forget {
                self.deleted |= t.remove(id.as_str()).map_err(|e| self.err(e))?.is_some();
            }
            if !changes.run_owners.is_empty() {
                let mut o = tx.open_table(RUN_OWNERS).map_err(|e| self.err(e))?;
                for (job, owner) in &changes.run_owners {
                    match owner {
                        Some(owner) => {
                            let bytes = serde_json::to_vec(owner).map_err(|e| self.err(e))?;
                            o.insert(job.as_str(), bytes.as_slice())
                                .map_err(|e| self.err(e))?;
                        }
                        None => {
                            o.remove(job.as_str()).map_err(|e| self.err(e))?;
                        }
                    }
                }
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        self.compact_if_due()
    }

    /// Compacts the file if something was deleted and none was done for
    /// [`COMPACT_INTERVAL`].
    pub fn compact_if_due(&mut self) -> Result<bool, StoreError> {
        let due = self.deleted
            && self
                .compacted
                .is_none_or(|t| t.elapsed() >= COMPACT_INTERVAL);
        if !due {
            return Ok(false);
        }
        let before = self.file_bytes();
        // Set first, so that a failing compaction is tried again once a minute, not
        // on every call.
        self.compacted = Some(Instant::now());
        self.db.compact().map_err(|e| self.err(e))?;
        self.deleted = false;
        tracing::info!(database = %self.path.display(), bytes_before = before, bytes_after = self.file_bytes(), "database compacted");
        Ok(true)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The size of the database file.
    pub fn file_bytes(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// Every stored job `wanted` keeps (the others stay in the database only,
    /// [`crate::jobs`]' `stored`). The profiles of unfinished jobs are read back
    /// with them; those of finished ones are not (a finished job needs none).
    /// Records of an older broker that held their profile inline have it moved to
    /// its own table.
    pub fn load(
        &mut self,
        wanted: impl Fn(&JobRecord) -> bool,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut out = Vec::new();
        let mut inline = Vec::new();
        {
            let tx = self.db.begin_read().map_err(|e| self.err(e))?;
            let t = tx.open_table(JOBS).map_err(|e| self.err(e))?;
            let p = tx.open_table(PROFILES).map_err(|e| self.err(e))?;
            for entry in t.iter().map_err(|e| self.err(e))? {
                let (k, v) = entry.map_err(|e| self.err(e))?;
                let mut r: JobRecord =
                    serde_json::from_slice(v.value()).map_err(|e| StoreError::Record {
                        path: self.path.clone(),
                        job: k.value().to_string(),
                        detail: e.to_string(),
                    })?;
                if !r.profile.is_empty() {
                    inline.push(r.clone());
                }
                if !wanted(&r) {
                    continue;
                }
                if r.state.is_terminal() {
                    r.profile = String::new();
                } else if r.profile.is_empty() {
                    if let Some(xml) = p.get(r.id.as_str()).map_err(|e| self.err(e))? {
                        r.profile = xml.value().to_string();
                    }
                }
                out.push(r);
            }
        }
        if !inline.is_empty() {
            self.save(&inline)?;
        }
        Ok(out)
    }

    /// The users of `qcg run` jobs the database holds ([`crate::users`]), by job.
    pub fn run_owners(&self) -> Result<Vec<(String, crate::users::Owner)>, StoreError> {
        let tx = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = tx.open_table(RUN_OWNERS).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for entry in t.iter().map_err(|e| self.err(e))? {
            let (k, v) = entry.map_err(|e| self.err(e))?;
            let owner = serde_json::from_slice(v.value()).map_err(|e| StoreError::Record {
                path: self.path.clone(),
                job: k.value().to_string(),
                detail: format!("its user: {e}"),
            })?;
            out.push((k.value().to_string(), owner));
        }
        Ok(out)
    }

    /// The stored record of job `id` (without its profile).
    pub fn record(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let tx = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = tx.open_table(JOBS).map_err(|e| self.err(e))?;
        let Some(v) = t.get(id).map_err(|e| self.err(e))? else {
            return Ok(None);
        };
        let mut r: JobRecord = serde_json::from_slice(v.value()).map_err(|e| self.err(e))?;
        r.profile = String::new();
        Ok(Some(r))
    }

    /// The stored records of finished jobs `wanted` keeps (without profiles).
    pub fn finished(
        &self,
        wanted: impl Fn(&JobRecord) -> bool,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.finished_page(None, usize::MAX, wanted)
    }

    /// At most `limit` stored records of finished jobs that `wanted` keeps (without
    /// profiles), in id order from the first id past `after`: a page of a listing,
    /// read without going over the rest of the table.
    pub fn finished_page(
        &self,
        after: Option<&str>,
        limit: usize,
        wanted: impl Fn(&JobRecord) -> bool,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let tx = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = tx.open_table(JOBS).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        let from = after.unwrap_or("");
        for entry in t.range::<&str>(from..).map_err(|e| self.err(e))? {
            if out.len() >= limit {
                break;
            }
            let (k, v) = entry.map_err(|e| self.err(e))?;
            if after == Some(k.value()) {
                continue;
            }
            let Ok(mut r) = serde_json::from_slice::<JobRecord>(v.value()) else {
                continue;
            };
            if r.state.is_terminal() && wanted(&r) {
                r.profile = String::new();
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Deletes the records (and profiles) of the jobs that finished, with their
    /// slots given back, before `unix_ms`; returns how many.
    pub fn expired_before(&mut self, unix_ms: u64) -> Result<usize, StoreError> {
        let gone: Vec<String> = self
            .finished(|r| r.released && r.decided_unix_ms.is_some_and(|t| t < unix_ms))?
            .into_iter()
            .map(|r| r.id)
            .collect();
        if gone.is_empty() {
            return Ok(0);
        }
        let c = Changes {
            forget_profiles: gone.clone(),
            forget: gone.clone(),
            ..Changes::default()
        };
        self.apply(&c)?;
        Ok(gone.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::tests::{launched_all, ok, sub, topo};
    use crate::jobs::{JobLimits, Jobs};
    use std::time::Duration;

    /// Issue 21, item 4: 60 posts of a 900 KB profile grew the database from 1.6 MB
    /// to 101 MB, and nothing was ever deleted.
    #[test]
    fn finished_jobs_leave_the_database_on_schedule_and_the_file_shrinks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/broker.redb");
        let mut store = Store::open(&path).unwrap();
        let empty = store.file_bytes();
        let t = topo(1, 4);
        let now = std::time::Instant::now();
        let mut jobs = Jobs::default();
        jobs.set_limits(JobLimits {
            output_keep: Duration::from_secs(60),
            record_keep: Duration::from_secs(600),
            ..JobLimits::default()
        });
        let pad = format!("<!-- {} -->", "p".repeat(900_000));
        for i in 0..60 {
            let id = format!("j{i}");
            let mut s = sub(1);
            s.source.push_str(&pad);
            let a = jobs.submit(id.clone(), s, &t).unwrap();
            store.apply(&jobs.take_changes()).unwrap();
            launched_all(&mut jobs, &id, &a, now);
            jobs.exited(&id, 0, "c0", ok(), now).unwrap();
            store.apply(&jobs.take_changes()).unwrap();
        }
        // A job still running keeps everything.
        let a = jobs.submit("live".into(), sub(1), &t).unwrap();
        launched_all(&mut jobs, "live", &a, now);
        store.apply(&jobs.take_changes()).unwrap();
        let full = store.file_bytes();
        assert!(full > 54_000_000, "{full}");
        assert_eq!(store.load(|_| true).unwrap().len(), 61);

        // Past output_keep the profiles go and the file is compacted.
        jobs.tick(&t, now + Duration::from_secs(60));
        let c = jobs.take_changes();
        assert_eq!(c.forget_profiles.len(), 60);
        assert!(store.apply(&c).unwrap(), "compacted");
        let light = store.file_bytes();
        assert!(light < 2_000_000, "{full} -> {light}");
        let back = store.load(|_| true).unwrap();
        assert_eq!(back.len(), 61);
        let live = back.iter().find(|r| r.id == "live").unwrap();
        assert!(
            live.profile.contains("<executable>"),
            "a running job's profile stays"
        );

        // Past record_keep the records go too (compacted at the next interval).
        jobs.tick(&t, now + Duration::from_secs(600));
        assert!(
            !store.apply(&jobs.take_changes()).unwrap(),
            "not again so soon"
        );
        store.compacted = None;
        assert!(store.compact_if_due().unwrap());
        let back = store.load(|_| true).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].id, "live");
        let end = store.file_bytes();
        assert!(end <= light, "{light} -> {end}");
        println!("database: empty {empty}, 60 x 900 KB {full}, profiles gone {light}, records gone {end} bytes");
        // A broker started again on it takes the running job back.
        drop(store);
        let mut store = Store::open(&path).unwrap();
        let mut again = Jobs::default();
        assert!(again.restore(store.load(|_| true).unwrap(), now).is_empty());
        assert_eq!(again.all().count(), 1);
    }

    #[test]
    fn finished_jobs_are_read_a_page_at_a_time_in_id_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("broker.redb")).unwrap();
        let t = topo(1, 4);
        let now = std::time::Instant::now();
        let mut jobs = Jobs::default();
        for i in [3, 1, 4, 0, 2] {
            let id = format!("j{i}");
            let a = jobs.submit(id.clone(), sub(1), &t).unwrap();
            launched_all(&mut jobs, &id, &a, now);
            if i != 4 {
                jobs.exited(&id, 0, "c0", ok(), now).unwrap();
            }
            store.apply(&jobs.take_changes()).unwrap();
        }
        let ids = |v: Vec<JobRecord>| v.into_iter().map(|r| r.id).collect::<Vec<_>>();
        // j4 still runs: not a finished job.
        assert_eq!(
            ids(store.finished_page(None, 2, |_| true).unwrap()),
            ["j0", "j1"]
        );
        assert_eq!(
            ids(store.finished_page(Some("j1"), 2, |_| true).unwrap()),
            ["j2", "j3"]
        );
        assert!(store
            .finished_page(Some("j3"), 2, |_| true)
            .unwrap()
            .is_empty());
        assert_eq!(
            ids(store.finished_page(None, 9, |r| r.id != "j1").unwrap()),
            ["j0", "j2", "j3"]
        );
    }

    #[test]
    fn records_of_an_older_broker_with_their_profile_inline_keep_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.redb");
        let t = topo(1, 4);
        let mut jobs = Jobs::default();
        jobs.submit("r".into(), sub(2), &t).unwrap();
        let old = jobs.record("r").unwrap();
        assert!(!old.profile.is_empty());
        {
            // Written as the previous version did: the profile inside the record.
            let db = Database::create(&path).unwrap();
            let tx = db.begin_write().unwrap();
            tx.open_table(JOBS)
                .unwrap()
                .insert("r", serde_json::to_vec(&old).unwrap().as_slice())
                .unwrap();
            tx.commit().unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema().unwrap(), Some(SCHEMA_VERSION), "migrated");
        assert_eq!(store.load(|_| true).unwrap()[0].profile, old.profile);
        // Moved to its own table: a second load finds it there.
        assert_eq!(store.load(|_| true).unwrap()[0].profile, old.profile);
    }

    /// A database stamped with `version` by hand, with one job in it.
    fn stamped(path: &Path, version: u64) {
        let db = Database::create(path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(META)
            .unwrap()
            .insert(SCHEMA_KEY, version)
            .unwrap();
        tx.open_table(JOBS)
            .unwrap()
            .insert("j", b"{}".as_slice())
            .unwrap();
        tx.commit().unwrap();
    }

    fn owner(uid: u32) -> crate::users::Owner {
        crate::users::Owner {
            user: qcg_proto::LocalUser {
                uid,
                machine: "boot-1".into(),
                node: "orsay-1".into(),
            },
            cluster: "orsay".into(),
        }
    }

    #[test]
    fn the_users_of_qcg_run_jobs_outlive_the_broker() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.redb");
        let mut store = Store::open(&path).unwrap();
        let c = Changes {
            run_owners: vec![
                ("a".into(), Some(owner(1000))),
                ("b".into(), Some(owner(1001))),
                ("c".into(), Some(owner(1002))),
                ("b".into(), None),
            ],
            ..Changes::default()
        };
        store.apply(&c).unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.run_owners().unwrap(),
            vec![("a".into(), owner(1000)), ("c".into(), owner(1002))]
        );
        // A backup holds them too.
        let copy = dir.path().join("copy.redb");
        store.backup(&copy).unwrap();
        assert_eq!(Store::open(&copy).unwrap().run_owners().unwrap().len(), 2);
    }

    #[test]
    fn a_database_of_schema_2_opens_with_its_jobs_and_no_run_owners() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.redb");
        let t = topo(1, 4);
        let mut jobs = Jobs::default();
        jobs.submit("r".into(), sub(1), &t).unwrap();
        let rec = jobs.record("r").unwrap();
        {
            // As a broker of schema 2 left it: jobs, profiles, meta; no run_owners.
            let db = Database::create(&path).unwrap();
            let tx = db.begin_write().unwrap();
            tx.open_table(META).unwrap().insert(SCHEMA_KEY, 2).unwrap();
            tx.open_table(JOBS)
                .unwrap()
                .insert("r", serde_json::to_vec(&rec).unwrap().as_slice())
                .unwrap();
            tx.open_table(PROFILES).unwrap();
            tx.commit().unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema().unwrap(), Some(SCHEMA_VERSION), "migrated");
        assert!(store.run_owners().unwrap().is_empty());
        assert_eq!(store.load(|_| true).unwrap()[0].id, "r");
        let c = Changes {
            run_owners: vec![("x".into(), Some(owner(7)))],
            ..Changes::default()
        };
        store.apply(&c).unwrap();
        assert_eq!(store.run_owners().unwrap().len(), 1);
    }

    #[test]
    fn a_new_database_carries_the_schema_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("b.redb")).unwrap();
        assert_eq!(store.schema().unwrap(), Some(SCHEMA_VERSION));
    }

    #[test]
    fn a_database_of_a_newer_schema_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.redb");
        stamped(&path, SCHEMA_VERSION + 1);
        let e = Store::open(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(
            e.contains(&format!(
                "schema version {} is newer than the {SCHEMA_VERSION}",
                SCHEMA_VERSION + 1
            )),
            "{e}"
        );
        // Still the newer broker's: its version stands.
        let db = Database::open(&path).unwrap();
        let tx = db.begin_read().unwrap();
        let v = tx.open_table(META).unwrap().get(SCHEMA_KEY).unwrap();
        assert_eq!(v.unwrap().value(), SCHEMA_VERSION + 1);
    }

    #[test]
    fn a_database_of_an_unknown_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("zero.redb");
        stamped(&zero, 0);
        let e = Store::open(&zero).unwrap_err().to_string();
        assert!(
            e.contains("zero.redb: unknown schema (schema version 0)"),
            "{e}"
        );

        let other = dir.path().join("other.redb");
        {
            let db = Database::create(&other).unwrap();
            let tx = db.begin_write().unwrap();
            let t: TableDefinition<u64, u64> = TableDefinition::new("accounts");
            tx.open_table(t).unwrap().insert(1, 2).unwrap();
            tx.commit().unwrap();
        }
        let e = Store::open(&other).unwrap_err().to_string();
        assert!(e.contains("other.redb: unknown schema"), "{e}");
        assert!(e.contains("a table `accounts` no qcg-broker writes"), "{e}");

        let typed = dir.path().join("typed.redb");
        {
            let db = Database::create(&typed).unwrap();
            let tx = db.begin_write().unwrap();
            let t: TableDefinition<&str, &str> = TableDefinition::new("meta");
            tx.open_table(t).unwrap().insert("schema", "two").unwrap();
            tx.commit().unwrap();
        }
        let e = Store::open(&typed).unwrap_err().to_string();
        assert!(
            e.contains("typed.redb: unknown schema (its `meta` table"),
            "{e}"
        );

        let text = dir.path().join("notes.txt");
        std::fs::write(
            &text,
            "not a database at all, but long enough to look like one",
        )
        .unwrap();
        let e = Store::open(&text).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("broker database {}", text.display())),
            "{e}"
        );
    }

    #[test]
    fn a_backup_is_a_database_of_its_own_with_every_job() {
        let dir = tempfile::tempdir().unwrap();
        let t = topo(1, 4);
        let mut jobs = Jobs::default();
        let mut store = Store::open(&dir.path().join("broker.redb")).unwrap();
        for id in ["a", "b"] {
            jobs.submit(id.into(), sub(1), &t).unwrap();
        }
        store.apply(&jobs.take_changes()).unwrap();
        let out = dir.path().join("copy.redb");
        let n = store.backup(&out).unwrap();
        assert_eq!((n.jobs, n.profiles), (2, 2));
        assert!(n.bytes > 0);
        assert!(store.backup(&out).is_err(), "an existing file is kept");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut copy = Store::open(&out).unwrap();
        let mut ids: Vec<_> = copy
            .load(|_| true)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        assert_eq!(ids, ["a", "b"]);
    }
}
