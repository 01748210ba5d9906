//! Consent by policy (issue 42, docs/policy.md): Cedar rules an operator writes decide each
//! MRTR round a gate accepted, before anyone is asked. A `forbid` that holds denies the round
//! (with its id, on record); a `forbid` annotated `@ask` that holds puts the round in front of
//! the configured consent even where a `permit` holds; a `permit` that holds grants it (the
//! receipt's method `policy_hook`, its id naming the policy); a round no policy holds for goes
//! to the configured consent. A policy that cannot be evaluated denies: fail closed.
//!
//! A round is the gate's own consent view of it ([`ConsentView`]: what the gate validated, never
//! the answers), the principal's names as the host knows them, and the call's method and name,
//! all read off the view ([`facts`]). The schema ([`SCHEMA`]) is the one declaration of what a
//! policy can say; every policy file is validated against it when loaded ([`load`]).

mod decider;
mod facts;
mod guard;
mod load;
mod scope;

pub use decider::{Decider, PolicyConsent};
pub use facts::Facts;

pub use load::{MAX_NESTING, MAX_POLICY_BYTES, PolicyError, Problem};

use cedar_policy::{Authorizer, PolicyId, PolicySet, Schema};
use mrtr_gate_core::ConsentView;
use std::collections::HashSet;

/// The Cedar schema of an MRTR round (`src/mrtr.cedarschema`, published in docs/policy.md).
pub const SCHEMA: &str = include_str!("mrtr.cedarschema");

/// The annotation naming a policy (`@id("allow-trusted-state")`): the name the trail records.
pub const ID_ANNOTATION: &str = "id";
/// The annotation that makes a `forbid` send the round to the configured consent instead of
/// denying it (`@ask`).
pub const ASK_ANNOTATION: &str = "ask";

/// The prefix of a receipt id a policy's decision carries (`policy:<id>`).
pub const RECEIPT_PREFIX: &str = "policy:";

/// What the policies say of a round.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// A `permit` holds and no `forbid`: granted by the policy named.
    Allow {
        /// The permitting policy's id (the first, in id order, when several hold).
        policy: String,
    },
    /// A `forbid` holds: the round is refused (`policy_denied`).
    Deny {
        /// The forbidding policy's id (the first, in id order, when several hold).
        policy: String,
    },
    /// No policy decides: the configured consent does. `policies` names the `@ask` forbids
    /// that hold, if any.
    Ask {
        /// The `@ask` policies that hold.
        policies: Vec<String>,
    },
    /// The policies could not be evaluated for this round: it is refused (`policy_failed`).
    Failed {
        /// What went wrong (no value of the round's).
        reason: String,
    },
}

impl Decision {
    /// The snake_case code a refusal carries (docs/errors.md): `policy_denied`,
    /// `policy_failed`; `None` for a decision that refuses nothing.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Decision::Deny { .. } => Some("policy_denied"),
            Decision::Failed { .. } => Some("policy_failed"),
            Decision::Allow { .. } | Decision::Ask { .. } => None,
        }
    }

    /// What a refusal for this decision tells the user (no value of the round's), for a
    /// decision that refuses.
    pub fn refusal_message(&self) -> Option<String> {
        match self {
            Decision::Deny { policy } => Some(format!(
                "the round is refused by the operator's policy `{policy}`"
            )),
            Decision::Failed { reason } => Some(format!(
                "the operator's policies could not judge the round: {reason}"
            )),
            Decision::Allow { .. } | Decision::Ask { .. } => None,
        }
    }

    /// The receipt id the decision carries (`policy:<id>`), for a granting or denying one.
    pub fn receipt_id(&self) -> Option<String> {
        match self {
            Decision::Allow { policy } | Decision::Deny { policy } => {
                Some(format!("{RECEIPT_PREFIX}{policy}"))
            }
            Decision::Ask { .. } | Decision::Failed { .. } => None,
        }
    }
}

/// Who a round's call is bound to, by the names the host knows (not the gate's pseudonyms).
#[derive(Clone, Copy, Debug)]
pub struct Names<'a> {
    /// The user.
    pub user: &'a str,
    /// The tenant.
    pub tenant: &'a str,
}

/// A validated policy set, ready to decide rounds.
#[derive(Clone, Debug)]
pub struct Policies {
    set: PolicySet,
    /// The same policies filed by the action and resource their scopes admit.
    scopes: scope::Scopes,
    schema: Schema,
    /// The `forbid` policies annotated `@ask`.
    ask: HashSet<PolicyId>,
    /// Every policy's id, in the file's order.
    ids: Vec<String>,
}

