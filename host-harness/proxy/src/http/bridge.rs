//! The engines, each on a thread of its own, and the handle every connection task talks to
//! them through. Gate calls are synchronous (the component's deadline reads the calling
//! thread's CPU clock) and an engine is not `Send`: one thread owns each, and the async tasks
//! send it jobs and await its answers, so a gate call never holds up the runtime's threads.
//!
//! A pool of engines ([`Bridge::start_pool`]), each its own gate instance over the one store
//! and trail, serves many clients as replicas on one Redis do: a round opened through one
//! engine is found by another through the store. A client's messages go to one engine (a
//! protocol session's to the engine its id hashes to, [`Bridge::for_session`]; others to
//! their connection's, engines given to connections in turn, [`Bridge::pick`]), and everything
//! that follows from one (the upstream's answer, a failure, a cancel, the server's requests on
//! its stream, a consent asked for it) to that same engine; a client's answer to a server request goes to the engine that showed
//! the request (each is asked in turn: only that one knows it); a session's end to every one.
//!
//! The thread also keeps which open rounds came under which 2025-era protocol session, so a
//! DELETE of the session ends them, and runs the engine's sweep (expired bindings ended).

use crate::consent::DeferredConsent;
use crate::engine::{Action, Engine, Principal};
use crate::errors::{HOST_FAILED, Refusal};
use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::RequestId;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Instant;
use tokio::sync::oneshot;

enum Job {
    Client {
        principal: Option<Principal>,
        session: Option<String>,
        text: String,
        reply: oneshot::Sender<Action>,
    },
    Server {
        principal: Option<Principal>,
        session: Option<String>,
        text: String,
        reply: oneshot::Sender<Action>,
    },
    Response {
        upstream_id: RequestId,
        text: String,
        session: Option<String>,
        reply: oneshot::Sender<Action>,
    },
    Failed {
        upstream_id: RequestId,
        refusal: Refusal,
        reply: oneshot::Sender<Action>,
    },
    Cancel(RequestId),
    EndSession(String),
    /// The proxy stops: every call and open round ends `cancelled`.
    Drain(oneshot::Sender<()>),
}

/// The engine's thread is gone (it cannot be while a handle lives, unless it panicked).
pub fn engine_gone() -> Refusal {
    Refusal {
        rpc_code: HOST_FAILED,
        code: "proxy_failed".into(),
        cause: "host",
        message: "the proxy's gate is not running".into(),
        audited: false,
    }
}

/// How many times one client message may come back for a decision ([`Action::AskConsent`]):
/// a retry tries at most four rounds filed under its key, each asked at most once.
const CONSENT_PASSES: usize = 5;

/// One engine's thread: where its jobs go, and its deferred consent (asked off its thread).
#[derive(Debug)]
struct Handle {
    jobs: std::sync::mpsc::Sender<Job>,
    consent: Option<Arc<DeferredConsent>>,
}

/// A handle on the engines' threads: the whole pool, or one engine of it ([`Bridge::pick`]).
#[derive(Clone, Debug)]
pub struct Bridge {
    engines: Arc<[Handle]>,
    /// The engine this handle sends to; `None`: the pool.
    pinned: Option<usize>,
    /// The engine the pool's next client message goes to.
    next: Arc<AtomicUsize>,
}

impl Bridge {
    /// Start the thread that owns the engine `make_engine` builds.
    pub fn start<G, F>(make_engine: F) -> Result<Self, String>
    where
        G: GateApi + 'static,
        F: FnOnce() -> Engine<G> + Send + 'static,
    {
        Ok(Self::from_handles(vec![spawn(0, make_engine)?]))
    }

