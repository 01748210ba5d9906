//! The host services a command runs its gates over, picked from its flags: the store (in
//! memory, or Redis shared by every process of a deployment), the audit sink (in memory, a
//! JSON-lines file, or one Redis trail), both under the host keys when there are keys, and
//! the pseudonyms the gate binds and the trail digests instead of the user and tenant.
//! `mrtr-gate call` builds one gate over them; `mrtr-gate proxy` builds a pool, one store
//! and one sink connection per gate ([`Wired::services_for_another_gate`]).

use crate::keys::{KeyOptions, Keyed};
use mrtr_gate_client::transport::isolation::{self, Isolation, RunAs};
use mrtr_gate_host::host_keys::{AnchoredAudit, AuthenticatedStorage, Pseudonyms};
use mrtr_gate_host::reference_hosts::{FileAudit, MemoryAudit, MemoryStorage};
use mrtr_gate_host::services::{SharedAudit, SharedClock, SharedConsent, SharedStorage};
use mrtr_gate_host::trail_root::{RootAnchor, RootSchedule, SharedRootSink};
use mrtr_gate_host::{BindPrincipal, HostServices, Principal, core::host::HostError};
use mrtr_gate_proxy::log;
use mrtr_gate_redis::{CLUSTER_SCHEME, Options, RedisAudit, RedisStorage};
use std::path::PathBuf;
use std::sync::Arc;

/// Where the rounds and the trail of a run are kept.
#[derive(Clone, Debug, Default)]
pub struct ServiceOptions {
    /// `--audit FILE`: append the trail to this JSON-lines file.
    pub audit: Option<PathBuf>,
    /// `--redis URL` (with its namespace and trail name): rounds and the trail on Redis.
    pub redis: Option<RedisChoice>,
    /// The host keys.
    pub keys: KeyOptions,
}

/// Rounds and the trail on one Redis, shared by every process that names the same namespace
/// and trail.
#[derive(Clone, Debug)]
pub struct RedisChoice {
    /// `redis://host:port/db`, or `redis-cluster://host:port,…/`.
    pub url: String,
    /// `--redis-replicas`: how many replicas must hold a write before it counts (`None`: 1 on
    /// a Cluster, 0 on one server).
    pub replicas: Option<u32>,
    /// Every key lives under it.
    pub namespace: String,
    /// The trail's name (`mrtr-gate reconcile redis:<trail>`).
    pub trail: String,
}

/// The warning of `--redis-replicas 0` on a Cluster (stderr, every run).
pub const UNREPLICATED_WARNING: &str = "--redis-replicas 0 on a Redis Cluster: a write counts before any replica holds it, so a failover can bring back a round already used and drop audit lines already confirmed";

/// The warning of `--insecure-no-server-isolation` (stderr, every run).
pub const NO_ISOLATION_WARNING: &str = "--insecure-no-server-isolation: the server runs as this user with no sandbox: it can rewrite the audit trail and its anchor, read the host key, and open this user's terminals";

/// The services of a run, ready to put gates over.
pub struct Wired {
    keyed: Option<Keyed>,
    /// The trail file and its anchor, when the trail is a file.
    trail_files: Option<(PathBuf, Option<PathBuf>)>,
    clock: SharedClock,
    storage: SharedStorage,
    audit: SharedAudit,
    /// The same sink, for its root ([`Wired::root_schedule`]); none for a trail in memory.
    root: Option<SharedRootSink>,
    redis: Option<RedisChoice>,
    /// The Redis sink, for the sinks of the run's other gates ([`RedisAudit::another`]).
    redis_audit: Option<Arc<RedisAudit>>,
}

impl std::fmt::Debug for Wired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wired")
            .field("keyed", &self.keyed.is_some())
            .field("redis", &self.redis)
            .finish_non_exhaustive()
    }
}

