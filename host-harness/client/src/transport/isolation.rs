//! A spawned server is a neighbour, not a part of the gate: it runs as the same user, and left
//! alone it could take the terminal the consent screen is drawn on (repaint it, push keys into
//! it with `TIOCSTI`), or rewrite the trail that records what the user consented to.
//!
//! Every server the gate spawns therefore starts in a session of its own (`setsid`): it has no
//! controlling terminal, so `/dev/tty` names nothing for it. Where the kernel has Landlock
//! (Linux 5.13 and later), an [`Isolation`] also keeps it, and everything it starts, from:
//!
//! - writing, creating, removing, renaming or truncating anything in the folders the gate
//!   keeps its files in (the trail, its links, the anchor, the key file): they are read-only;
//! - reading the key file;
//! - opening any device but `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`,
//!   `/dev/urandom` and `/dev/shm` (terminals by any name among the rest);
//! - creating, removing or renaming entries directly in a folder above those folders (their
//!   existing entries stay as they were);
//! - tracing or signalling any process outside its own sandbox (the gate's among them).
//!
//! Everything else stays as it was: the server reads and writes its own files, runs programs,
//! and uses the network. Landlock rules are grants on folder trees, so "all but these folders"
//! is written as grants on every entry beside the path down to them, taken when the server is
//! spawned (`docs/proxy.md`, "The server process").

use std::path::{Path, PathBuf};

/// What a spawned server is kept from (besides a terminal, which it never has).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Isolation {
    /// Folders the server may read but not change (the trail's, the anchor's, the key file's).
    pub read_only: Vec<PathBuf>,
    /// Files the server may not open at all (the key file).
    pub hidden: Vec<PathBuf>,
}

/// How far a spawned server is isolated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Isolated {
    /// A session of its own and every Landlock restriction asked for.
    Full,
    /// A session of its own and Landlock's restrictions as far as this kernel has them (an
    /// older ABI: no `truncate`, device `ioctl` or signal rules).
    Partial,
}

/// Why a server could not be isolated.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IsolationError {
    /// This system has no Landlock (not Linux, a kernel before 5.13, or Landlock not enabled).
    Unavailable(String),
    /// Landlock is there but the rules could not be made (a path that cannot be opened).
    Failed(String),
}

impl std::fmt::Display for IsolationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable(why) => write!(f, "the server cannot be isolated here: {why}"),
            Self::Failed(why) => write!(f, "the server's isolation could not be set up: {why}"),
        }
    }
}

impl std::error::Error for IsolationError {}

/// Another user a spawned server runs as (`--server-user`): a process of another uid cannot
/// open this user's terminal (nor push keys into it), trace or signal its processes, or write
/// its files, whatever the kernel offers besides; Landlock, where there is one, applies on
/// top. Setting it takes the privilege to (root, or `CAP_SETUID` and `CAP_SETGID`): without
/// it the server does not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunAs {
    /// The server's user id.
    pub uid: u32,
    /// The server's group id (its only group).
    pub gid: u32,
}

impl RunAs {
    /// `NAME` or `UID` (its group from `/etc/passwd`), or `UID:GID`. Refused: root, the user
    /// this process runs as (neither keeps anything from the gate), a name or uid without an
    /// entry in `/etc/passwd` and no group given.
    pub fn parse(text: &str) -> Result<Self, IsolationError> {
        let refused =
            |why: String| IsolationError::Failed(format!("--server-user `{text}`: {why}"));
        let number = |t: &str| t.parse::<u32>().ok();
        let (uid, gid) = match text.split_once(':') {
            Some((u, g)) => match (number(u), number(g)) {
                (Some(u), Some(g)) => (u, g),
                _ => return Err(refused("`UID:GID` takes two numbers".into())),
            },
            None => {
                let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
                let found = passwd.lines().find_map(|line| {
                    let mut fields = line.split(':');
                    let (name, _, uid, gid) = (
                        fields.next()?,
                        fields.next()?,
                        fields.next()?,
                        fields.next()?,
                    );
                    let (uid, gid) = (number(uid)?, number(gid)?);
                    (name == text || number(text) == Some(uid)).then_some((uid, gid))
                });
                found
                    .ok_or_else(|| refused("no such user in /etc/passwd (give `UID:GID`)".into()))?
            }
        };
        if uid == 0 {
            return Err(refused("root keeps nothing from the gate".into()));
        }
        #[cfg(unix)]
        if uid == rustix::process::geteuid().as_raw() {
            return Err(refused(
                "the gate's own user keeps nothing from the gate".into(),
            ));
        }
        Ok(Self { uid, gid })
    }
}