impl Policies {
    /// The policies in `text` (a file's content), parsed and validated against [`SCHEMA`]
    /// under the limits ([`MAX_POLICY_BYTES`], [`MAX_NESTING`]). Every mistake is a
    /// [`PolicyError`] naming its line; none is ever a policy that allows.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        load::load(text)
    }

    /// Every policy's id, in the file's order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The ids of the policies with a guard (docs/policy.md, "What a round costs"): a test of
    /// the round's facts Cedar would evaluate first, answered from the facts, so Cedar
    /// evaluates the policy only for the rounds that pass it. In id order.
    pub fn guarded(&self) -> Vec<String> {
        self.scopes.guarded().into_iter().collect()
    }

    /// The ids of the policies decided from the round's facts alone: every condition a test
    /// that cannot fail, a scope the index settles. In id order.
    pub fn decided(&self) -> Vec<String> {
        self.scopes.decided().into_iter().collect()
    }

    /// What the policies say of the round `view` of a call bound to `names`.
    pub fn decide(&self, names: Names<'_>, view: &ConsentView) -> Decision {
        match self.evaluate(names, view) {
            Ok((_, held, errors)) => self.decision(&held, &errors),
            Err(reason) => Decision::Failed { reason },
        }
    }

    /// Why the policies decide the round `view` of a call bound to `names` as they do: the
    /// round's facts, each policy that holds, each that could not be evaluated, and the
    /// decision ([`Policies::decide`]'s).
    pub fn explain(&self, names: Names<'_>, view: &ConsentView) -> Explanation {
        match self.evaluate(names, view) {
            Ok((facts, held, errors)) => Explanation {
                decision: self.decision(&held, &errors),
                facts: Some(facts),
                held: held
                    .iter()
                    .map(|id| Held {
                        policy: id.to_string(),
                        forbid: self.effect(id) == Some(cedar_policy::Effect::Forbid),
                        ask: self.ask.contains(id),
                    })
                    .collect(),
                errors,
            },
            Err(reason) => Explanation {
                decision: Decision::Failed {
                    reason: reason.clone(),
                },
                facts: None,
                held: Vec::new(),
                errors: vec![reason],
            },
        }
    }

    fn effect(&self, id: &PolicyId) -> Option<cedar_policy::Effect> {
        self.set.policy(id).map(cedar_policy::Policy::effect)
    }

    /// The round's facts, the policies that hold (in id order) and the evaluation errors.
    fn evaluate(
        &self,
        names: Names<'_>,
        view: &ConsentView,
    ) -> Result<(Facts, Vec<PolicyId>, Vec<String>), String> {
        let facts = Facts::of(view)?;
        let round = facts::request(None, names, view, &facts)?;
        let authorizer = Authorizer::new();
        let mut errors: Vec<String> = Vec::new();
        let mut held: Vec<PolicyId> = Vec::new();
        let meeting = self.scopes.meet(round.action, &round.resource, &facts)?;
        held.extend(meeting.held);
        for set in &meeting.sets {
            let response = authorizer.is_authorized(&round.request, set, &round.entities);
            errors.extend(response.diagnostics().errors().map(ToString::to_string));
            held.extend(response.diagnostics().reason().cloned());
        }
        held.sort_by_key(ToString::to_string);
        // Each error names its policy first: sorted, a reason reads the same however the
        // policies were filed.
        errors.sort();
        Ok((facts, held, errors))
    }

    /// The request the round `view` of a call bound to `names` makes, checked against the
    /// schema: what [`Policies::decide`] builds, and skips checking since it is built to the
    /// schema's shape. For tests that hold every kind of round to it.
    pub fn check_request(&self, names: Names<'_>, view: &ConsentView) -> Result<(), String> {
        let facts = Facts::of(view)?;
        facts::request(Some(&self.schema), names, view, &facts).map(|_| ())
    }

    /// What [`Policies::decide`] would say with every policy evaluated, none left out by its
    /// scope or its guard: the same decision, slower. For tests that hold the scope index and
    /// the guards to Cedar.
    pub fn decide_unscoped(&self, names: Names<'_>, view: &ConsentView) -> Decision {
        let facts = match Facts::of(view) {
            Ok(f) => f,
            Err(reason) => return Decision::Failed { reason },
        };
        let round = match facts::request(Some(&self.schema), names, view, &facts) {
            Ok(r) => r,
            Err(reason) => return Decision::Failed { reason },
        };
        let response = Authorizer::new().is_authorized(&round.request, &self.set, &round.entities);
        let mut errors: Vec<String> = response
            .diagnostics()
            .errors()
            .map(ToString::to_string)
            .collect();
        errors.sort();
        let mut held: Vec<PolicyId> = response.diagnostics().reason().cloned().collect();
        held.sort_by_key(ToString::to_string);
        self.decision(&held, &errors)
    }

    /// The decision for the policies `held` and the evaluation `errors`.
    fn decision(&self, held: &[PolicyId], errors: &[String]) -> Decision {
        if !errors.is_empty() {
            return Decision::Failed {
                reason: errors.join("; "),
            };
        }
        let forbids: Vec<&PolicyId> = held
            .iter()
            .filter(|id| self.effect(id) == Some(cedar_policy::Effect::Forbid))
            .collect();
        if let Some(deny) = forbids.iter().find(|id| !self.ask.contains(**id)) {
            return Decision::Deny {
                policy: deny.to_string(),
            };
        }
        if !forbids.is_empty() {
            return Decision::Ask {
                policies: forbids.iter().map(ToString::to_string).collect(),
            };
        }
        match held.first() {
            Some(permit) => Decision::Allow {
                policy: permit.to_string(),
            },
            None => Decision::Ask {
                policies: Vec::new(),
            },
        }
    }
}

/// Why the policies decide a round as they do ([`Policies::explain`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Explanation {
    /// The round as the policies saw it (`None`: it could not be made into a request).
    pub facts: Option<Facts>,
    /// Each policy that holds, in id order.
    pub held: Vec<Held>,
    /// Each evaluation error (a policy that could not be evaluated fails the round).
    pub errors: Vec<String>,
    /// The decision.
    pub decision: Decision,
}

/// A policy that holds for a round.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Held {
    /// Its id.
    pub policy: String,
    /// A `forbid` (else a `permit`).
    pub forbid: bool,
    /// A `forbid` annotated `@ask`.
    pub ask: bool,
}