impl Wired {
    /// Load the host keys (created on first use, said on stderr; `--insecure-no-host-keys`
    /// warns there) and open the store and the sink: under the keys when there are keys
    /// (values authenticated; a trail file's lines keyed beside it and its head anchored apart
    /// from it), else plain. A trail kept in memory dies with the process: there is nothing to
    /// anchor. A Redis trail is shared by processes that each hold only their own appends, so
    /// no one process can anchor it either: its lines are chained, not keyed.
    pub fn open(options: &ServiceOptions, clock: SharedClock) -> Result<Self, String> {
        if options.audit.is_some() && options.redis.is_some() {
            return Err("--audit FILE and --redis name two trails: give one".into());
        }
        let keyed = crate::keys::load(&options.keys)?;
        let mut trail_files = None;
        let mut redis_audit = None;
        let (storage, root): (SharedStorage, Option<SharedRootSink>) =
            match (&options.redis, &options.audit) {
                (Some(redis), _) => {
                    if redis.options().replicas == 0 && redis.url.starts_with(CLUSTER_SCHEME) {
                        log::warn(
                            "insecure_flag",
                            UNREPLICATED_WARNING,
                            &[("flag", "--redis-replicas")],
                        );
                    }
                    let storage = redis_storage(redis, keyed.as_ref(), &clock)?;
                    let audit = RedisAudit::connect_with(
                        &redis.url,
                        &redis.namespace,
                        &redis.trail,
                        redis.options(),
                    )
                    .map_err(|e| redis_error(&e))?;
                    let audit = Arc::new(audit);
                    redis_audit = Some(Arc::clone(&audit));
                    (storage, Some(audit))
                }
                (None, None) => (memory_storage(keyed.as_ref(), &clock), None),
                (None, Some(path)) => {
                    let (storage, audit, anchor) =
                        file_services(path, keyed.as_ref(), &options.keys, &clock)?;
                    trail_files = Some((path.clone(), anchor));
                    (storage, Some(audit))
                }
            };
        // A trail kept in memory dies with the process: it has no root worth writing.
        let audit: SharedAudit = match &root {
            Some(sink) => sink.clone(),
            None => Arc::new(MemoryAudit::new()),
        };
        Ok(Self {
            keyed,
            trail_files,
            clock,
            storage,
            audit,
            root,
            redis: options.redis.clone(),
            redis_audit,
        })
    }

    /// The trail's root (docs/audit.md, "Shards and the root"), anchored every `period` and
    /// once more when the returned schedule is dropped; none for a trail kept in memory. A
    /// failed anchor goes to `failed` (the next one tries again).
    pub fn root_schedule(
        &self,
        period: std::time::Duration,
        failed: impl Fn(&HostError) + Send + Sync + 'static,
    ) -> Option<RootSchedule> {
        let sink = self.root.clone()?;
        Some(Arc::new(RootAnchor::new(sink, self.clock.clone())).every(period, failed))
    }

    /// The four services with `consent`, over the one store and sink of the run.
    pub fn services(&self, consent: SharedConsent) -> HostServices {
        HostServices {
            clock: self.clock.clone(),
            storage: self.storage.clone(),
            consent,
            audit: self.audit.clone(),
        }
    }

    /// The admin listener's readiness check of the run's trail and store (`/readyz`): a trail
    /// file (and its links) opens for appending; a Redis store takes a write (the delete of a
    /// key nobody writes: a replica a failover left read-only refuses it, and nothing is
    /// stored).
    pub fn readiness(&self) -> (&'static str, mrtr_gate_proxy::admin::Probe) {
        if let Some((path, _)) = &self.trail_files {
            let files = match &self.keyed {
                Some(_) => vec![path.clone(), crate::keys::links_path(path)],
                None => vec![path.clone()],
            };
            return (
                "trail",
                Box::new(move || {
                    for file in &files {
                        std::fs::OpenOptions::new()
                            .append(true)
                            .open(file)
                            .map_err(|e| {
                                format!("{} cannot be appended to: {e}", file.display())
                            })?;
                    }
                    Ok(())
                }),
            );
        }
        let storage = self.storage.clone();
        (
            "store",
            Box::new(move || {
                storage
                    .write(&[mrtr_gate_core::host::Write {
                        key: READY_PROBE_KEY,
                        expected: 0,
                        value: None,
                        ttl_ms: 1,
                    }])
                    .map(|_| ())
                    .map_err(|e| format!("the store refused a write: {e}"))
            }),
        )
    }