impl Isolation {
    /// The isolation of a server that must not touch the files of a trail at `trail` (its
    /// links and anchor beside it or at `anchor`) and the key file `key_file`. Paths that do
    /// not exist yet are protected by their nearest existing folder.
    pub fn for_files(trail: Option<&Path>, anchor: Option<&Path>, key_file: Option<&Path>) -> Self {
        let mut isolation = Self::default();
        for file in [trail, anchor, key_file].into_iter().flatten() {
            if let Some(dir) = existing_folder(file).filter(|d| !isolation.read_only.contains(d)) {
                isolation.read_only.push(dir);
            }
        }
        if let Some(key) = key_file.and_then(|k| k.canonicalize().ok()) {
            isolation.hidden.push(key);
        }
        isolation
    }

    /// The same, and `file` (which exists) kept from the server too: its folder read-only,
    /// the file not to be opened at all (a capture of every call's arguments and answers).
    #[must_use]
    pub fn also_hidden(mut self, file: &Path) -> Self {
        if let Some(dir) = existing_folder(file).filter(|d| !self.read_only.contains(d)) {
            self.read_only.push(dir);
        }
        if let Ok(file) = file.canonicalize() {
            self.hidden.push(file);
        }
        self
    }
}

/// The folder a file is (or will be) in, as the kernel names it: its nearest existing
/// ancestor, symlinks resolved.
fn existing_folder(file: &Path) -> Option<PathBuf> {
    let absolute = if file.is_absolute() {
        file.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(file)
    };
    absolute
        .parent()?
        .ancestors()
        .find_map(|d| d.canonicalize().ok())
}

/// Make `command` start its process in a session of its own (no controlling terminal) and,
/// with `isolation`, under the Landlock rules it names. The rules are built here, in the
/// parent; the child only applies them between `fork` and `exec`.
#[cfg(unix)]
pub fn isolate(
    command: &mut std::process::Command,
    isolation: Option<&Isolation>,
    run_as: Option<RunAs>,
) -> Result<Option<Isolated>, IsolationError> {
    if let Some(user) = run_as {
        // Set in the child before the closure below runs (the standard library's order), and
        // with no supplementary group of this user's kept.
        std::os::unix::process::CommandExt::uid(command, user.uid);
        std::os::unix::process::CommandExt::gid(command, user.gid);
    }
    let mut prepared = match isolation {
        Some(isolation) => Some(landlock_rules::prepare(isolation)?),
        None => None,
    };
    let isolated = prepared.as_ref().map(landlock_rules::Prepared::level);
    let mut ruleset = prepared.as_mut().and_then(landlock_rules::Prepared::take);
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed: it makes system calls only (setsid; prctl and
    // landlock_restrict_self, which the landlock crate issues without allocating on either
    // outcome) on values made before the fork.
    #[allow(unsafe_code)]
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, move || {
            rustix::process::setsid().map_err(std::io::Error::from)?;
            if let Some(ruleset) = ruleset.take() {
                landlock_rules::restrict(ruleset)?;
            }
            Ok(())
        });
    }
    Ok(isolated)
}

/// Elsewhere a server keeps the session it is given, and cannot be isolated.
#[cfg(not(unix))]
pub fn isolate(
    _command: &mut std::process::Command,
    isolation: Option<&Isolation>,
    run_as: Option<RunAs>,
) -> Result<Option<Isolated>, IsolationError> {
    match (isolation, run_as) {
        (None, None) => Ok(None),
        _ => Err(IsolationError::Unavailable("not a Unix system".into())),
    }
}

