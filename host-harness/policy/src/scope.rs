//! The policies a round can meet. Each policy is filed under the actions its scope admits, and,
//! when its scope names one resource (`resource == Mrtr::Tool::"book"`), under that resource:
//! a round is judged by the policies filed under its action for any resource and those filed
//! under its resource, never the whole file. Nothing else changes: Cedar evaluates a policy's
//! scope before its conditions, so a policy whose scope names another action or resource can
//! neither hold nor fail for the round, and leaving it out changes neither the policies that
//! hold nor the errors (tests/policies.rs holds the two to the same decisions).

use crate::facts::ACTIONS;
use cedar_policy::{ActionConstraint, EntityUid, PolicySet, ResourceConstraint};
use std::collections::HashMap;
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
    any: PolicySet,
    /// Those whose scope names one resource, by it.
    by_resource: HashMap<EntityUid, PolicySet>,
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
        let mut by_action = HashMap::new();
        for (action, _) in ACTIONS {
            let uid = EntityUid::from_str(&format!("Mrtr::Action::\"{action}\""))
                .map_err(|e| format!("the action {action}: {e}"))?;
            let mut scope = Scope::default();
            for policy in set.policies() {
                if !admits(&policy.action_constraint(), &uid) {
                    continue;
                }
                let filed = match policy.resource_constraint() {
                    ResourceConstraint::Eq(resource) => {
                        scope.by_resource.entry(resource).or_default()
                    }
                    _ => &mut scope.any,
                };
                filed.add(policy.clone()).map_err(|e| e.to_string())?;
            }
            by_action.insert(action, scope);
        }
        Ok(Self { by_action })
    }

    /// The policy sets a round of `action` on `resource` is judged by (at most two).
    pub(crate) fn sets<'a>(
        &'a self,
        action: &str,
        resource: &EntityUid,
    ) -> impl Iterator<Item = &'a PolicySet> {
        let scope = self.by_action.get(action);
        scope
            .map(|s| &s.any)
            .into_iter()
            .chain(scope.and_then(|s| s.by_resource.get(resource)))
    }
}
