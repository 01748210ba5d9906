//! The durable audit sink: an append-only JSON-lines file; an append is confirmed once an
//! `fsync` covers it (one `fsync` may cover the appends of several threads: group commit).

use mrtr_gate_core::audit::{ChainBreak, ROOT_SHARD, shard_ok, verify_trail};
use mrtr_gate_core::host::{AppendOutcome, Audit, AuditEntry, ChainHead, HostError, ShardHeads};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::group_sync::GroupSync;

/// Why [`FileAudit::open`] refused a log.
#[derive(Debug)]
#[non_exhaustive]
pub enum FileAuditError {
    /// The file could not be opened, created or read.
    Io(std::io::Error),
    /// The last line has no line end: a write was torn.
    TornLastLine,
    /// The lines already in the file do not form an intact hash chain.
    BrokenChain(ChainBreak),
    /// The path names something other than a regular file (a device, a pipe, a folder).
    NotARegularFile,
    /// Another process writes to the trail: a trail has one writer, whose lock it holds for
    /// its life. The holder's pid, when the system names it (`/proc/locks`).
    Locked {
        /// The pid of the process holding the trail.
        holder: Option<u32>,
    },
}

impl std::fmt::Display for FileAuditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A trail nothing may be appended to says what the operator can do about it: a
        // proxy that only refuses to start is one nobody can run again.
        const WAY_OUT: &str = "nothing is appended to it: keep it as evidence (move it aside, e.g. `mv TRAIL TRAIL.broken`), see what broke with `mrtr-gate verify-audit`, and start a new trail";
        match self {
            Self::Io(_) => f.write_str("audit file: could not open or read it"),
            Self::TornLastLine => write!(
                f,
                "audit file: the last line is torn (a write was cut off); {WAY_OUT}"
            ),
            Self::BrokenChain(b) => write!(f, "audit file: the chain is broken: {b}; {WAY_OUT}"),
            Self::NotARegularFile => f.write_str(
                "audit file: not a regular file (a device, a pipe or a folder): name a file the trail can be kept in",
            ),
            Self::Locked { holder } => {
                let who = holder.map_or_else(
                    || "another process".to_owned(),
                    |pid| format!("another process (pid {pid})"),
                );
                write!(
                    f,
                    "audit file: {who} is writing this trail, and a trail has one writer: give each proxy a trail of its own (--audit FILE), or share one trail through --redis URL"
                )
            }
        }
    }
}

impl std::error::Error for FileAuditError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            Self::TornLastLine
            | Self::BrokenChain(_)
            | Self::NotARegularFile
            | Self::Locked { .. } => None,
        }
    }
}

impl From<std::io::Error> for FileAuditError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

struct FileInner {
    file: File,
    /// Each shard's last line written (durable or about to be: see [`FileAudit::append`]).
    heads: BTreeMap<String, ChainHead>,
    /// The root's newest line ([`ShardHeads::last_root`]).
    last_root: Option<String>,
    end: u64,
    /// Set when a write failed part way: the file may end in a torn line, and nothing more
    /// is appended to it.
    broken: bool,
}

/// An append-only JSON-lines audit file. Every append is fsynced, then read back from the
/// file through another handle, before it is acknowledged. On open, the existing chain is
/// verified; a broken chain refuses to open (the sink must never extend a tampered log).
pub struct FileAudit {
    path: PathBuf,
    inner: Mutex<FileInner>,
    /// A handle for `fsync`, outside the lock appends are written under.
    sync_handle: File,
    sync: GroupSync,
}

impl std::fmt::Debug for FileAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileAudit")
            .field("path", &self.path)
            .finish()
    }
}

fn io(e: std::io::Error) -> HostError {
    HostError::new(format!("audit file: {e}"))
}

