//! A held call (a scenario's `hold` answer), independent of the transport: the probe sends one
//! notification on the call's stream and keeps it open until the client cancels the call
//! (it closes the exchange, or sends `notifications/cancelled` naming the id); the round the
//! scenario calls `late` is then given, under the cancelled id, to the client's next request.
//! A fallback ends the hold if no cancellation comes (a client that never acts on
//! `cancel_on`): its check is then SKIPPED, never SUCCESS. [`crate::serve`] owns the run's
//! hold and asks it what to answer; the transports only frame that; the judge reads its
//! [`HoldRecord`].

use crate::respond::envelope;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

/// How long a held call waits for its cancellation before the fallback answers it, at most:
/// longer than the TypeScript SDK's own request timeout, so the SDK's timeout (a cancellation
/// the client did not choose) is not raced by the fallback.
pub const CANCEL_FALLBACK: Duration = Duration::from_secs(90);

/// The fallback under hang guard `timeout`: [`CANCEL_FALLBACK`], but never more than half the
/// guard, so the fallback always answers before the guard fails the run.
pub fn fallback_within(timeout: Duration) -> Duration {
    CANCEL_FALLBACK.min(timeout / 2)
}

/// The plain result the fallback answers held call `id` with.
pub fn fallback_answer(id: &str) -> String {
    let result = serde_json::json!({"resultType": "complete", "content": [
        {"type": "text", "text": "the probe's fallback: the call was never cancelled"}]});
    envelope(id, "result", &result)
}

/// Where a hold is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No call held yet.
    Idle,
    /// The notification is out; waiting for the cancellation.
    Holding,
    /// The client cancelled: `closed` (the exchange) or `notifications/cancelled`.
    Cancelled(&'static str),
    /// No cancellation came within the fallback; the call was answered plainly.
    FellBack,
}

/// What the judge reads of a hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HoldRecord {
    /// The held call's id, as the client sent it.
    pub id: String,
    /// How the client cancelled it, if it did.
    pub cancelled: Option<&'static str>,
    /// The fallback answered it.
    pub fell_back: bool,
    /// The request whose stream carried the late round (its `seq`), if one came.
    pub late_on: Option<usize>,
    /// How long the hold waited before its fallback.
    pub fallback: Duration,
}

struct Inner {
    id: String,
    late: Option<String>,
    late_on: Option<usize>,
}

/// One scenario run's hold.
pub struct Hold {
    phase: watch::Sender<Phase>,
    inner: Mutex<Inner>,
    fallback: Duration,
}

impl Default for Hold {
    fn default() -> Self {
        Hold::new(CANCEL_FALLBACK)
    }
}

impl Hold {
    /// A hold whose fallback answers after `fallback`.
    pub fn new(fallback: Duration) -> Self {
        Hold {
            fallback,
            phase: watch::Sender::new(Phase::Idle),
            inner: Mutex::new(Inner {
                id: String::new(),
                late: None,
                late_on: None,
            }),
        }
    }

    /// Waits for held call `id` to settle: `Some(its plain result)` if the fallback answered
    /// it, `None` if the client cancelled it first.
    pub async fn held(&self, id: &str) -> Option<String> {
        tokio::select! {
            _ = self.settled() => None,
            () = tokio::time::sleep(self.fallback) => self.fall_back().then(|| fallback_answer(id)),
        }
    }

    /// The call `id` is held; `late` is the answer the next request gets once it is cancelled.
    /// `false` if a call is already held (a scenario holds one).
    pub fn start(&self, id: &str, late: String) -> bool {
        let started = self.phase.send_if_modified(|p| {
            let idle = *p == Phase::Idle;
            if idle {
                *p = Phase::Holding;
            }
            idle
        });
        if started && let Ok(mut inner) = self.inner.lock() {
            inner.id = id.to_owned();
            inner.late = Some(late);
        }
        started
    }

    /// The held call ended `how` (first event wins; nothing after the fallback).
    pub fn cancel(&self, how: &'static str) {
        self.phase.send_if_modified(|p| {
            let holding = *p == Phase::Holding;
            if holding {
                *p = Phase::Cancelled(how);
            }
            holding
        });
    }

    /// A `notifications/cancelled` whose `requestId` is `id` (raw JSON text) cancels the held
    /// call when it names it.
    pub fn cancel_id(&self, id: &str) {
        let named = self.inner.lock().is_ok_and(|inner| inner.id == id);
        if named {
            self.cancel("notifications/cancelled");
        }
    }

