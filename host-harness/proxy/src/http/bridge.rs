//! The engine on a thread of its own, and the handle every connection task talks to it
//! through. Gate calls are synchronous (the component's deadline reads the calling thread's
//! CPU clock) and the engine is not `Send`: one thread owns it, and the async tasks send it
//! jobs and await its answers, so a gate call never holds up the runtime's threads.
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

/// A handle on the engine's thread.
#[derive(Clone, Debug)]
pub struct Bridge {
    jobs: std::sync::mpsc::Sender<Job>,
    /// The engine's deferred consent: asked here, off its thread.
    consent: Option<Arc<DeferredConsent>>,
}

impl Bridge {
    /// Start the thread that owns the engine `make_engine` builds.
    pub fn start<G, F>(make_engine: F) -> Result<Self, String>
    where
        G: GateApi + 'static,
        F: FnOnce() -> Engine<G> + Send + 'static,
    {
        let (jobs, inbox) = std::sync::mpsc::channel();
        let (started, consent) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("mrtr-gate-engine".into())
            .spawn(move || {
                let engine = make_engine().shared_by_many_clients();
                let _ = started.send(engine.deferred_consent());
                run(engine, &inbox);
            })
            .map_err(|e| format!("could not start the gate's thread: {e}"))?;
        let consent = consent
            .recv()
            .map_err(|_| "the gate's thread did not start".to_owned())?;
        Ok(Self { jobs, consent })
    }

    async fn ask(&self, job: impl FnOnce(oneshot::Sender<Action>) -> Job) -> Action {
        let (reply, answer) = oneshot::channel();
        if self.jobs.send(job(reply)).is_err() {
            return Action::Drop("the gate's thread is gone");
        }
        answer
            .await
            .unwrap_or(Action::Drop("the gate's thread is gone"))
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
        let mut passes = 0;
        loop {
            let action = self
                .ask(|reply| Job::Client {
                    principal: principal.clone(),
                    session: session.clone(),
                    text: text.clone(),
                    reply,
                })
                .await;
            // Past the passes a retry can need, what is left undecided is refused as such.
            let (Action::AskConsent(prompt), Some(consent), true) =
                (&action, &self.consent, passes < CONSENT_PASSES)
            else {
                return action;
            };
            passes += 1;
            let (consent, prompt) = (Arc::clone(consent), prompt.clone());
            if tokio::task::spawn_blocking(move || consent.ask(&prompt))
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

    /// The client abandoned the gated call `upstream_id`.
    pub fn cancel(&self, upstream_id: RequestId) {
        let _ = self.jobs.send(Job::Cancel(upstream_id));
    }

    /// The upstream ended the protocol session `session`: its open rounds end `cancelled`.
    pub fn end_session(&self, session: String) {
        let _ = self.jobs.send(Job::EndSession(session));
    }
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
}
