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
    /// before the service confirms it; fewer within three quarters of the timeout is an error,
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

    /// These options with each call allowed `timeout`.
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
            let wait = u64::try_from((self.timeout * 3 / 4).as_millis()).unwrap_or(u64::MAX);
            pipe.cmd("WAIT").arg(self.replicas).arg(wait.max(1));
        }
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