    /// Start `engines` threads (at least one), each owning the engine `make_engine` builds
    /// for its index.
    pub fn start_pool<G, F>(engines: usize, make_engine: F) -> Result<Self, String>
    where
        G: GateApi + 'static,
        F: Fn(usize) -> Engine<G> + Send + Sync + 'static,
    {
        let make_engine = Arc::new(make_engine);
        let handles = (0..engines.max(1))
            .map(|i| {
                let make_engine = Arc::clone(&make_engine);
                spawn(i, move || make_engine(i))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::from_handles(handles))
    }

    fn from_handles(handles: Vec<Handle>) -> Self {
        Self {
            engines: handles.into(),
            pinned: None,
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// This handle held to the engine of the protocol session `session`: a pinned handle's
    /// own; else always the same engine of the pool for a session (its id's hash), so a
    /// client's rounds are opened and retried on one engine, which holds them decoded and
    /// knows the trail's head (a round retried on another reads its record again and checks
    /// it, and that engine's first append learns the head: docs/performance.md, "The proxy").
    #[must_use]
    pub fn for_session(&self, session: &str) -> Self {
        if self.pinned.is_some() {
            return self.clone();
        }
        use std::hash::{BuildHasher, BuildHasherDefault};
        let hash = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one(session);
        let n = self.engines.len().max(1) as u64;
        Self {
            pinned: usize::try_from(hash % n).ok(),
            ..self.clone()
        }
    }

    /// This handle held to one engine: a pinned handle's own; else the next in turn.
    #[must_use]
    pub fn pick(&self) -> Self {
        let at = self.pinned.unwrap_or_else(|| {
            self.next.fetch_add(1, Ordering::Relaxed) % self.engines.len().max(1)
        });
        Self {
            pinned: Some(at),
            ..self.clone()
        }
    }

    /// The engines a job may go to: the pinned one, or every one.
    fn targets(&self) -> impl Iterator<Item = &Handle> {
        let (skip, take) = match self.pinned {
            Some(at) => (at, 1),
            None => (0, self.engines.len()),
        };
        self.engines.iter().skip(skip).take(take)
    }

    /// The job to one engine: the pinned one, or the pool's next.
    async fn ask(&self, job: impl FnOnce(oneshot::Sender<Action>) -> Job) -> Action {
        let picked = self.pick();
        let Some(handle) = picked.targets().next() else {
            return Action::Drop("the gate's thread is gone");
        };
        Self::ask_one(handle, job).await
    }

    async fn ask_one(handle: &Handle, job: impl FnOnce(oneshot::Sender<Action>) -> Job) -> Action {
        let (reply, answer) = oneshot::channel();
        if handle.jobs.send(job(reply)).is_err() {
            return Action::Drop("the gate's thread is gone");
        }
        answer
            .await
            .unwrap_or(Action::Drop("the gate's thread is gone"))
    }

    /// The deferred consent of the engine this handle sends to (every engine of a pool is
    /// built with the same one).
    fn consent(&self) -> Option<&Arc<DeferredConsent>> {
        self.targets().next().and_then(|h| h.consent.as_ref())
    }

    /// The client's answer to a server request: to each engine this handle reaches in turn,
    /// until one knows the request (only the one that showed it does; the others let it go
    /// untouched).
    pub async fn client_answer(
        &self,
        principal: Option<Principal>,
        session: Option<String>,
        text: String,
    ) -> Action {
        let mut last = Action::Drop("the gate's thread is gone");
        for handle in self.targets() {
            last = Self::ask_one(handle, |reply| Job::Client {
                principal: principal.clone(),
                session: session.clone(),
                text: text.clone(),
                reply,
            })
            .await;
            if !matches!(last, Action::Drop(_)) {
                break;
            }
        }
        last
    }

    /// A client's message, bound to `principal` (`None`: the configured one), under the
    /// protocol session `session`. A retry whose consent is deferred waits here, on a blocking
    /// thread of its own, while the person or the hook decides; every other client's messages
    /// go on meanwhile.
    pub async fn client(
        &self,
        principal: Option<Principal>,
        session: Option<String>,
        text: String,
    ) -> Action {
        // Every pass to one engine: a decision made for its prompt is asked for there.
        let pinned = self.pick();
        let mut passes = 0;
        loop {
            let action = pinned
                .ask(|reply| Job::Client {
                    principal: principal.clone(),
                    session: session.clone(),
                    text: text.clone(),
                    reply,
                })
                .await;
            // Past the passes a retry can need, what is left undecided is refused as such.
            let (Action::AskConsent(prompt, trace), Some(consent), true) =
                (&action, pinned.consent(), passes < CONSENT_PASSES)
            else {
                return action;
            };
            passes += 1;
            let (consent, prompt, trace) = (Arc::clone(consent), prompt.clone(), trace.clone());
            // The decision's span under the call's.
            if tokio::task::spawn_blocking(move || {
                let _current = trace.attach();
                consent.ask(&prompt)
            })
            .await
            .is_err()
            {
                return action;
            }
        }
    }

    /// A server's message that answers no call of the proxy's (a request, a notification), on
    /// a stream a client opened as `principal` (`None`: the configured one) under the
    /// protocol session `session`.
    pub async fn server(
        &self,
        principal: Option<Principal>,
        session: Option<String>,
        text: String,
    ) -> Action {
        self.ask(|reply| Job::Server {
            principal,
            session,
            text,
            reply,
        })
        .await
    }

    /// The one response to the gated call `upstream_id`, which the transport has read as a
    /// response under that id; made under `session` (a 2025-era protocol session), if any.
    pub async fn response(
        &self,
        upstream_id: RequestId,
        text: String,
        session: Option<String>,
    ) -> Action {
        self.ask(|reply| Job::Response {
            upstream_id,
            text,
            session,
            reply,
        })
        .await
    }

    /// The gated call `upstream_id` got no answer the gate could judge.
    pub async fn failed(&self, upstream_id: RequestId, refusal: Refusal) -> Action {
        self.ask(|reply| Job::Failed {
            upstream_id,
            refusal,
            reply,
        })
        .await
    }

    /// The client abandoned the gated call `upstream_id` (sent through the engine this handle
    /// is pinned to: the one that sent it).
    pub fn cancel(&self, upstream_id: RequestId) {
        if let Some(handle) = self.pick().targets().next() {
            let _ = handle.jobs.send(Job::Cancel(upstream_id));
        }
    }

    /// The proxy stops: every engine of the pool ends the calls and open rounds it holds
    /// `cancelled` (in the trail), and this returns once all have.
    pub async fn drain(&self) {
        let mut done = Vec::new();
        for handle in self.engines.iter() {
            let (reply, ended) = oneshot::channel();
            if handle.jobs.send(Job::Drain(reply)).is_ok() {
                done.push(ended);
            }
        }
        for ended in done {
            let _ = ended.await;
        }
    }

    /// The upstream ended the protocol session `session`: its open rounds end `cancelled`, on
    /// every engine that opened one.
    pub fn end_session(&self, session: String) {
        for handle in self.engines.iter() {
            let _ = handle.jobs.send(Job::EndSession(session.clone()));
        }
    }
}

/// The thread that owns engine `index`, built by `make_engine` on it.
fn spawn<G, F>(index: usize, make_engine: F) -> Result<Handle, String>
where
    G: GateApi + 'static,
    F: FnOnce() -> Engine<G> + Send + 'static,
{
    let (jobs, inbox) = std::sync::mpsc::channel();
    let (started, consent) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(format!("mrtr-gate-engine-{index}"))
        .spawn(move || {
            let engine = make_engine().shared_by_many_clients();
            let _ = started.send(engine.deferred_consent());
            run(engine, &inbox);
        })
        .map_err(|e| format!("could not start the gate's thread: {e}"))?;
    let consent = consent
        .recv()
        .map_err(|_| "the gate's thread did not start".to_owned())?;
    Ok(Handle { jobs, consent })
}

/// The engine's thread: one job at a time, in the order they came, and the engine's sweep
/// between them every little while.
fn run<G: GateApi>(mut engine: Engine<G>, inbox: &std::sync::mpsc::Receiver<Job>) {
    let mut sessions: HashMap<String, Vec<RequestId>> = HashMap::new();
    let mut swept = Instant::now();
    loop {
        if swept.elapsed() >= engine.sweep_every() {
            engine.sweep();
            prune_sessions(&mut sessions, |id| engine.is_open(id));
            swept = Instant::now();
        }
        let job = match inbox.recv_timeout(engine.sweep_every()) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // A caller that went away has nobody left to tell.
        match job {
            Job::Client {
                principal,
                session,
                text,
                reply,
            } => {
                let principal = principal.unwrap_or_else(|| engine.principal().clone());
                let action = engine.on_client_in(&principal, session.as_deref(), &text);
                // A client gone while its call was being registered never sends it: the
                // binding ends here rather than at its expiry.
                if let Err(Action::Gated { upstream_id, .. }) = reply.send(action) {
                    engine.on_cancel(&upstream_id);
                }
            }
            Job::Server {
                principal,
                session,
                text,
                reply,
            } => {
                let principal = principal.unwrap_or_else(|| engine.principal().clone());
                let action = engine.on_server_in(&principal, session.as_deref(), &text);
                let _ = reply.send(action);
            }
            Job::Response {
                upstream_id,
                text,
                session,
                reply,
            } => {
                let action = engine.on_server(&text);
                if let Some(session) = session {
                    let ids = sessions.entry(session.clone()).or_default();
                    // Only rounds still open are worth ending; the rest are let go here, so
                    // a session that is never deleted keeps no more than its open rounds.
                    ids.retain(|id| engine.is_open(id));
                    if engine.is_open(&upstream_id) {
                        ids.push(upstream_id.clone());
                    }
                    if ids.is_empty() {
                        sessions.remove(&session);
                    }
                }
                // A client gone while its answer was judged never gets the round it opened.
                if reply.send(action).is_err() {
                    engine.on_cancel(&upstream_id);
                }
            }
            Job::Failed {
                upstream_id,
                refusal,
                reply,
            } => {
                let _ = reply.send(engine.on_upstream_failed(&upstream_id, &refusal));
            }
            Job::Cancel(upstream_id) => engine.on_cancel(&upstream_id),
            Job::EndSession(session) => {
                for id in sessions.remove(&session).unwrap_or_default() {
                    engine.on_cancel(&id);
                }
            }
            Job::Drain(reply) => {
                engine.on_client_gone();
                sessions.clear();
                let _ = reply.send(());
            }
        }
    }
}

/// Keep of each session only its rounds still open, and only the sessions that have one: a
/// session whose client went without a DELETE, and is never seen again, keeps nothing once its
/// rounds have ended (answered, refused or expired by the sweep).
fn prune_sessions(
    sessions: &mut HashMap<String, Vec<RequestId>>,
    is_open: impl Fn(&RequestId) -> bool,
) {
    sessions.retain(|_, ids| {
        ids.retain(&is_open);
        !ids.is_empty()
    });
}

/// Ends a gated call `cancelled` if it is dropped before it is disarmed: hyper drops a
/// request's future when its client disconnects, and the guard goes with it.
#[derive(Debug)]
pub struct CancelGuard {
    bridge: Bridge,
    upstream_id: Option<RequestId>,
}

impl CancelGuard {
    /// A guard over the gated call `upstream_id`.
    pub fn new(bridge: Bridge, upstream_id: RequestId) -> Self {
        Self {
            bridge,
            upstream_id: Some(upstream_id),
        }
    }

    /// The call was answered (or ended otherwise): nothing to cancel.
    pub fn disarm(&mut self) {
        self.upstream_id = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(id) = self.upstream_id.take() {
            self.bridge.cancel(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_let_go_once_none_of_its_rounds_is_open() {
        let id = |n: i64| RequestId::Number(n);
        let mut sessions = HashMap::from([
            ("gone".to_owned(), vec![id(1), id(2)]),
            ("live".to_owned(), vec![id(3), id(4)]),
        ]);
        prune_sessions(&mut sessions, |i| *i == id(4));
        assert_eq!(sessions, HashMap::from([("live".to_owned(), vec![id(4)])]));
        prune_sessions(&mut sessions, |_| false);
        assert!(sessions.is_empty());
    }

    #[test]
    fn a_session_always_goes_to_one_engine_and_sessions_spread_over_the_pool() {
        let handles = (0..4)
            .map(|_| Handle {
                jobs: std::sync::mpsc::channel().0,
                consent: None,
            })
            .collect();
        let pool = Bridge::from_handles(handles);
        let engine = |b: &Bridge| b.pinned;
        for session in ["a", "b", "0123456789abcdef"] {
            let first = engine(&pool.for_session(session));
            assert!(first.is_some());
            assert_eq!(engine(&pool.for_session(session)), first);
        }
        let used: std::collections::BTreeSet<_> = (0..64)
            .filter_map(|i| engine(&pool.for_session(&format!("session-{i}"))))
            .collect();
        assert_eq!(used.len(), 4, "64 sessions over 4 engines: {used:?}");
        // Without a session (a connection's engine), in turn; a pinned handle keeps its pin.
        let turns: Vec<_> = (0..4).filter_map(|_| engine(&pool.pick())).collect();
        assert_eq!(turns, [0, 1, 2, 3]);
        let pinned = pool.pick();
        assert_eq!(engine(&pinned.for_session("a")), engine(&pinned));
    }
}
