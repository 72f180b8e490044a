//! Which local account runs a job's processes, and whether that account can.
//!
//! A job's submitter (its client certificate's name, [`qcg_proto::LaunchSpec::owner`])
//! is mapped to a local user by the helper's `[accounts]` config: an entry of `map`,
//! else `default` (a dedicated `qcg` user unless configured otherwise). Root is
//! refused unless `allow_root` says otherwise. Before a process starts, the working
//! directory and the program are checked against the account's uid and gid, so that
//! a refusal names the folder or file at fault instead of an `EACCES` from exec.
//!
//! Accounts are read from `/etc/passwd` (no NSS lookups). The process runs with the
//! account's uid and primary gid and no supplementary groups (std clears them when a
//! root helper sets a uid).
//!
//! With `[accounts.pool]`, submitters without a `map` entry no longer share the
//! `default` account: each job gets a uid of its own on the node, leased from a range
//! the admin reserves (as systemd's `DynamicUser=` does), for as long as a process of
//! the job runs there; when the last one ends, whatever still runs under that uid is
//! killed and the uid goes back to the pool. Processes of two jobs then cannot signal,
//! trace or read each other (`/proc/PID/environ` included). The range must hold no
//! account of `/etc/passwd`; the admin also keeps it out of the site's directory
//! (LDAP and the like, which the helper does not read), which is why the pool is not
//! on by default: only the admin knows a free range.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The `[accounts]` section of a helper's config.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Accounts {
    /// Local user for submitters without an entry in `map`; none (`default = ""` in
    /// the config): they are refused, at submission already.
    #[serde(default = "default_user", deserialize_with = "empty_is_none")]
    pub default: Option<String>,
    /// Client identity → local user.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
    /// Whether a job may run as root (uid 0). Off unless set.
    #[serde(default)]
    pub allow_root: bool,
    /// A uid of its own per job for submitters without a `map` entry (instead of
    /// `default`).
    #[serde(default)]
    pub pool: Option<Pool>,
}

/// `[accounts.pool]`: the uids leased to jobs, one per job and node.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    /// The first uid of the range.
    pub first: u32,
    /// How many uids it holds.
    pub count: u32,
    /// The pooled processes' primary group (a name from /etc/group or a number);
    /// omitted, the helper socket's group (`socket_group`), so that they reach it.
    pub group: Option<String>,
    /// `group` resolved at load time.
    #[serde(skip)]
    pub gid: u32,
}

/// Uids a pool must never hold: root, and the kernel's overflow ids (nobody).
const NEVER_POOLED: [u32; 3] = [0, 65534, 65535];

impl Pool {
    /// The uids of the pool.
    pub fn uids(&self) -> std::ops::Range<u32> {
        self.first..self.first.saturating_add(self.count)
    }

    /// What is wrong with the range, given the text of /etc/passwd: empty, too high,
    /// holding root or nobody, or an existing account.
    pub fn check(&self, passwd: &str) -> Result<(), String> {
        if self.count == 0 {
            return Err("count must be at least 1".into());
        }
        let Some(end) = self.first.checked_add(self.count) else {
            return Err("first + count overflows".into());
        };
        if end > i32::MAX as u32 {
            return Err(format!("the range must end below {}", i32::MAX));
        }
        if let Some(u) = NEVER_POOLED.iter().find(|u| self.uids().contains(u)) {
            return Err(format!(
                "the range holds uid {u} (root or nobody): choose one without it"
            ));
        }
        for l in passwd.lines() {
            let f: Vec<&str> = l.split(':').collect();
            if let (Some(name), Some(Ok(uid))) = (f.first(), f.get(2).map(|u| u.parse::<u32>())) {
                if self.uids().contains(&uid) {
                    return Err(format!(
                        "uid {uid} of the range belongs to account `{name}` in /etc/passwd: \
                         a job would run as that user; choose a range no account uses"
                    ));
                }
            }
        }
        Ok(())
    }
}

