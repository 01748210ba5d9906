//! The policies a round can meet. Each policy is filed under the actions its scope admits, and,
//! when its scope names one resource (`resource == Mrtr::Tool::"book"`), under that resource:
//! a round is judged by the policies filed under its action for any resource and those filed
//! under its resource, never the whole file. Within a filing, a policy whose conditions are
//! all tests of the round's facts that cannot fail ([`crate::guard`]), and whose scope the
//! filing settles, is decided from the facts alone; a policy whose first test is one is
//! evaluated only for the rounds that pass it. Nothing else changes: Cedar evaluates a
//! policy's scope, then its conditions from the first, so a policy whose scope names another
//! action or resource, or whose first test the facts fail, can neither hold nor fail for the
//! round, and leaving it out changes neither the policies that hold nor the errors
//! (tests/policies.rs holds the two to the same decisions, for the examples and for generated
//! files).

use crate::facts::{ACTIONS, Facts};
use crate::guard::Guard;
use cedar_policy::{
    ActionConstraint, EntityUid, Policy, PolicyId, PolicySet, PrincipalConstraint,
    ResourceConstraint,
};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::str::FromStr;

/// The policies filed by action, then by resource.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scopes {
    by_action: HashMap<&'static str, Scope>,
}

/// The policies of one action.
#[derive(Clone, Debug, Default)]
struct Scope {
    /// Those whose scope admits any resource (or one the index does not key: `in`, `is`).
    any: Filed,
    /// Those whose scope names one resource, by it.
    by_resource: HashMap<EntityUid, Filed>,
}

/// The policies of one filing.
#[derive(Clone, Debug, Default)]
struct Filed {
    /// Those evaluated for every round of the filing.
    plain: PolicySet,
    /// Those evaluated only for the rounds whose facts pass their guard, in the file's order.
    guarded: Vec<(Guard, Policy)>,
    /// Those that hold exactly for the rounds whose facts pass their whole condition.
    decided: Vec<(Guard, PolicyId)>,
}

/// How a policy is judged within its filings: read once per policy when the file is loaded.
#[derive(Clone, Debug)]
enum Judged {
    /// Decided from the facts alone: its whole condition is this guard.
    Decided(Guard),
    /// Evaluated by Cedar only for the rounds that pass this guard.
    Guarded(Guard),
    /// Evaluated by Cedar for every round its filing meets.
    Plain,
}

impl Judged {
    /// How `policy` is judged. A policy is decided only when its filing settles its scope: any
    /// principal, and a resource constraint that is none or the `==` it is filed by.
    fn of(policy: &Policy) -> Result<Self, String> {
        let est = policy.to_json().map_err(|e| e.to_string())?;
        let settled = policy.principal_constraint() == PrincipalConstraint::Any
            && matches!(
                policy.resource_constraint(),
                ResourceConstraint::Any | ResourceConstraint::Eq(_)
            );
        Ok(
            match settled.then(|| Guard::of_conditions(&est)).flatten() {
                Some(whole) => Judged::Decided(whole),
                None => Guard::of_policy(&est).map_or(Judged::Plain, Judged::Guarded),
            },
        )
    }
}

impl Filed {
    fn add(&mut self, policy: &Policy, judged: &Judged) -> Result<(), String> {
        match judged {
            Judged::Decided(guard) => self.decided.push((guard.clone(), policy.id().clone())),
            Judged::Guarded(guard) => self.guarded.push((guard.clone(), policy.clone())),
            Judged::Plain => self.plain.add(policy.clone()).map_err(|e| e.to_string())?,
        }
        Ok(())
    }
}

/// What a round meets: the policy sets Cedar evaluates for it, and the policies the facts
/// alone show to hold.
pub(crate) struct Meeting<'a> {
    pub sets: Vec<Cow<'a, PolicySet>>,
    pub held: Vec<PolicyId>,
}

/// Whether `constraint` admits the action `uid`. The schema has no action groups, so `in` an
/// action or a list of actions is membership.
fn admits(constraint: &ActionConstraint, uid: &EntityUid) -> bool {
    match constraint {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(action) => action == uid,
        ActionConstraint::In(actions) => actions.contains(uid),
    }
}

impl Scopes {
    /// `set` filed by action and resource.
    pub(crate) fn new(set: &PolicySet) -> Result<Self, String> {
        let judged = set
            .policies()
            .map(|p| Judged::of(p).map(|j| (p, j)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut by_action = HashMap::new();
        for (action, _) in ACTIONS {
            let uid = EntityUid::from_str(&format!("Mrtr::Action::\"{action}\""))
                .map_err(|e| format!("the action {action}: {e}"))?;
            let mut scope = Scope::default();
            for (policy, how) in &judged {
                if !admits(&policy.action_constraint(), &uid) {
                    continue;
                }
                let filed = match policy.resource_constraint() {
                    ResourceConstraint::Eq(resource) => {
                        scope.by_resource.entry(resource).or_default()
                    }
                    _ => &mut scope.any,
                };
                filed.add(policy, how)?;
            }
            by_action.insert(action, scope);
        }
        Ok(Self { by_action })
    }

    /// Every filing.
    fn filings(&self) -> impl Iterator<Item = &Filed> {
        self.by_action
            .values()
            .flat_map(|scope| std::iter::once(&scope.any).chain(scope.by_resource.values()))
    }

    /// The ids of the policies some filing evaluates only behind their guard.
    pub(crate) fn guarded(&self) -> BTreeSet<String> {
        self.filings()
            .flat_map(|f| f.guarded.iter().map(|(_, p)| p.id().to_string()))
            .collect()
    }

    /// The ids of the policies some filing decides from the facts alone.
    pub(crate) fn decided(&self) -> BTreeSet<String> {
        self.filings()
            .flat_map(|f| f.decided.iter().map(|(_, id)| id.to_string()))
            .collect()
    }

    /// What a round of `action` on `resource` with `facts` meets: the filings' plain sets, a
    /// set of the guarded policies whose guard the facts pass, and the decided policies whose
    /// condition they pass.
    pub(crate) fn meet<'a>(
        &'a self,
        action: &str,
        resource: &EntityUid,
        facts: &Facts,
    ) -> Result<Meeting<'a>, String> {
        let mut meeting = Meeting {
            sets: Vec::with_capacity(3),
            held: Vec::new(),
        };
        let Some(scope) = self.by_action.get(action) else {
            return Ok(meeting);
        };
        let filings = std::iter::once(&scope.any).chain(scope.by_resource.get(resource));
        let mut passed = PolicySet::new();
        for filed in filings {
            if !filed.plain.is_empty() {
                meeting.sets.push(Cow::Borrowed(&filed.plain));
            }
            for (guard, policy) in &filed.guarded {
                if guard.holds(facts) {
                    passed.add(policy.clone()).map_err(|e| e.to_string())?;
                }
            }
            for (guard, id) in &filed.decided {
                match guard.eval(facts) {
                    Some(true) => meeting.held.push(id.clone()),
                    Some(false) => {}
                    None => return Err(format!("the policy `{id}` could not be decided")),
                }
            }
        }
        if !passed.is_empty() {
            meeting.sets.push(Cow::Owned(passed));
        }
        Ok(meeting)
    }
}
