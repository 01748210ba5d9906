//! # mrtr-gate-redis
//!
//! The gate's host services on Redis, for a client that runs as many processes:
//! [`RedisStorage`] is the `storage` service (live bindings, shared, every batch of
//! compare-and-swaps applied atomically on the server); [`RedisAudit`] is the `audit` service
//! (one hash chain for all of them, extended atomically). Both run on one redis-server
//! (`redis://host:port/db`) or on a Redis Cluster (`redis-cluster://host:port,…/`), where a
//! write is confirmed only once a replica holds it ([`Options`]). `docs/redis.md` has the data
//! layout and why it is built this way.

pub mod audit;
mod connection;
mod journal;
pub mod storage;

pub use audit::RedisAudit;
pub use connection::CLUSTER_SCHEME;
pub use storage::RedisStorage;

use mrtr_gate_core::host::HostError;
use redis::Value;
use std::time::Duration;

/// A Cluster call's default timeout: a write's round trip includes a replica's
/// acknowledgement, and a replica the machine's load keeps off a core for a moment must not
/// turn a good round into a denial.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(1);

/// How much later than asked a blocked `WAIT` may be answered: Redis's event loop wakes every
/// 100 ms when idle (`hz 10`, its default), plus a margin for a loaded machine.
pub const WAIT_LATE: Duration = Duration::from_millis(150);

/// How a service talks to Redis: each call's timeout, and how many replicas must hold a write
/// before it is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// How long one call may take before it fails (the gate then denies, `storage_failed` or
    /// `audit_write_failed`). Default [`storage::TIMEOUT`] on one server, [`CLUSTER_TIMEOUT`]
    /// on a Cluster, whose writes also wait for a replica. Waiting on Redis is not the
    /// guest's CPU time, so it never uses up the gate's call deadline.
    pub timeout: Duration,
    /// How many replicas must acknowledge a write (`WAIT`, in the write's own round trip)
    /// before the service confirms it; fewer within the `WAIT`'s part of the timeout (three
    /// quarters of it, at most the timeout less [`WAIT_LATE`]) is an error,
    /// so the gate denies. Redis replicates asynchronously: a master that confirmed a write and died
    /// before a replica copied it comes back as a promoted replica without it, and a round
    /// whose use it recorded would be live again. Default 1 on a Cluster (set it to the
    /// replicas each master has: a failover may promote any of them), 0 on one server.
    pub replicas: u32,
}

impl Options {
    /// The defaults for `url`: a Cluster's writes wait for one replica, one server's for none.
    pub fn for_url(url: &str) -> Self {
        let cluster = url.starts_with(CLUSTER_SCHEME);
        Self {
            timeout: if cluster {
                CLUSTER_TIMEOUT
            } else {
                storage::TIMEOUT
            },
            replicas: u32::from(cluster),
        }
    }

    /// These options with each call allowed `timeout`. With writes waiting for replicas, give
    /// it well over [`WAIT_LATE`]: the `WAIT` gets what is left (at most three quarters), 1 ms
    /// at the least.
    #[must_use]
    pub fn timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// These options with writes confirmed once `replicas` replicas hold them (0: at once).
    #[must_use]
    pub fn replicas(self, replicas: u32) -> Self {
        Self { replicas, ..self }
    }

    /// Ends `pipe` with the `WAIT` that confirms its writes, when writes wait for replicas.
    pub(crate) fn wait(&self, pipe: &mut redis::Pipeline) {
        if self.replicas > 0 {
            let wait = u64::try_from(self.wait_timeout().as_millis()).unwrap_or(u64::MAX);
            pipe.cmd("WAIT").arg(self.replicas).arg(wait.max(1));
        }
    }

    /// How long a `WAIT` may block: three quarters of the call's timeout, and at least
    /// [`WAIT_LATE`] less than it. Redis ends a blocked `WAIT` from its event loop, which an
    /// idle server wakes only every 100 ms (`hz 10`): a `WAIT` whose end came too close to the
    /// call's timeout was answered after the client had stopped reading, and the call failed
    /// as a dropped connection instead of naming the replicas missing (seen on one server,
    /// 250 ms timeout: the `WAIT` of 187 ms answered late).
    pub(crate) fn wait_timeout(&self) -> Duration {
        (self.timeout * 3 / 4).min(self.timeout.saturating_sub(WAIT_LATE))
    }

    /// Checks the replies [`Self::wait`] added: none when writes do not wait, else the count
    /// of replicas that hold the round trip's writes, which must reach `replicas`.
    pub(crate) fn confirmed(&self, waited: &[Value], what: &str) -> Result<(), HostError> {
        if self.replicas == 0 {
            return Ok(());
        }
        match waited {
            [Value::Int(n)] if u64::try_from(*n).is_ok_and(|n| n >= u64::from(self.replicas)) => {
                Ok(())
            }
            [Value::Int(n)] => Err(HostError::new(format!(
                "{what} write held by {n} of the {} replicas it waits for",
                self.replicas
            ))),
            _ => Err(HostError::new(format!("{what} returned no WAIT reply"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_early_enough_for_its_late_answer_to_be_read() {
        let with = |ms| {
            Options::for_url("redis-cluster://127.0.0.1:1")
                .timeout(Duration::from_millis(ms))
                .wait_timeout()
        };
        assert_eq!(with(1_000), Duration::from_millis(750));
        assert_eq!(with(250), Duration::from_millis(100));
        assert_eq!(
            with(100),
            Duration::ZERO,
            "then WAIT is sent with 1 ms, never 0 (forever)"
        );
        for ms in [150, 250, 400, 1_000, 5_000] {
            assert!(with(ms) + WAIT_LATE <= Duration::from_millis(ms));
        }
    }
}
