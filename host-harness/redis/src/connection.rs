//! One Redis connection, shared by a service's calls: to one redis-server or to a Redis
//! Cluster, connected on first use, dropped on any failure (the next call connects afresh:
//! Redis restarted, a timeout), every call bounded by the timeout, and counted.
//!
//! A call is one round trip: a pipeline sent as one packet and answered in order. On a
//! Cluster the `redis` crate's connection routes the whole packet by its first command's key
//! (its slot's master), follows `MOVED` and `ASK` (refreshing its slot map) and reconnects, so
//! a `WAIT` after a write reaches the node that took the write.

use mrtr_gate_core::host::HostError;
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{Connection, ConnectionLike, Pipeline, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Where the service's Redis is, as named by a URL: `redis://host:port/db` (one server), or
/// `redis-cluster://host:port,host:port,…/` (a Cluster, by any of its nodes; user and
/// password, when given, `redis-cluster://user:pass@host:port,…/`, are every node's).
#[derive(Clone)]
pub(crate) enum Target {
    Single(redis::Client),
    Cluster(ClusterClient),
}

/// The scheme that names a Cluster.
pub const CLUSTER_SCHEME: &str = "redis-cluster://";

impl Target {
    pub(crate) fn parse(url: &str, timeout: Duration, what: &str) -> Result<Self, HostError> {
        let Some(rest) = url.strip_prefix(CLUSTER_SCHEME) else {
            return redis::Client::open(url)
                .map(Self::Single)
                .map_err(|e| failed(what, "open", &e));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (auth, hosts) = match rest.rsplit_once('@') {
            Some((auth, hosts)) => (format!("{auth}@"), hosts),
            None => (String::new(), rest),
        };
        if hosts.is_empty() || hosts.contains(['/', '?', '#']) {
            return Err(HostError::new(format!(
                "{what} open failed: a cluster URL is {CLUSTER_SCHEME}host:port,host:port,…/"
            )));
        }
        let nodes: Vec<String> = hosts
            .split(',')
            .map(|h| format!("redis://{auth}{h}/"))
            .collect();
        // Few retries: each is a redirection followed, a slot map refreshed or a reconnect,
        // and the call's timeout bounds every attempt, not their sum. The crate waits before
        // retrying a node that said the cluster is down or to try again (1.28 s at least, by
        // default); here at most a quarter of the timeout, so a call fails within a few
        // timeouts and the gate denies rather than sits on its thread.
        let quarter = u64::try_from((timeout / 4).as_millis()).unwrap_or(u64::MAX);
        ClusterClient::builder(nodes)
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(4)
            .min_retry_wait(1)
            .max_retry_wait(quarter.max(2))
            .build()
            .map(Self::Cluster)
            .map_err(|e| failed(what, "open", &e))
    }

    fn connect(&self, timeout: Duration) -> redis::RedisResult<Live> {
        match self {
            Self::Single(client) => {
                let c = client.get_connection_with_timeout(timeout)?;
                c.set_read_timeout(Some(timeout))?;
                c.set_write_timeout(Some(timeout))?;
                Ok(Live::Single(c))
            }
            Self::Cluster(client) => {
                let c = client.get_connection()?;
                c.set_read_timeout(Some(timeout))?;
                c.set_write_timeout(Some(timeout))?;
                Ok(Live::Cluster(Box::new(c)))
            }
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

enum Live {
    Single(Connection),
    Cluster(Box<ClusterConnection>),
}

impl Live {
    fn as_dyn(&mut self) -> &mut dyn ConnectionLike {
        match self {
            Self::Single(c) => c,
            Self::Cluster(c) => c.as_mut(),
        }
    }
}

pub(crate) struct Conn {
    target: Target,
    timeout: Duration,
    slot: Mutex<Option<Live>>,
    calls: AtomicU64,
    /// Connections made so far: a service that remembers what it told Redis (the storage's
    /// tags) forgets it when this moves, since a new connection may reach a Redis that lost it.
    lives: AtomicU64,
    pub(crate) what: &'static str,
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
        let conn = Self {
            target: Target::parse(url, timeout, what)?,
            timeout,
            slot: Mutex::new(None),
            calls: AtomicU64::new(0),
            lives: AtomicU64::new(0),
            what,
        };
        conn.with(|c| redis::cmd("PING").query::<()>(c))?;
        Ok(conn)
    }

    pub(crate) fn is_cluster(&self) -> bool {
        self.target.is_cluster()
    }

    /// Calls made so far.
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Connections made so far (see [`Conn::lives`]).
    pub(crate) fn lives(&self) -> u64 {
        self.lives.load(Ordering::Relaxed)
    }

    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T, HostError> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let live = match &mut *slot {
            Some(live) => live,
            empty @ None => {
                let live = self
                    .target
                    .connect(self.timeout)
                    .map_err(|e| failed(self.what, "connect", &e))?;
                self.lives.fetch_add(1, Ordering::Relaxed);
                empty.insert(live)
            }
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        let result = f(live.as_dyn());
        result
            .inspect_err(|_| *slot = None)
            .map_err(|e| failed(self.what, "call", &e))
    }
}

/// Sends `pipe` as one packet and returns each command's reply (an error reply is an error).
/// Unlike `Pipeline::query` this works on a Cluster connection too, which routes the packet
/// by its first command.
pub(crate) fn send(pipe: &Pipeline, c: &mut dyn ConnectionLike) -> redis::RedisResult<Vec<Value>> {
    let n = pipe.len();
    let replies = c.req_packed_commands(&pipe.get_packed_pipeline(), 0, n)?;
    replies.into_iter().map(Value::extract_error).collect()
}

/// A write script in one round trip: the commands `before` adds (their replies dropped), the
/// script (by its digest; by its source when the server lacks it, which loads it), then the
/// `WAIT` of `options`, checked. Returns the script's reply.
pub(crate) fn write_script(
    conn: &Conn,
    options: &crate::Options,
    before: &dyn Fn(&mut Pipeline),
    (script, source): (&redis::Script, &str),
    keys: &[String],
    args: &[String],
) -> Result<Value, HostError> {
    let pipe = |loaded: bool| {
        let mut pipe = redis::pipe();
        before(&mut pipe);
        let skip = pipe.len();
        if loaded {
            pipe.cmd("EVALSHA").arg(script.get_hash());
        } else {
            pipe.cmd("EVAL").arg(source);
        }
        pipe.arg(keys.len()).arg(keys).arg(args);
        options.wait(&mut pipe);
        (pipe, skip)
    };
    let (replies, skip) = conn.with(|c| {
        let (first, skip) = pipe(true);
        match send(&first, c) {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                let (again, _) = pipe(false);
                send(&again, c).map(|r| (r, skip))
            }
            other => other.map(|r| (r, skip)),
        }
    })?;
    let mut rest = replies.into_iter().skip(skip);
    let reply = rest
        .next()
        .ok_or_else(|| HostError::new(format!("{} returned a short reply", conn.what)))?;
    options.confirmed(&rest.collect::<Vec<_>>(), conn.what)?;
    Ok(reply)
}