    /// The services of one more gate of the run, with `consent`: the same rounds and the same
    /// trail, through a store connection and a sink connection of its own on Redis (one
    /// connection serialises its calls, so gates sharing one would queue behind each other's
    /// scripts; the sinks share the heads they see, [`RedisAudit::another`]); the very store
    /// and sink otherwise (one memory store, one trail file appended under its own lock).
    pub fn services_for_another_gate(
        &self,
        consent: SharedConsent,
    ) -> Result<HostServices, String> {
        let mut services = self.services(consent);
        if let (Some(redis), Some(audit)) = (&self.redis, &self.redis_audit) {
            services.storage = redis_storage(redis, self.keyed.as_ref(), &self.clock)?;
            services.audit = Arc::new(audit.another().map_err(|e| redis_error(&e))?);
        }
        Ok(services)
    }

    /// How a server this run spawns is isolated: kept from the trail's folder, the anchor's
    /// and the key file's (read-only; the key file unreadable), from terminals and from this
    /// process. `insecure_opt_out` (`--insecure-no-server-isolation`, warned on stderr every
    /// run) or a system without Landlock leaves it with a session of its own only; without
    /// Landlock, `terminal_consent` (consent typed at this process's terminal, which a server
    /// sharing it could forge) refuses to start instead, unless the server runs as another
    /// user (`server_user`, `--server-user`), which cannot reach this user's terminal.
    pub fn server_isolation(
        &self,
        insecure_opt_out: bool,
        terminal_consent: bool,
        server_user: Option<RunAs>,
    ) -> Result<Option<Isolation>, String> {
        if insecure_opt_out {
            match server_user {
                Some(user) => log::warn(
                    "insecure_flag",
                    &format!(
                        "--insecure-no-server-isolation: the server runs as uid {} with no \
                         Landlock sandbox",
                        user.uid
                    ),
                    &[("flag", "--insecure-no-server-isolation")],
                ),
                None => log::warn(
                    "insecure_flag",
                    NO_ISOLATION_WARNING,
                    &[("flag", "--insecure-no-server-isolation")],
                ),
            }
            return Ok(None);
        }
        match isolation::available() {
            Ok(()) => {
                let (trail, anchor) = match &self.trail_files {
                    Some((trail, anchor)) => (Some(trail.as_path()), anchor.as_deref()),
                    None => (None, None),
                };
                let key = self.keyed.as_ref().map(|k| k.path.as_path());
                Ok(Some(Isolation::for_files(trail, anchor, key)))
            }
            Err(_) if server_user.is_some() => Ok(None),
            Err(e) if terminal_consent => Err(format!(
                "{e}; with consent at this terminal a server sharing the user's account could \
                 forge it: run the server as another user (--server-user USER), or take consent \
                 another way, or pass --insecure-no-server-isolation"
            )),
            Err(e) => {
                log::warn(
                    "no_isolation",
                    &format!(
                        "{e}: the server runs as this user, in a session of its own but able to \
                         rewrite the trail and read the key file"
                    ),
                    &[],
                );
                Ok(None)
            }
        }
    }

    /// [`Self::principal`] as a function that outlives the run's services (an HTTP front
    /// binds each caller its trusted headers name).
    pub fn principal_binder(&self) -> BindPrincipal {
        let pseudonyms = self.keyed.as_ref().map(|k| k.pseudonyms.clone());
        Arc::new(move |user: &str, tenant: &str| bind(pseudonyms.as_ref(), user, tenant))
    }

