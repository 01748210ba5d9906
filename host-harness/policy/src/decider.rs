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
use std::collections::{HashMap, VecDeque};
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
    /// By the round's view digest: the policy that allowed it.
    allowed: Mutex<Remembered<String, String>>,
    /// By the principal as the gate binds it (a keyed pseudonym with host keys): the names the
    /// policies are written with.
    names: Mutex<Remembered<Principal, (String, String)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A map whose entries go `kept_for` after they were last set, the oldest first past
/// [`MAX_REMEMBERED`]. Each insert costs amortised O(1): the entries wait in the order they
/// were set, and only those at the front are looked at.
#[derive(Debug)]
struct Remembered<K, V> {
    map: HashMap<K, (V, Instant)>,
    /// Keys in the order they were set (a key set again keeps its place until it comes to
    /// the front, where it goes to the back with its newer time).
    order: VecDeque<(Instant, K)>,
    kept_for: Duration,
}

impl<K: Clone + Eq + std::hash::Hash, V> Remembered<K, V> {
    fn new(kept_for: Duration) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            kept_for,
        }
    }

    fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + std::hash::Hash + ?Sized,
    {
        self.map
            .get(key)
            .filter(|(_, at)| at.elapsed() < self.kept_for)
            .map(|(v, _)| v)
    }

    fn insert(&mut self, key: K, value: V) {
        let now = Instant::now();
        if let Some(entry) = self.map.get_mut(&key) {
            *entry = (value, now);
            return;
        }
        self.sweep(now);
        self.order.push_back((now, key.clone()));
        self.map.insert(key, (value, now));
    }

    /// Drop what is older than `kept_for`, then the oldest while there is no room for one
    /// more.
    fn sweep(&mut self, now: Instant) {
        while let Some((queued, key)) = self.order.pop_front() {
            let Some(set) = self.map.get(&key).map(|(_, at)| *at) else {
                continue;
            };
            if set != queued {
                // Set again since it was queued: back in line with its newer time.
                self.order.push_back((set, key));
                continue;
            }
            if self.map.len() >= MAX_REMEMBERED || now.duration_since(set) >= self.kept_for {
                self.map.remove(&key);
                continue;
            }
            self.order.push_front((queued, key));
            break;
        }
    }
}

impl Decider {
    /// A decider over `policies`, an allow kept for `kept_for` (at least a round's lifetime).
    pub fn new(policies: Policies, kept_for: Duration) -> Self {
        Self {
            policies: RwLock::new(Arc::new(policies)),
            allowed: Mutex::new(Remembered::new(kept_for)),
            // A name is kept as long as it is used; a week unused and it goes.
            names: Mutex::new(Remembered::new(Duration::from_secs(7 * 24 * 3600))),
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
        lock(&self.names).insert(bound.clone(), (user.to_owned(), tenant.to_owned()));
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
        let names = lock(&self.names).get(bound).cloned();
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
            lock(&self.allowed).insert(view_sha256.to_owned(), policy.clone());
        }
        decision
    }

    /// Whether a policy allowed the round whose view has `view_sha256`.
    pub fn allows(&self, view_sha256: &str) -> bool {
        self.allowed(view_sha256).is_some()
    }

    /// The policy that allowed the round whose view has `view_sha256`, if one did.
    fn allowed(&self, view_sha256: &str) -> Option<String> {
        lock(&self.allowed).get(view_sha256).cloned()
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

#[cfg(test)]
mod tests {
    use super::{MAX_REMEMBERED, Remembered};
    use std::time::Duration;

    #[test]
    fn the_oldest_goes_past_the_cap_and_a_key_set_again_keeps_its_newest_value() {
        let mut r = Remembered::new(Duration::from_secs(600));
        for n in 0..MAX_REMEMBERED {
            r.insert(n, n);
        }
        r.insert(0, 7);
        assert_eq!(r.get(&0), Some(&7));
        r.insert(MAX_REMEMBERED, 0);
        assert_eq!(r.map.len(), MAX_REMEMBERED);
        // 0 was set again, so 1 was the oldest.
        assert_eq!(r.get(&1), None);
        assert_eq!(r.get(&0), Some(&7));
        assert!(r.order.len() <= r.map.len());
    }

    #[test]
    fn what_is_older_than_kept_for_is_never_given_and_is_swept() {
        let mut r = Remembered::new(Duration::ZERO);
        r.insert("a", 1);
        assert_eq!(r.get("a"), None);
        r.insert("b", 2);
        assert!(!r.map.contains_key("a"));
    }
}