fn empty_is_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let s = String::deserialize(d)?;
    Ok((!s.is_empty()).then_some(s))
}

fn default_user() -> Option<String> {
    Some("qcg".into())
}

impl Default for Accounts {
    fn default() -> Self {
        Accounts {
            default: default_user(),
            map: BTreeMap::new(),
            allow_root: false,
            pool: None,
        }
    }
}

/// A local account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// User name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home folder.
    pub home: PathBuf,
}

/// Why a process may not start as the job's account.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AccountError {
    /// The submitter maps to no account.
    #[error("submitter `{0}` has no local account on this node (no entry in [accounts] map and no default)")]
    Unmapped(String),
    /// Every uid of the pool is leased or in use.
    #[error("every uid of the job pool ({first}..{end}) is taken by a running job; try again when one ends, or widen [accounts.pool]")]
    PoolFull {
        /// The pool's first uid.
        first: u32,
        /// One past its last.
        end: u32,
    },
    /// The mapped user does not exist.
    #[error("local account `{0}` does not exist (not in /etc/passwd)")]
    NoSuchUser(String),
    /// The account is root and root is not allowed.
    #[error("the job would run as root (account `{0}`); the helper's config does not allow it ([accounts] allow_root)")]
    Root(String),
    /// The helper cannot switch to another account.
    #[error(
        "the helper runs as uid {helper} and cannot start processes as `{account}` (uid {uid})"
    )]
    CannotSwitch {
        /// The helper's uid.
        helper: u32,
        /// The account.
        account: String,
        /// Its uid.
        uid: u32,
    },
    /// A folder or file the process needs is out of the account's reach.
    #[error("account `{account}` cannot {what} {}", path.display())]
    Denied {
        /// The account.
        account: String,
        /// What it would need to do.
        what: &'static str,
        /// The folder or file.
        path: PathBuf,
    },
    /// The program was not found.
    #[error("no program `{0}` found in PATH")]
    NotFound(String),
}

/// The account of `name` in a passwd file's text.
pub fn parse_passwd(text: &str, name: &str) -> Option<Account> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() < 7 || f[0] != name {
            return None;
        }
        Some(Account {
            name: name.to_string(),
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
            home: PathBuf::from(f[5]),
        })
    })
}

/// Looks `name` up in /etc/passwd.
pub fn lookup(name: &str) -> Result<Account, AccountError> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    parse_passwd(&text, name).ok_or_else(|| AccountError::NoSuchUser(name.to_string()))
}

impl Accounts {
    /// Every submitter runs as the helper's own user: what an embedded grid does
    /// (its jobs are its user's own). Root is allowed only when that user is root.
    pub fn current_user() -> Accounts {
        let uid = rustix::process::getuid().as_raw();
        let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let name = text
            .lines()
            .find(|l| l.split(':').nth(2) == Some(&uid.to_string()))
            .and_then(|l| l.split(':').next())
            .unwrap_or("root")
            .to_string();
        Accounts {
            default: Some(name),
            map: BTreeMap::new(),
            allow_root: uid == 0,
            pool: None,
        }
    }

    /// Whose jobs this helper can run, as reported to the broker: `None` when the
    /// default account works (anyone's), else the identities of `map` whose account
    /// does. Read at start: an account added later counts after a restart.
    pub fn submitters(&self, helper_uid: u32) -> Option<Vec<String>> {
        if self.pool.is_some() && helper_uid == 0 {
            return None;
        }
        if self.default.is_some() && self.resolve(None, helper_uid).is_ok() {
            return None;
        }
        Some(
            self.map
                .keys()
                .filter(|o| self.resolve(Some(o.as_str()), helper_uid).is_ok())
                .cloned()
                .collect(),
        )
    }

    /// Whether `owner`'s jobs run under a uid of the pool (no `map` entry, and a pool).
    pub fn pooled(&self, owner: Option<&str>) -> bool {
        self.pool.is_some() && !owner.is_some_and(|o| self.map.contains_key(o))
    }