impl FileAudit {
    /// Open (or create) the log at `path`, verifying the chain already in it. A new log is
    /// created owner-only (0600 on Unix), and so are its missing folders (0700). The log is
    /// locked for the life of the returned sink (`flock`, exclusive): a second writer is
    /// refused [`FileAuditError::Locked`], since two heads on one chain break it. Only a
    /// regular file is taken.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FileAuditError> {
        let path = path.as_ref().to_path_buf();
        // Checked before opening too: opening a FIFO or a terminal can block or take input.
        match std::fs::metadata(&path) {
            Ok(m) if !m.is_file() => return Err(FileAuditError::NotARegularFile),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    create_private_dir(dir)?;
                }
            }
            Err(e) => return Err(e.into()),
        }
        let mut file = private_open(&path)?;
        // What was opened, whatever the path named a moment before.
        if !file.metadata()?.is_file() {
            return Err(FileAuditError::NotARegularFile);
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(FileAuditError::Locked {
                    holder: lock_holder(&file),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
        }
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        if !text.is_empty() && !text.ends_with('\n') {
            return Err(FileAuditError::TornLastLine);
        }
        let verified = verify_trail(text.lines()).map_err(FileAuditError::BrokenChain)?;
        let last_root = verified
            .last_root
            .and_then(|i| text.lines().nth(i))
            .map(str::to_owned);
        Ok(Self {
            path,
            sync_handle: file.try_clone()?,
            inner: Mutex::new(FileInner {
                file,
                heads: verified.heads,
                last_root,
                end: text.len() as u64,
                broken: false,
            }),
            sync: GroupSync::default(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every line in the file, read from disk.
    pub fn lines(&self) -> std::io::Result<Vec<String>> {
        BufReader::new(File::open(&self.path)?).lines().collect()
    }
}

impl FileAudit {
    /// The last event of `shard` in the file (`0` and 64 zeros when it has none).
    pub fn head(&self, shard: &str) -> ChainHead {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .heads
            .get(shard)
            .cloned()
            .unwrap_or_else(ChainHead::genesis)
    }

    /// Every shard's head (lines before the sharded format under `""`).
    pub fn heads(&self) -> BTreeMap<String, ChainHead> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .heads
            .clone()
    }

    /// The line stored at `offset`, `len` bytes, read from the file through a separate
    /// handle: what the gate compares comes from the file, not from our buffers.
    fn read_line(&self, offset: u64, len: usize) -> Result<String, HostError> {
        let mut f = File::open(&self.path).map_err(io)?;
        f.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut buf = vec![0u8; len];
        f.read_exact(&mut buf).map_err(io)?;
        String::from_utf8(buf).map_err(|_| HostError::new("audit file: a line is not utf-8"))
    }
}

#[cfg(unix)]
fn private_open(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
}

/// `dir` and its missing parents, created owner-only (0700 on Unix); nothing is changed when
/// it exists.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// The pid holding a `flock` on `file`, from `/proc/locks` (Linux); `None` elsewhere, or
/// when it cannot be told.
fn lock_holder(file: &File) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().ok()?;
        let dev = meta.dev();
        // /proc/locks names the device as `major:minor` in hex (glibc's encoding of dev_t).
        let (major, minor) = (
            ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
            (dev & 0xff) | ((dev >> 12) & !0xff),
        );
        let wanted = format!("{major:02x}:{minor:02x}:{}", meta.ino());
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        // `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; a waiter's line has `->` after
        // the number.
        locks.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [_, "FLOCK", _, "WRITE", pid, inode, ..] if *inode == wanted => pid.parse().ok(),
                _ => None,
            }
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

impl ShardHeads for FileAudit {
    /// One snapshot of every head, under the lock appends move them in.
    fn heads(&self) -> Result<BTreeMap<String, ChainHead>, HostError> {
        Ok(FileAudit::heads(self))
    }
    fn last_root(&self) -> Result<Option<String>, HostError> {
        Ok(self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_root
            .clone())
    }
}

impl Audit for FileAudit {
    /// The line is written and the head moved under the lock; the `fsync` that makes it
    /// durable is waited for outside it, so appends of other threads go on meanwhile and
    /// share it. Another writer may extend a line not yet durable: its own confirmation
    /// waits for an `fsync` that covers both, and when one fails, every append fails from
    /// then on (nothing written after an unknown state of the disk is confirmed).
    fn append(&self, entry: &AuditEntry) -> Result<AppendOutcome, HostError> {
        if entry.line.contains('\n')
            || mrtr_gate_core::digest::sha256_hex(entry.line.as_bytes()) != entry.event_sha256
        {
            return Err(HostError::new(
                "audit file: the entry's digest does not match its line",
            ));
        }
        if !shard_ok(entry) {
            return Err(HostError::new(
                "audit file: the entry's shard is not a shard name its line carries",
            ));
        }
        let (offset, number) = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if inner.broken || self.sync.failed() {
                return Err(HostError::new(
                    "audit file: an earlier write or fsync failed; nothing more is appended",
                ));
            }
            let extends = match inner.heads.get(&entry.shard) {
                Some(head) => {
                    head.seq.checked_add(1) == Some(entry.seq)
                        && head.event_sha256 == entry.prev_sha256
                }
                None => entry.seq == 1 && entry.prev_sha256 == ChainHead::genesis().event_sha256,
            };
            if !extends {
                let head = inner.heads.get(&entry.shard).cloned();
                return Ok(AppendOutcome::head_moved(
                    head.unwrap_or_else(ChainHead::genesis),
                ));
            }
            let mut bytes = entry.line.clone().into_bytes();
            bytes.push(b'\n');
            if let Err(e) = inner.file.write_all(&bytes) {
                inner.broken = true;
                return Err(io(e));
            }
            let offset = inner.end;
            inner.end = offset.saturating_add(bytes.len() as u64);
            let head = ChainHead {
                seq: entry.seq,
                event_sha256: entry.event_sha256.clone(),
            };
            match inner.heads.get_mut(&entry.shard) {
                Some(h) => *h = head,
                None => {
                    inner.heads.insert(entry.shard.clone(), head);
                }
            }
            if entry.shard == ROOT_SHARD {
                inner.last_root = Some(entry.line.clone());
            }
            (offset, self.sync.wrote())
        };
        self.sync
            .sync_through(number, &self.sync_handle)
            .map_err(io)?;
        // Durable; a read-back that fails is reported as nothing found, which the gate
        // treats as an unconfirmed write (deny).
        let stored = self.read_line(offset, entry.line.len()).ok();
        Ok(AppendOutcome::written(entry, stored))
    }

    fn head_hint(&self, shard: &str) -> Option<ChainHead> {
        Some(self.head(shard))
    }
}
