//! One Redis connection, shared by a service's calls: connected on first use, dropped on
//! any failure (the next call connects afresh: Redis restarted, a timeout), every call
//! bounded by the timeout, and counted.

use mrtr_gate_host::core::host::HostError;
use redis::Connection;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

pub(crate) struct Conn {
    client: redis::Client,
    timeout: Duration,
    slot: Mutex<Option<Connection>>,
    calls: AtomicU64,
    what: &'static str,
}

/// The error a host reports: the kind, not the text (a Redis error can quote the command,
/// and so a value).
pub(crate) fn failed(what: &str, step: &str, e: &redis::RedisError) -> HostError {
    HostError::new(format!("{what} {step} failed ({:?})", e.kind()))
}

impl Conn {
    /// A connection to `url` for `what` (`redis`, `redis audit`: named in errors).
    pub(crate) fn open(
        url: &str,
        timeout: Duration,
        what: &'static str,
    ) -> Result<Self, HostError> {
        let client = redis::Client::open(url).map_err(|e| failed(what, "open", &e))?;
        let conn = Self {
            client,
            timeout,
            slot: Mutex::new(None),
            calls: AtomicU64::new(0),
            what,
        };
        conn.with(|_| Ok(()))?;
        Ok(conn)
    }

    /// Calls made so far.
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, HostError> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            let c = self
                .client
                .get_connection_with_timeout(self.timeout)
                .map_err(|e| failed(self.what, "connect", &e))?;
            c.set_read_timeout(Some(self.timeout))
                .and_then(|()| c.set_write_timeout(Some(self.timeout)))
                .map_err(|e| failed(self.what, "connect", &e))?;
            *slot = Some(c);
        }
        let Some(c) = slot.as_mut() else {
            return Err(HostError::new(format!("{} connect failed", self.what)));
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        f(c).inspect_err(|_| *slot = None)
            .map_err(|e| failed(self.what, "call", &e))
    }
}
