//! The root of a sharded trail (docs/audit.md, "Shards and the root"): the host appends to the
//! `root` shard an `anchor` line naming every shard's head that moved since its last one, on a
//! schedule and once more when it stops. A shard cut below a head the root anchored is then
//! found by any verifier, without a key (`verify_chain`: `Cut`).

use mrtr_gate_core::audit::anchor_root;
use mrtr_gate_core::host::{Audit, ChainHead, HostError, ShardHeads};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::services::SharedClock;

/// A sink the root can be written to: it appends, and it lists its shards' heads.
pub trait RootSink: Audit + ShardHeads + Send + Sync {}
impl<T: Audit + ShardHeads + Send + Sync + ?Sized> RootSink for T {}

/// A root sink usable from any thread (the audit sink of a run, seen as one).
pub type SharedRootSink = Arc<dyn RootSink>;

/// Writes a trail's root.
pub struct RootAnchor {
    sink: SharedRootSink,
    clock: SharedClock,
    /// The heads this writer anchored last, by shard.
    last: Mutex<BTreeMap<String, ChainHead>>,
}

impl std::fmt::Debug for RootAnchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootAnchor").finish_non_exhaustive()
    }
}

impl RootAnchor {
    /// The root of `sink`'s trail, its lines stamped by `clock`.
    pub fn new(sink: SharedRootSink, clock: SharedClock) -> Self {
        Self {
            sink,
            clock,
            last: Mutex::new(BTreeMap::new()),
        }
    }

    /// Anchor now: the root line's `seq`, or `None` when no head moved since the last anchor.
    pub fn anchor(&self) -> Result<Option<u64>, HostError> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        anchor_root(&*self.sink, &mut last, self.clock.now_ms())
    }

    /// Anchor every `period` on a thread of its own, and once more when the returned schedule
    /// is dropped (a run that ends anchors where it ended). A failed anchor is handed to
    /// `failed` (the next one tries again).
    pub fn every(
        self: Arc<Self>,
        period: Duration,
        failed: impl Fn(&HostError) + Send + Sync + 'static,
    ) -> RootSchedule {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let failed: Arc<dyn Fn(&HostError) + Send + Sync> = Arc::new(failed);
        let thread = {
            let (stop, root, failed) = (Arc::clone(&stop), Arc::clone(&self), Arc::clone(&failed));
            std::thread::Builder::new()
                .name("mrtr-gate-root".into())
                .spawn(move || {
                    let (flag, wake) = &*stop;
                    let mut stopped = flag.lock().unwrap_or_else(PoisonError::into_inner);
                    loop {
                        // The flag is read before each wait: a stop that came before this
                        // thread first took the lock sent its wake-up to nobody.
                        let (s, _) = wake
                            .wait_timeout_while(stopped, period, |stopped| !*stopped)
                            .unwrap_or_else(PoisonError::into_inner);
                        stopped = s;
                        if *stopped {
                            return;
                        }
                        if let Err(e) = root.anchor() {
                            failed(&e);
                        }
                    }
                })
        };
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                // No schedule: said, and the last anchor is still written when it stops.
                failed(&HostError::new(format!(
                    "the audit root's schedule could not start: {e}"
                )));
                None
            }
        };
        RootSchedule {
            root: self,
            stop,
            thread,
            failed,
            finished: false,
        }
    }
}

/// A root anchored on a schedule ([`RootAnchor::every`]); dropping it stops the schedule and
/// anchors once more.
pub struct RootSchedule {
    root: Arc<RootAnchor>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
    failed: Arc<dyn Fn(&HostError) + Send + Sync>,
    /// The last anchor was written by [`RootSchedule::finish`].
    finished: bool,
}

impl RootSchedule {
    /// Stop the schedule and write the last anchor, handing back what became of it (a run
    /// that reports its outcome reports this too: a trail whose end is not anchored).
    pub fn finish(mut self) -> Result<Option<u64>, HostError> {
        self.stop();
        self.finished = true;
        self.root.anchor()
    }

    fn stop(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for RootSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootSchedule").finish_non_exhaustive()
    }
}

impl Drop for RootSchedule {
    fn drop(&mut self) {
        self.stop();
        if !self.finished
            && let Err(e) = self.root.anchor()
        {
            (self.failed)(&e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_stopped_before_its_thread_first_waits_stops_at_once() {
        // A period no test waits out: a stop whose wake-up was lost would hold the drop for it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for _ in 0..50 {
                let sink = Arc::new(MemoryAudit::new());
                let clock = Arc::new(ManualClock::new(1_000));
                let schedule =
                    Arc::new(RootAnchor::new(sink, clock)).every(Duration::from_secs(3600), |_| {});
                drop(schedule);
            }
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(300)).is_ok(),
            "a dropped schedule waited out its period"
        );
    }
    use crate::reference_hosts::{ManualClock, MemoryAudit};
    use mrtr_gate_core::audit::{ROOT_SHARD, verify_chain};
    use mrtr_gate_core::host::AuditEntry;

    fn line_on(sink: &MemoryAudit, shard: &str) {
        let head = sink
            .heads()
            .remove(shard)
            .unwrap_or_else(ChainHead::genesis);
        let line = format!(
            "{{\"prev_sha256\":\"{}\",\"seq\":{},\"shard\":\"{shard}\"}}",
            head.event_sha256,
            head.seq + 1
        );
        let entry = AuditEntry {
            shard: shard.into(),
            seq: head.seq + 1,
            prev_sha256: head.event_sha256,
            event_sha256: mrtr_gate_core::digest::sha256_hex(line.as_bytes()),
            line,
        };
        assert!(sink.append(&entry).unwrap().written);
    }

    fn roots(sink: &MemoryAudit) -> usize {
        sink.entries()
            .iter()
            .filter(|e| e.shard == ROOT_SHARD)
            .count()
    }

    #[test]
    fn a_schedule_anchors_what_moved_and_once_more_when_it_stops() {
        let sink = MemoryAudit::new();
        let clock: SharedClock = Arc::new(ManualClock::new(1_700_000_000_000));
        let root = Arc::new(RootAnchor::new(Arc::new(sink.clone()), clock));
        line_on(&sink, "aa");
        let schedule = Arc::clone(&root).every(Duration::from_millis(10), |e| panic!("{e}"));
        // The schedule's thread anchors `aa` within a few periods, however busy the machine.
        while roots(&sink) == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Nothing moved: the schedule writes nothing more (the next anchor would say so).
        assert_eq!(root.anchor().unwrap(), None);
        line_on(&sink, "bb");
        drop(schedule);
        // The last anchor, as the schedule stopped, names `bb`'s head.
        let last = sink.entries().last().cloned().unwrap();
        assert_eq!(last.shard, ROOT_SHARD);
        let v: serde_json::Value = serde_json::from_str(&last.line).unwrap();
        assert_eq!(v["heads"]["bb"]["seq"], 1);
        let lines: Vec<String> = sink.entries().into_iter().map(|e| e.line).collect();
        assert!(verify_chain(lines.iter().map(String::as_str)).is_ok());
    }
}