    /// The user and tenant as the gate binds them and the trail digests them: keyed
    /// pseudonyms when there are keys, else as given.
    pub fn principal(&self, user: &str, tenant: &str) -> Principal {
        bind(self.keyed.as_ref().map(|k| &k.pseudonyms), user, tenant)
    }
}

/// The principal the gate binds for `user` and `tenant`: their keyed pseudonyms when there are
/// keys, else as given.
fn bind(pseudonyms: Option<&Pseudonyms>, user: &str, tenant: &str) -> Principal {
    match pseudonyms {
        Some(p) => Principal::new(p.user(user), p.tenant(tenant)),
        None => Principal::new(user, tenant),
    }
}

fn memory_storage(keyed: Option<&Keyed>, clock: &SharedClock) -> SharedStorage {
    let storage = MemoryStorage::new(clock.clone());
    match keyed {
        Some(k) => Arc::new(AuthenticatedStorage::new(storage, k.keys.clone())),
        None => Arc::new(storage),
    }
}

fn redis_storage(
    redis: &RedisChoice,
    keyed: Option<&Keyed>,
    clock: &SharedClock,
) -> Result<SharedStorage, String> {
    let storage =
        RedisStorage::connect_with(&redis.url, &redis.namespace, clock.clone(), redis.options())
            .map_err(|e| redis_error(&e))?;
    Ok(match keyed {
        Some(k) => Arc::new(AuthenticatedStorage::new(storage, k.keys.clone())),
        None => Arc::new(storage),
    })
}

impl RedisChoice {
    /// The services' options: the URL's defaults, `--redis-replicas` over them.
    pub fn options(&self) -> Options {
        let options = Options::for_url(&self.url);
        match self.replicas {
            Some(n) => options.replicas(n),
            None => options,
        }
    }
}

/// The key `/readyz` deletes to learn the store takes writes: no gate key has this shape.
const READY_PROBE_KEY: &str = "mrtr-gate-proxy:ready-probe";

/// The URL may carry a password: the flag is named, not the URL.
fn redis_error(e: &HostError) -> String {
    format!("--redis: {e}")
}

