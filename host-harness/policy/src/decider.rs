//! The policies where a host decides consent. A host judges each round the gate accepted
//! ([`Decider::judge`]) before the round goes anywhere: a deny or a failure refuses it before
//! anyone sees it; an allow is remembered for the round, and the retry's consent
//! ([`PolicyConsent`], wrapped around the configured one) answers with the policy's receipt;
//! every other round's consent is the configured one's. The policies can be replaced while
//! the host runs ([`Decider::replace`], a proxy's SIGHUP); a round judged under the old ones
//! keeps its decision.

use crate::{Decision, Names, Policies, RECEIPT_PREFIX};
use mrtr_gate_core::ConsentView;
use mrtr_gate_core::host::{Consent, ConsentMethod, ConsentPrompt, ConsentReceipt, HostError};
use mrtr_gate_host::Principal;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// The most rounds whose allow is remembered, and the most principals whose names are known:
/// past it, the oldest go (a forgotten allow only sends its round to the configured consent;
/// a forgotten principal's rounds fail closed).
const MAX_REMEMBERED: usize = 100_000;

/// The policies, the allows they gave, and the names behind the principals the gate binds.
#[derive(Debug)]
pub struct Decider {
    policies: RwLock<Arc<Policies>>,
    /// By the round's view digest: the policy that allowed it, and when.
    allowed: Mutex<HashMap<String, (String, Instant)>>,
    /// By the principal as the gate binds it (a keyed pseudonym with host keys): the names the
    /// policies are written with.
    names: Mutex<HashMap<Principal, (String, String, Instant)>>,
    /// How long an allow is kept: a round's lifetime and then some.
    kept_for: Duration,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Drop what is older than `kept_for`, then the oldest while there is no room for one more.
fn bounded<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    at: impl Fn(&V) -> Instant,
    kept_for: Duration,
) {
    map.retain(|_, v| at(v).elapsed() < kept_for);
    while map.len() >= MAX_REMEMBERED {
        let Some(oldest) = map
            .iter()
            .min_by_key(|(_, v)| at(v))
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        map.remove(&oldest);
    }
}

impl Decider {
    /// A decider over `policies`, an allow kept for `kept_for` (at least a round's lifetime).
    pub fn new(policies: Policies, kept_for: Duration) -> Self {
        Self {
            policies: RwLock::new(Arc::new(policies)),
            allowed: Mutex::default(),
            names: Mutex::default(),
            kept_for,
        }
    }

    /// Decide every round from now on with `policies` (a file reloaded and validated).
    pub fn replace(&self, policies: Policies) {
        *self
            .policies
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(policies);
    }

    /// The policies deciding now.
    pub fn policies(&self) -> Arc<Policies> {
        Arc::clone(&self.policies.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The gate binds `user` and `tenant` as `bound`: its rounds are judged under these names.
    pub fn know(&self, bound: &Principal, user: &str, tenant: &str) {
        let mut names = lock(&self.names);
        if !names.contains_key(bound) {
            // A name is kept as long as it is used; a week unused and it goes.
            bounded(&mut names, |v| v.2, Duration::from_secs(7 * 24 * 3600));
        }
        names.insert(
            bound.clone(),
            (user.to_owned(), tenant.to_owned(), Instant::now()),
        );
    }

    /// What the policies say of the round whose consent view is `view_json` (digest
    /// `view_sha256`), of a call bound to `bound`. An allow is remembered for the round's
    /// consent. A principal with no names, or a view that does not parse, fails (closed).
    pub fn judge(&self, bound: &Principal, view_json: &str, view_sha256: &str) -> Decision {
        match ConsentView::parse(view_json) {
            Ok(view) => self.judge_view(bound, &view, view_sha256),
            Err(e) => Decision::Failed {
                reason: e.to_string(),
            },
        }
    }

    /// [`Decider::judge`] for a host that has read the round's view already (a client's
    /// open round): `view` must be the view whose digest is `view_sha256`.
    pub fn judge_view(&self, bound: &Principal, view: &ConsentView, view_sha256: &str) -> Decision {
        let names = lock(&self.names)
            .get(bound)
            .map(|(user, tenant, _)| (user.clone(), tenant.clone()));
        let Some((user, tenant)) = names else {
            return Decision::Failed {
                reason: "no names are known for the call's principal".into(),
            };
        };
        let decision = self.policies().decide(
            Names {
                user: &user,
                tenant: &tenant,
            },
            view,
        );
        if let Decision::Allow { policy } = &decision {
            let mut allowed = lock(&self.allowed);
            bounded(&mut allowed, |v| v.1, self.kept_for);
            allowed.insert(view_sha256.to_owned(), (policy.clone(), Instant::now()));
        }
        decision
    }

    /// Whether a policy allowed the round whose view has `view_sha256`.
    pub fn allows(&self, view_sha256: &str) -> bool {
        self.allowed(view_sha256).is_some()
    }

    /// The policy that allowed the round whose view has `view_sha256`, if one did.
    fn allowed(&self, view_sha256: &str) -> Option<String> {
        lock(&self.allowed)
            .get(view_sha256)
            .filter(|(_, at)| at.elapsed() < self.kept_for)
            .map(|(policy, _)| policy.clone())
    }

    /// The configured consent `inner`, answered by the policies for the rounds they allowed.
    pub fn consent<K: Consent>(self: &Arc<Self>, inner: K) -> PolicyConsent<K> {
        PolicyConsent {
            decider: Arc::clone(self),
            inner,
        }
    }
}

/// A consent provider that grants the rounds a policy allowed (receipt `policy:<id>`, method
/// `policy_hook`) and asks the configured one for every other.
#[derive(Debug)]
pub struct PolicyConsent<K> {
    decider: Arc<Decider>,
    inner: K,
}

impl<K: Consent> Consent for PolicyConsent<K> {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        match self.decider.allowed(&prompt.view_sha256) {
            Some(policy) => Ok(ConsentReceipt::for_prompt(
                prompt,
                format!("{RECEIPT_PREFIX}{policy}"),
                true,
                ConsentMethod::PolicyHook,
            )),
            None => self.inner.request_consent(prompt),
        }
    }
}
