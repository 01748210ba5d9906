//! The proxy's core, free of any transport: it is handed one message at a time, from the
//! client or from the server, and says where what comes of it goes. The stdio wrapper and the
//! HTTP endpoint feed it lines and bodies; everything the gate decides is decided here.
//!
//! A gated request (`tools/call`, `prompts/get`, `resources/read`) is registered under an id
//! the proxy mints ([`crate::ids`]) and the gate's text goes upstream; its response goes to
//! the gate as received, and what the gate accepts reaches the client byte-exact but for the
//! client's id put back. What the gate refuses never reaches the client: it gets a JSON-RPC
//! error carrying the gate's code ([`crate::errors`]), and the binding ends.
//!
//! Not yet here (issue 25, next): the client's retry matched to its open round (until then a
//! retry is registered like a new request, which the gate refuses with
//! `params_carry_mrtr_fields`, and nothing goes upstream), ungated results checked for
//! `input_required`, and an audited refusal of a server's own requests.

use crate::errors::Refusal;
use crate::ids::{IdMinter, MINTED_PREFIX, splice_id};
use crate::message::{FromClient, FromServer, from_client, from_server};
use mrtr_gate_host::GateApi;
use mrtr_gate_host::core::{
    CallerOutcome, FinishRequest, Policy, Registration, RequestId, ResponseVerdict, ServerIdentity,
};
use std::collections::HashMap;

/// What the engine binds every call to.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The upstream as configured (the spawned command, the `--upstream` URL), never what
    /// the server or the client says about it.
    pub server: ServerIdentity,
    /// Who calls are bound to when the transport names nobody ([`Engine::on_client`]).
    pub principal: Principal,
    /// Every binding's policy.
    pub policy: Policy,
}

/// Who a gated call is bound to: the user and tenant as the gate binds them (keyed
/// pseudonyms when there are host keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The user.
    pub user: String,
    /// The tenant.
    pub tenant: String,
}

/// Where a message goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// This text goes to the server as it came.
    ToServer(String),
    /// The gate's text goes to the server, under the id the proxy minted for it (a transport
    /// that can tell a call was abandoned ends it with [`Engine::on_cancel`]).
    Gated {
        /// The request to send.
        text: String,
        /// Its id upstream.
        upstream_id: RequestId,
    },
    /// This text goes to the client.
    ToClient(String),
    /// Nothing goes anywhere (the reason, for the log).
    Drop(&'static str),
}

/// A gated call of the client's, by the id it went upstream under.
#[derive(Clone, Debug)]
struct Call {
    /// The client's id, its exact JSON text.
    client_id: String,
    /// Who the binding is bound to.
    principal: Principal,
}

/// The 2025-era requests a server sends for input, which 2026-07-28 carries in
/// `input_required` results instead: answered by the client, they would reach the user
/// around the gate.
const INPUT_REQUESTS_OF_OLD: [&str; 3] =
    ["elicitation/create", "sampling/createMessage", "roots/list"];

/// The proxy's state for one upstream and one principal.
pub struct Engine<G> {
    gate: G,
    config: EngineConfig,
    ids: IdMinter,
    /// Gated requests sent upstream and not yet answered.
    in_flight: HashMap<RequestId, Call>,
    /// Calls whose last answer was an accepted round: their bindings are open in the gate.
    open_rounds: HashMap<RequestId, Call>,
}

impl<G> std::fmt::Debug for Engine<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("server", &self.config.server)
            .field("in_flight", &self.in_flight.len())
            .field("open_rounds", &self.open_rounds.len())
            .finish_non_exhaustive()
    }
}

impl<G: GateApi> Engine<G> {
    /// An engine over `gate`, minting with `ids`.
    pub fn new(gate: G, config: EngineConfig, ids: IdMinter) -> Self {
        Self {
            gate,
            config,
            ids,
            in_flight: HashMap::new(),
            open_rounds: HashMap::new(),
        }
    }

    /// Gated requests awaiting their response.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Calls with an accepted round open.
    pub fn open_rounds(&self) -> usize {
        self.open_rounds.len()
    }

    /// A message from the client, whose calls are bound to the configured principal.
    pub fn on_client(&mut self, text: &str) -> Action {
        let principal = self.config.principal.clone();
        self.on_client_as(&principal, text)
    }

    /// A message from the client, whose calls are bound to `principal` (an HTTP front that
    /// authenticated the caller names it per request).
    pub fn on_client_as(&mut self, principal: &Principal, text: &str) -> Action {
        match from_client(text) {
            Err((raw_id, refusal)) => Action::ToClient(refusal.response(&raw_id)),
            Ok(FromClient::Relay) => Action::ToServer(text.to_owned()),
            Ok(FromClient::Gated {
                raw_id,
                method,
                params,
            }) => self.register(principal, raw_id, method, params),
        }
    }

    fn register(
        &mut self,
        principal: &Principal,
        raw_id: &str,
        method: String,
        params: Option<&str>,
    ) -> Action {
        let minted = self.ids.mint();
        let registration = Registration {
            request_id: minted.clone(),
            server: self.config.server.clone(),
            user: principal.user.clone(),
            tenant: principal.tenant.clone(),
            method,
            // No params is no params: the gate refuses the request, it is not made up.
            params_json: params.unwrap_or("null").to_owned(),
            policy: self.config.policy.clone(),
        };
        match self.gate.register(registration) {
            Ok(registered) => {
                let call = Call {
                    client_id: raw_id.to_owned(),
                    principal: principal.clone(),
                };
                self.in_flight.insert(minted.clone(), call);
                Action::Gated {
                    text: registered.request_json,
                    upstream_id: minted,
                }
            }
            Err(d) => Action::ToClient(Refusal::from_denial(&d).response(raw_id)),
        }
    }