    /// The local user name for `owner` (the default for an unknown submitter).
    pub fn user_for(&self, owner: Option<&str>) -> Result<&str, AccountError> {
        owner
            .and_then(|o| self.map.get(o))
            .or(self.default.as_ref())
            .map(String::as_str)
            .ok_or_else(|| AccountError::Unmapped(owner.unwrap_or("(unknown)").to_string()))
    }

    /// The account `owner`'s processes run as, checked against the rules (root) and
    /// what the helper, running as `helper_uid`, can do.
    pub fn resolve(&self, owner: Option<&str>, helper_uid: u32) -> Result<Account, AccountError> {
        let acct = lookup(self.user_for(owner)?)?;
        if acct.uid == 0 && !self.allow_root {
            return Err(AccountError::Root(acct.name));
        }
        if helper_uid != 0 && acct.uid != helper_uid {
            return Err(AccountError::CannotSwitch {
                helper: helper_uid,
                account: acct.name,
                uid: acct.uid,
            });
        }
        Ok(acct)
    }
}

/// Whether a file of `mode`, owned by `owner`:`group`, grants `want` (bits of
/// r=4 w=2 x=1) to `uid`:`gid`. Root may do anything but run a file no one may run.
pub fn permits(mode: u32, owner: u32, group: u32, uid: u32, gid: u32, want: u32) -> bool {
    if uid == 0 {
        return want & 1 == 0 || mode & 0o111 != 0;
    }
    let bits = if uid == owner {
        (mode >> 6) & 7
    } else if gid == group {
        (mode >> 3) & 7
    } else {
        mode & 7
    };
    bits & want == want
}

fn check(acct: &Account, path: &Path, want: u32, what: &'static str) -> Result<(), AccountError> {
    let denied = || AccountError::Denied {
        account: acct.name.clone(),
        what,
        path: path.to_path_buf(),
    };
    let m = match std::fs::metadata(path) {
        Ok(m) => m,
        // What does not exist is left for the start itself to report (`No such file`).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => return Err(denied()),
    };
    if permits(m.mode(), m.uid(), m.gid(), acct.uid, acct.gid, want) {
        Ok(())
    } else {
        Err(denied())
    }
}