/// A trail file's services, and its anchor's path when it is anchored.
fn file_services(
    path: &std::path::Path,
    keyed: Option<&Keyed>,
    keys: &KeyOptions,
    clock: &SharedClock,
) -> Result<(SharedStorage, SharedRootSink, Option<PathBuf>), String> {
    let file = FileAudit::open(path)
        .map_err(|e| format!("--audit {}: {}", path.display(), crate::error_chain(&e)))?;
    let Some(k) = keyed else {
        return Ok((memory_storage(None, clock), Arc::new(file), None));
    };
    let anchor = k.anchor_path(keys, path)?;
    if let Some(dir) = anchor.parent().filter(|d| !d.as_os_str().is_empty()) {
        mrtr_gate_host::reference_hosts::create_private_dir(dir)
            .map_err(|e| format!("the anchor folder {}: {e}", dir.display()))?;
    }
    let audit = AnchoredAudit::new(
        file,
        k.keys.clone(),
        anchor.clone(),
        crate::keys::links_path(path),
    );
    // The links and the anchor are written on every round: a file that cannot be is said now.
    audit.prepare()?;
    Ok((
        memory_storage(Some(k), clock),
        Arc::new(audit),
        Some(anchor),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrtr_gate_host::reference_hosts::SystemClock;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("mrtr-gate-services-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn clock() -> SharedClock {
        Arc::new(SystemClock)
    }

    #[test]
    fn a_file_trail_and_a_redis_trail_are_not_both_taken() {
        let options = ServiceOptions {
            audit: Some(PathBuf::from("trail.jsonl")),
            redis: Some(RedisChoice {
                url: "redis://127.0.0.1:1/".into(),
                replicas: None,
                namespace: "n".into(),
                trail: "t".into(),
            }),
            keys: KeyOptions::default(),
        };
        let refused = Wired::open(&options, clock()).unwrap_err();
        assert!(refused.contains("--audit FILE and --redis"), "{refused}");
    }

    #[test]
    fn without_keys_the_principal_is_as_given_and_every_gate_shares_the_memory_store_and_sink() {
        let options = ServiceOptions {
            keys: KeyOptions {
                insecure_no_host_keys: true,
                ..KeyOptions::default()
            },
            ..ServiceOptions::default()
        };
        let wired = Wired::open(&options, clock()).unwrap();
        assert_eq!(
            wired.principal("alice", "acme"),
            Principal::new("alice", "acme")
        );
        let another = wired
            .services_for_another_gate(Arc::new(
                mrtr_gate_host::reference_hosts::DecidedConsent::new(),
            ))
            .unwrap();
        assert!(Arc::ptr_eq(&another.storage, &wired.storage));
        assert!(Arc::ptr_eq(&another.audit, &wired.audit));
    }

    #[test]
    fn on_redis_every_more_gate_has_a_store_and_a_sink_connection_of_its_own() {
        let Ok(url) = std::env::var("MRTR_GATE_REDIS_URL") else {
            assert!(
                std::env::var_os("CI").is_none(),
                "MRTR_GATE_REDIS_URL is not set (scripts/redis start)"
            );
            mrtr_gate_host::say!("MRTR_GATE_REDIS_URL is not set: skipped");
            return;
        };
        let options = ServiceOptions {
            keys: KeyOptions {
                insecure_no_host_keys: true,
                ..KeyOptions::default()
            },
            redis: Some(RedisChoice {
                url,
                replicas: None,
                namespace: format!("services-{}", std::process::id()),
                trail: "gates".into(),
            }),
            audit: None,
        };
        let wired = Wired::open(&options, clock()).unwrap();
        let consent = Arc::new(mrtr_gate_host::reference_hosts::DecidedConsent::new());
        let another = wired.services_for_another_gate(consent).unwrap();
        assert!(!Arc::ptr_eq(&another.storage, &wired.storage));
        assert!(!Arc::ptr_eq(&another.audit, &wired.audit));
    }

    #[test]
    fn under_keys_the_principal_is_a_stable_pseudonym_and_a_file_trail_is_anchored_apart() {
        let dir = scratch("keys");
        let keys = KeyOptions {
            key_file: Some(dir.join("host-keys.json")),
            anchor: Some(dir.join("anchors").join("trail.anchor")),
            ..KeyOptions::default()
        };
        let options = ServiceOptions {
            audit: Some(dir.join("trail.jsonl")),
            redis: None,
            keys,
        };
        let wired = Wired::open(&options, clock()).unwrap();
        let bound = wired.principal("alice", "acme");
        assert!(bound.user != "alice" && bound.tenant != "acme");
        assert_eq!(wired.principal("alice", "acme"), bound);
        // Trusted headers are bound the same way.
        assert_eq!((wired.principal_binder())("alice", "acme"), bound);
        // The anchor's folder is made before the first event needs it.
        assert!(dir.join("anchors").is_dir());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_redis_that_cannot_be_reached_is_named_by_its_flag_not_its_url() {
        let options = ServiceOptions {
            redis: Some(RedisChoice {
                url: "redis://user:secret@127.0.0.1:1/".into(),
                replicas: None,
                namespace: "n".into(),
                trail: "t".into(),
            }),
            keys: KeyOptions {
                insecure_no_host_keys: true,
                ..KeyOptions::default()
            },
            ..ServiceOptions::default()
        };
        let refused = Wired::open(&options, clock()).unwrap_err();
        assert!(refused.starts_with("--redis: "), "{refused}");
        assert!(!refused.contains("secret"), "{refused}");
    }
}