    /// A message from the server.
    pub fn on_server(&mut self, text: &str) -> Action {
        match from_server(text) {
            FromServer::Response(Some(id)) if self.in_flight.contains_key(&id) => {
                self.judge(id, text)
            }
            // A minted id no call waits on: a second answer to a call already answered (or
            // one made up). The client never sent that id; only the gate's one answer counts.
            FromServer::Response(Some(RequestId::Text(id))) if id.starts_with(MINTED_PREFIX) => {
                Action::Drop("a response to no gated request in flight")
            }
            // A response to a request relayed as it came carries the client's own id; one
            // without a readable id (`null`: the server could not read a request) is the
            // client's to make sense of.
            FromServer::Response(_) | FromServer::Notification => Action::ToClient(text.to_owned()),
            FromServer::Request(raw_id, method) => {
                if INPUT_REQUESTS_OF_OLD.contains(&method.as_str()) {
                    Action::ToServer(unknown_method(&raw_id))
                } else {
                    Action::ToClient(text.to_owned())
                }
            }
            FromServer::Unreadable => match self.only_in_flight() {
                // With one gated request outstanding nobody else can the message be for: the
                // gate names what is wrong with it, and the call ends.
                Some(id) => self.judge(id, text),
                None => Action::Drop("an unreadable message from the server"),
            },
        }
    }

    fn only_in_flight(&self) -> Option<RequestId> {
        let mut ids = self.in_flight.keys();
        match (ids.next(), ids.next()) {
            (Some(id), None) => Some(id.clone()),
            _ => None,
        }
    }

    /// The gate judges the response to the gated request `id`.
    fn judge(&mut self, id: RequestId, text: &str) -> Action {
        let Some(call) = self.in_flight.remove(&id) else {
            return Action::Drop("a response to no request in flight");
        };
        let verdict = self.gate.accept_response(&self.config.server, text);
        match verdict {
            Ok(verdict) => match splice_id(text, &call.client_id) {
                Ok(judged) => {
                    if matches!(verdict, ResponseVerdict::InputRequired(_)) {
                        self.open_rounds.insert(id, call);
                    }
                    Action::ToClient(judged)
                }
                // The gate accepted a message whose id it read; the proxy reads the same
                // text with the same parser, so this is a fault of the proxy's, not the
                // server's, and the call cannot go on.
                Err(_) => {
                    self.end(
                        &id,
                        &call.principal,
                        CallerOutcome::Error("proxy_fault".into()),
                    );
                    let refusal = Refusal::upstream(
                        "invalid_message",
                        "the answer's id could not be replaced",
                    );
                    Action::ToClient(refusal.response(&call.client_id))
                }
            },
            Err(denial) => {
                // Most refusals end the binding in the gate; the rest (a duplicate round)
                // keep it, and the proxy gives it up here. Either way nothing more is sent.
                self.end(
                    &id,
                    &call.principal,
                    CallerOutcome::Error("gate_refused".into()),
                );
                Action::ToClient(Refusal::from_denial(&denial).response(&call.client_id))
            }
        }
    }

    /// The client abandoned the call sent upstream as `upstream_id` (it closed the exchange,
    /// or cancelled it): its binding ends `cancelled`. Nothing is sent to anyone.
    pub fn on_cancel(&mut self, upstream_id: &RequestId) {
        let call = match self.in_flight.remove(upstream_id) {
            Some(call) => call,
            None => match self.open_rounds.remove(upstream_id) {
                Some(call) => call,
                None => return,
            },
        };
        self.end(upstream_id, &call.principal, CallerOutcome::Cancelled);
    }

    /// The client went away: every call of its ends `cancelled`.
    pub fn on_client_gone(&mut self) {
        let calls: Vec<(RequestId, Call)> = self
            .in_flight
            .drain()
            .chain(self.open_rounds.drain())
            .collect();
        for (id, call) in calls {
            self.end(&id, &call.principal, CallerOutcome::Cancelled);
        }
    }

    /// The server went away: every call in flight gets an error (a call whose round the
    /// client holds was answered already), every binding ends.
    pub fn on_server_gone(&mut self) -> Vec<String> {
        let rounds: Vec<(RequestId, Call)> = self.open_rounds.drain().collect();
        for (id, call) in rounds {
            self.end(
                &id,
                &call.principal,
                CallerOutcome::Error("server_closed".into()),
            );
        }
        let calls: Vec<(RequestId, Call)> = self.in_flight.drain().collect();
        let refusal = Refusal::upstream("server_closed", "the server went away");
        let mut replies = Vec::new();
        for (id, call) in calls {
            self.end(
                &id,
                &call.principal,
                CallerOutcome::Error("server_closed".into()),
            );
            replies.push(refusal.response(&call.client_id));
        }
        replies
    }

    fn end(&mut self, id: &RequestId, principal: &Principal, outcome: CallerOutcome) {
        // A binding the gate already ended answers `unknown_request`: nothing is left to end.
        let _ = self.gate.finish(FinishRequest {
            server: self.config.server.clone(),
            request_id: id.clone(),
            user: principal.user.clone(),
            tenant: principal.tenant.clone(),
            outcome,
        });
    }
}

/// The answer to a server's request the client must not see: unknown method, as the
/// 2026-07-28 client the proxy speaks for answers it.
fn unknown_method(raw_id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{raw_id},"error":{{"code":-32601,"message":"this client takes input only through input_required results"}}}}"#
    )
}

#[path = "engine_transport.rs"]
mod transport;

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