    /// The fallback: `true` if the call was still held (it is now answered plainly).
    pub fn fall_back(&self) -> bool {
        self.phase.send_if_modified(|p| {
            let holding = *p == Phase::Holding;
            if holding {
                *p = Phase::FellBack;
            }
            holding
        })
    }

    /// The phase now.
    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Waits until the held call (if any) is no longer held; returns the phase then.
    pub async fn settled(&self) -> Phase {
        let mut watching = self.phase.subscribe();
        watching
            .wait_for(|p| *p != Phase::Holding)
            .await
            .map(|p| *p)
            .unwrap_or(Phase::Idle)
    }

    /// For the request numbered `seq`, once the hold has settled: the late answer if the call
    /// was cancelled and no request has taken it yet.
    pub async fn late_for(&self, seq: usize) -> Option<String> {
        if self.phase() == Phase::Idle {
            return None;
        }
        let Phase::Cancelled(_) = self.settled().await else {
            return None;
        };
        let mut inner = self.inner.lock().ok()?;
        let late = inner.late.take()?;
        inner.late_on = Some(seq);
        Some(late)
    }

    /// What happened, for the judge (`None`: no call was held).
    pub fn record(&self) -> Option<HoldRecord> {
        let phase = self.phase();
        let inner = self.inner.lock().ok()?;
        match phase {
            Phase::Idle => None,
            _ => Some(HoldRecord {
                id: inner.id.clone(),
                cancelled: match phase {
                    Phase::Cancelled(how) => Some(how),
                    _ => None,
                },
                fell_back: phase == Phase::FellBack,
                late_on: inner.late_on,
                fallback: self.fallback,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_late_answer_goes_once_and_only_after_a_cancellation() {
        let hold = Hold::default();
        assert_eq!(hold.late_for(0).await, None, "nothing held");
        assert!(hold.start("7", "late".into()));
        assert!(!hold.start("8", "other".into()), "one hold per run");
        hold.cancel_id("8");
        assert_eq!(hold.phase(), Phase::Holding, "another id cancels nothing");
        hold.cancel_id("7");
        hold.cancel("closed");
        assert_eq!(hold.phase(), Phase::Cancelled("notifications/cancelled"));
        assert!(!hold.fall_back(), "the first event wins");
        assert_eq!(hold.late_for(3).await.as_deref(), Some("late"));
        assert_eq!(hold.late_for(4).await, None);
        let record = hold.record().unwrap();
        assert_eq!(record.late_on, Some(3));
        assert_eq!(record.cancelled, Some("notifications/cancelled"));
    }

    #[tokio::test]
    async fn a_request_during_the_hold_waits_for_it_to_settle() {
        let hold = std::sync::Arc::new(Hold::default());
        assert!(hold.start("1", "late".into()));
        let waiting = {
            let hold = hold.clone();
            tokio::spawn(async move { hold.late_for(2).await })
        };
        tokio::task::yield_now().await;
        hold.cancel("closed");
        assert_eq!(waiting.await.unwrap().as_deref(), Some("late"));
    }

    #[tokio::test]
    async fn after_the_fallback_nothing_is_delivered_late() {
        let hold = Hold::default();
        assert!(hold.start("1", "late".into()));
        assert!(hold.fall_back());
        hold.cancel("closed");
        assert_eq!(hold.late_for(2).await, None);
        let record = hold.record().unwrap();
        assert!(record.fell_back);
        assert_eq!(record.cancelled, None);
    }

    #[test]
    fn the_fallback_comes_before_the_hang_guard() {
        assert_eq!(
            fallback_within(Duration::from_secs(120)),
            Duration::from_secs(60)
        );
        assert_eq!(fallback_within(Duration::from_secs(600)), CANCEL_FALLBACK);
        assert_eq!(
            fallback_within(Duration::from_secs(30)),
            Duration::from_secs(15)
        );
    }

    #[tokio::test]
    async fn held_gives_the_plain_result_only_at_the_fallback() {
        let hold = Hold::new(Duration::from_millis(20));
        assert!(hold.start("4", "late".into()));
        let answer = hold.held("4").await.expect("the fallback answers");
        assert!(
            answer.contains("\"id\":4,") && answer.contains("fallback"),
            "{answer}"
        );
        let cancelled = Hold::new(Duration::from_secs(5));
        assert!(cancelled.start("4", "late".into()));
        cancelled.cancel("closed");
        assert_eq!(cancelled.held("4").await, None);
    }
}