/// Whether this system can isolate a server (for a refusal at startup rather than at the
/// first spawn).
pub fn available() -> Result<(), IsolationError> {
    landlock_rules::available()
}

#[cfg(target_os = "linux")]
mod landlock_rules {
    use super::{Isolated, Isolation, IsolationError};
    use landlock::{
        ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    use std::path::{Path, PathBuf};

    /// The newest ABI whose rights are asked for; older kernels enforce what they have.
    const ABI_ASKED: ABI = ABI::V6;

    /// The devices a server may open: the ones every runtime reads or writes, none of them a
    /// terminal.
    const DEVICES: [&str; 6] = [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/shm",
    ];

    /// What a path may be: nothing, read, or anything (the rights handled; listing folders and
    /// running programs are not).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum Level {
        Nothing,
        Read,
        Anything,
    }

    fn handled() -> BitFlags<AccessFs> {
        AccessFs::from_all(ABI_ASKED) & !(AccessFs::ReadDir | AccessFs::Execute)
    }

    fn rights(level: Level, is_dir: bool) -> BitFlags<AccessFs> {
        let all = if is_dir {
            handled()
        } else {
            handled() & AccessFs::from_file(ABI_ASKED)
        };
        match level {
            Level::Nothing => BitFlags::empty(),
            Level::Read => all & AccessFs::ReadFile,
            Level::Anything => all,
        }
    }

    pub(super) struct Prepared {
        ruleset: Option<RulesetCreated>,
        level: Isolated,
    }

    impl Prepared {
        pub(super) fn level(&self) -> Isolated {
            self.level
        }

        pub(super) fn take(&mut self) -> Option<RulesetCreated> {
            self.ruleset.take()
        }
    }

    fn landlock_error(e: impl std::fmt::Display) -> IsolationError {
        IsolationError::Failed(e.to_string())
    }

