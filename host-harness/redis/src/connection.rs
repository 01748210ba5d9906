//! One Redis connection, shared by a service's calls: connected on first use, dropped on
//! any failure (the next call connects afresh: Redis restarted, a timeout), every call
//! bounded by the timeout, and counted. On connecting it reads the server's run id (new on
//! every start of a redis-server), which the storage's scripts use to tell a restart.

use mrtr_gate_core::host::HostError;
use redis::Connection;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

pub(crate) struct Conn {
    client: redis::Client,
    timeout: Duration,
    /// The connection and the run id of the server it reached ("" when `INFO` is refused).
    slot: Mutex<Option<(Connection, String)>>,
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
        self.with_run_id(|c, _| f(c))
    }

    /// [`Self::with`], also given the run id of the server the connection reached.
    pub(crate) fn with_run_id<T>(
        &self,
        f: impl FnOnce(&mut Connection, &str) -> redis::RedisResult<T>,
    ) -> Result<T, HostError> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            let mut c = self
                .client
                .get_connection_with_timeout(self.timeout)
                .map_err(|e| failed(self.what, "connect", &e))?;
            c.set_read_timeout(Some(self.timeout))
                .and_then(|()| c.set_write_timeout(Some(self.timeout)))
                .map_err(|e| failed(self.what, "connect", &e))?;
            let run_id = run_id(&mut c)?;
            *slot = Some((c, run_id));
        }
        let Some((c, run_id)) = slot.as_mut() else {
            return Err(HostError::new(format!("{} connect failed", self.what)));
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        let run_id: &str = run_id;
        let result = f(c, run_id);
        result
            .inspect_err(|_| *slot = None)
            .map_err(|e| failed(self.what, "call", &e))
    }
}

/// The run id of the server `c` reached, from `INFO server`: "" when the server refuses
/// `INFO` (a managed Redis may rename it), then not checked; a connection that fails
/// here fails as a connect.
fn run_id(c: &mut Connection) -> Result<String, HostError> {
    match redis::cmd("INFO").arg("server").query::<String>(c) {
        Ok(info) => Ok(info
            .lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .map(|id| id.trim().to_owned())
            .unwrap_or_default()),
        Err(e) if e.is_io_error() || e.is_timeout() => Err(failed("redis", "connect", &e)),
        Err(_) => Ok(String::new()),
    }
}