/// Whether `acct` can enter `dir` (search permission on it and every folder above).
pub fn check_dir(acct: &Account, dir: &Path) -> Result<(), AccountError> {
    let mut ancestors: Vec<&Path> = dir.ancestors().collect();
    ancestors.reverse();
    for a in ancestors {
        if a.as_os_str().is_empty() {
            continue;
        }
        check(acct, a, 1, "enter the folder")?;
    }
    if dir.exists() && !dir.is_dir() {
        return Err(AccountError::Denied {
            account: acct.name.clone(),
            what: "use as working directory (not a folder)",
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

/// Whether `acct` can run `program` (a path with a `/`), or find a program of that
/// name in `path` (a `PATH` value). Returns the program's path.
pub fn check_program(
    acct: &Account,
    program: &Path,
    path: Option<&str>,
) -> Result<PathBuf, AccountError> {
    if program.to_string_lossy().contains('/') {
        if let Some(parent) = program.parent() {
            if !parent.as_os_str().is_empty() {
                check_dir(acct, parent)?;
            }
        }
        if !program.exists() {
            // Left for the start itself to report (`No such file`).
            return Ok(program.to_path_buf());
        }
        check(acct, program, 1, "run")?;
        return Ok(program.to_path_buf());
    }
    let path = path.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let mut first_denied = None;
    for d in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(d).join(program);
        if !candidate.is_file() {
            continue;
        }
        match check_dir(acct, Path::new(d)).and_then(|_| check(acct, &candidate, 1, "run")) {
            Ok(()) => return Ok(candidate),
            Err(e) => {
                first_denied.get_or_insert(e);
            }
        }
    }
    Err(first_denied.unwrap_or_else(|| AccountError::NotFound(program.display().to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nbad:x:notanumber:1::/:/bin/sh\n";

    #[test]
    fn passwd_lines_give_the_account() {
        let n = parse_passwd(PASSWD, "nobody").unwrap();
        assert_eq!((n.uid, n.gid), (65534, 65534));
        assert_eq!(n.home, Path::new("/nonexistent"));
        assert_eq!(parse_passwd(PASSWD, "bad"), None);
        assert_eq!(parse_passwd(PASSWD, "nob"), None);
    }

    #[test]
    fn submitters_map_to_their_entry_or_the_default() {
        let mut a = Accounts::default();
        a.map.insert("alice".into(), "nobody".into());
        assert_eq!(a.user_for(Some("alice")), Ok("nobody"));
        assert_eq!(a.user_for(Some("bob")), Ok("qcg"));
        assert_eq!(a.user_for(None), Ok("qcg"));
        a.default = None;
        assert_eq!(
            a.user_for(Some("bob")),
            Err(AccountError::Unmapped("bob".into()))
        );
    }

    #[test]
    fn root_needs_to_be_allowed() {
        let mut a = Accounts::default();
        a.map.insert("alice".into(), "root".into());
        assert_eq!(
            a.resolve(Some("alice"), 0),
            Err(AccountError::Root("root".into()))
        );
        a.allow_root = true;
        assert_eq!(a.resolve(Some("alice"), 0).map(|a| a.uid), Ok(0));
    }

    #[test]
    fn a_pool_holds_no_account_no_root_and_no_nobody() {
        let pool = |first, count| Pool {
            first,
            count,
            group: None,
            gid: 0,
        };
        assert_eq!(pool(62000, 1000).check(PASSWD), Ok(()));
        let e = pool(65000, 1000).check(PASSWD).unwrap_err();
        assert!(e.contains("uid 65534"), "{e}");
        let e = pool(0, 10).check(PASSWD).unwrap_err();
        assert!(e.contains("uid 0"), "{e}");
        let e = pool(62000, 0).check(PASSWD).unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        let e = pool(u32::MAX - 1, 5).check(PASSWD).unwrap_err();
        assert!(e.contains("overflows"), "{e}");
        let e = pool(i32::MAX as u32 - 2, 5).check(PASSWD).unwrap_err();
        assert!(e.contains("below"), "{e}");
        let passwd = format!("{PASSWD}dave:x:62500:100::/home/dave:/bin/sh\n");
        let e = pool(62000, 1000).check(&passwd).unwrap_err();
        assert!(e.contains("uid 62500") && e.contains("`dave`"), "{e}");
        assert_eq!(pool(62000, 500).check(&passwd), Ok(()));
    }

    #[test]
    fn only_unmapped_submitters_are_pooled() {
        let mut a = Accounts::default();
        a.map.insert("alice".into(), "nobody".into());
        assert!(!a.pooled(Some("bob")));
        a.pool = Some(Pool {
            first: 62000,
            count: 10,
            group: None,
            gid: 0,
        });
        assert!(a.pooled(Some("bob")));
        assert!(a.pooled(None));
        assert!(!a.pooled(Some("alice")));
        assert_eq!(a.submitters(0), None);
    }

    #[test]
    fn permission_bits_follow_owner_group_other() {
        // rwx r-x ---, owned by 10:20
        let m = 0o750;
        assert!(permits(m, 10, 20, 10, 99, 7));
        assert!(permits(m, 10, 20, 11, 20, 5));
        assert!(!permits(m, 10, 20, 11, 20, 2));
        assert!(!permits(m, 10, 20, 11, 21, 1));
        assert!(permits(m, 10, 20, 0, 0, 1));
        assert!(!permits(0o600, 10, 20, 0, 0, 1));
    }
}
