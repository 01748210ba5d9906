//! Group commit for an append-only file: writers append under their own lock, then wait for
//! an `fsync` that covers their write, outside it. One `fsync` covers every write made before
//! it started, so writers that append while another's `fsync` runs share the next one
//! instead of queueing one each behind the file's lock: a proxy's pool of engines overlaps
//! its waits on the disk (docs/performance.md, "The proxy").

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The writes made to one file and how far `fsync` has made them durable.
#[derive(Debug)]
pub(crate) struct GroupSync {
    /// Writes made so far (each writer's number is its write's place in this count).
    written: AtomicU64,
    /// How many writes the last `fsync` covered; `None` once one failed. Held across the
    /// `fsync`: the writers waiting for the next one queue here.
    synced: Mutex<Option<u64>>,
    /// Whether an `fsync` failed: read without waiting for one in progress (a writer asks it
    /// under its own lock, which must not wait for the disk).
    failed: AtomicBool,
}

impl Default for GroupSync {
    fn default() -> Self {
        Self {
            written: AtomicU64::new(0),
            synced: Mutex::new(Some(0)),
            failed: AtomicBool::new(false),
        }
    }
}

impl GroupSync {
    /// Count a write just made, while the caller still holds the lock it wrote under (so
    /// numbers follow the file's order); the number to wait for.
    pub(crate) fn wrote(&self) -> u64 {
        self.written
            .fetch_add(1, Ordering::SeqCst)
            .saturating_add(1)
    }

    /// Whether an `fsync` of this file ever failed: the file's state on the disk is then
    /// unknown, and nothing written to it may be confirmed again.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Return once write `number` is durable: at once when an `fsync` that started after it
    /// has ended, else after one more (`file` is any handle on the file). An `fsync` error
    /// fails this call and every later one: Linux may mark the failed pages clean, so a
    /// later `fsync` that succeeds proves nothing about them.
    pub(crate) fn sync_through(&self, number: u64, file: &File) -> std::io::Result<()> {
        let mut synced = self.synced.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(through) = *synced else {
            return Err(std::io::Error::other(
                "an earlier fsync of this file failed",
            ));
        };
        if through >= number {
            return Ok(());
        }
        // Every write counted by now is in the page cache: this fsync covers it.
        let covers = self.written.load(Ordering::SeqCst);
        match file.sync_data() {
            Ok(()) => {
                *synced = Some(covers);
                Ok(())
            }
            Err(e) => {
                *synced = None;
                self.failed.store(true, Ordering::SeqCst);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn one_fsync_covers_every_write_before_it_and_a_failure_sticks() {
        let dir = std::env::temp_dir().join(format!("mrtr-gate-group-sync-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f = File::create(&path).unwrap();
        let sync = GroupSync::default();
        f.write_all(b"a").unwrap();
        let a = sync.wrote();
        f.write_all(b"b").unwrap();
        let b = sync.wrote();
        sync.sync_through(a, &f).unwrap();
        // b was written before a's fsync began: covered.
        assert_eq!(*sync.synced.lock().unwrap(), Some(b));
        sync.sync_through(b, &f).unwrap();
        assert!(!sync.failed());
        // An fsync error cannot be caused on demand here: the state one leaves.
        *sync.synced.lock().unwrap() = None;
        sync.failed.store(true, Ordering::SeqCst);
        assert!(sync.failed());
        assert!(
            sync.sync_through(1, &f).is_err(),
            "no write is confirmed after a failed fsync"
        );
        // Asked under a writer's lock, `failed` never waits for an fsync in progress (the
        // lock `sync_through` holds across it): else no line is written while one runs.
        let fresh = GroupSync::default();
        let _in_progress = fresh.synced.lock().unwrap();
        assert!(!fresh.failed());
        drop(_in_progress);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