    /// The first ABI's file-system rights are required; the rest are taken as far as the
    /// kernel has them.
    fn ruleset() -> Result<(RulesetCreated, Isolated), IsolationError> {
        let required = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1) & handled())
            .map_err(|e| IsolationError::Unavailable(format!("Landlock: {e}")))?;
        let created = required
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(handled())
            .and_then(|r| r.scope(Scope::Signal))
            .map_err(landlock_error)?
            .create()
            .map_err(|e| IsolationError::Unavailable(format!("Landlock: {e}")))?;
        Ok((
            created,
            if everything_asked_is_there() {
                Isolated::Full
            } else {
                Isolated::Partial
            },
        ))
    }

    /// Whether the kernel has every right asked for: a ruleset that requires them all.
    fn everything_asked_is_there() -> bool {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(handled())
            .and_then(|r| r.scope(Scope::Signal))
            .and_then(|r| r.create())
            .is_ok()
    }

    pub(super) fn available() -> Result<(), IsolationError> {
        ruleset().map(|_| ())
    }

    pub(super) fn prepare(isolation: &Isolation) -> Result<Prepared, IsolationError> {
        let (mut ruleset, level) = ruleset()?;
        let mut special: Vec<(PathBuf, Level)> = Vec::new();
        special.push((PathBuf::from("/dev"), Level::Nothing));
        special.extend(DEVICES.iter().map(|d| (PathBuf::from(d), Level::Anything)));
        special.extend(isolation.read_only.iter().map(|d| (d.clone(), Level::Read)));
        special.extend(isolation.hidden.iter().map(|f| (f.clone(), Level::Nothing)));
        let mut grants = Vec::new();
        let root = Path::new("/");
        let top = level_of(&special, root).unwrap_or(Level::Anything);
        plan(root, top, &special, &mut grants);
        for (path, level) in grants {
            let Ok(fd) = PathFd::new(&path) else {
                // Gone since it was listed: nothing to grant.
                continue;
            };
            let is_dir = path.is_dir();
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, rights(level, is_dir)))
                .map_err(|e| landlock_error(format!("{}: {e}", path.display())))?;
        }
        Ok(Prepared {
            ruleset: Some(ruleset),
            level,
        })
    }

    fn level_of(special: &[(PathBuf, Level)], path: &Path) -> Option<Level> {
        // The most restrictive entry for one path wins (a folder both read-only and hidden).
        special
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, l)| *l)
            .min()
    }

    /// The lowest level asked for anywhere strictly below `dir`, if anything is.
    fn lowest_below(special: &[(PathBuf, Level)], dir: &Path) -> Option<Level> {
        special
            .iter()
            .filter(|(p, _)| p != dir && p.starts_with(dir))
            .map(|(_, l)| *l)
            .min()
    }

    /// The grants under `dir`, whose entries get `ceiling` unless one is named itself. A grant
    /// on a folder reaches everything below it, so a folder with something named below it is
    /// granted only what all of that may have, and its entries are taken one by one.
    /// Symbolic links get nothing of their own: what they name is judged where it is.
    fn plan(
        dir: &Path,
        ceiling: Level,
        special: &[(PathBuf, Level)],
        grants: &mut Vec<(PathBuf, Level)>,
    ) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                continue;
            }
            let path = entry.path();
            let own = level_of(special, &path).unwrap_or(ceiling);
            match lowest_below(special, &path) {
                Some(below) if kind.is_dir() => {
                    let floor = own.min(below);
                    if floor > Level::Nothing {
                        grants.push((path.clone(), floor));
                    }
                    plan(&path, own, special, grants);
                }
                _ => {
                    if own > Level::Nothing {
                        grants.push((path, own));
                    }
                }
            }
        }
    }

    /// In the child, between fork and exec: no allocation.
    pub(super) fn restrict(ruleset: RulesetCreated) -> std::io::Result<()> {
        match ruleset.restrict_self() {
            Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
            Ok(_) => Err(std::io::Error::from_raw_os_error(
                rustix::io::Errno::NOSYS.raw_os_error(),
            )),
            Err(_) => Err(std::io::Error::last_os_error()),
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod landlock_rules {
    use super::{Isolated, Isolation, IsolationError};

    pub(super) enum Never {}

    pub(super) struct Prepared(Never);

    impl Prepared {
        pub(super) fn level(&self) -> Isolated {
            match self.0 {}
        }

        pub(super) fn take(&mut self) -> Option<Never> {
            match self.0 {}
        }
    }

    pub(super) fn available() -> Result<(), IsolationError> {
        Err(IsolationError::Unavailable("Landlock is Linux's".into()))
    }

    pub(super) fn prepare(_: &Isolation) -> Result<Prepared, IsolationError> {
        Err(IsolationError::Unavailable("Landlock is Linux's".into()))
    }

    pub(super) fn restrict(never: Never) -> std::io::Result<()> {
        match never {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_user_is_another_user_than_root_or_this_one() {
        assert_eq!(
            RunAs::parse("65534:65533"),
            Ok(RunAs {
                uid: 65534,
                gid: 65533
            })
        );
        for refused in [
            "0:0",
            "root",
            "1:x",
            "x:1",
            ":",
            "",
            "no-such-user-here",
            "4294967296:1",
        ] {
            assert!(RunAs::parse(refused).is_err(), "{refused}");
        }
        #[cfg(unix)]
        {
            let me = rustix::process::geteuid().as_raw();
            assert!(RunAs::parse(&format!("{me}:{me}")).is_err());
        }
        // A name or a uid alone takes its group from /etc/passwd.
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        if let Some(line) = passwd.lines().find(|l| l.starts_with("nobody:")) {
            let fields: Vec<&str> = line.split(':').collect();
            let (uid, gid) = (fields[2].parse().unwrap(), fields[3].parse().unwrap());
            assert_eq!(RunAs::parse("nobody"), Ok(RunAs { uid, gid }));
            assert_eq!(RunAs::parse(fields[2]), Ok(RunAs { uid, gid }));
        }
    }
}
