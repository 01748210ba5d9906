//! A round as the policies see it: the Cedar request and entities made from the gate's consent
//! view and the principal's names ([`crate::SCHEMA`]). Nothing of an answer: the view is made
//! before anyone answers.

use crate::Names;
use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Request, RestrictedExpression,
    Schema,
};
use mrtr_gate_core::{ConsentView, FieldKind, UrlWarning, ViewInput};
use std::collections::{BTreeSet, HashSet};
use std::str::FromStr;

/// The request and the entities it names, with its action and resource.
pub(crate) struct Round {
    pub request: Request,
    pub entities: Entities,
    pub action: &'static str,
    pub resource: EntityUid,
}

/// Each action of the schema (a gated method) and the kind of entity it calls.
pub(crate) const ACTIONS: [(&str, &str); 3] = [
    ("tools/call", "Tool"),
    ("prompts/get", "Prompt"),
    ("resources/read", "Resource"),
];

fn uid(kind: &str, id: &str) -> Result<EntityUid, String> {
    let name = EntityTypeName::from_str(&format!("Mrtr::{kind}"))
        .map_err(|e| format!("the entity type {kind}: {e}"))?;
    Ok(EntityUid::from_type_name_and_id(name, EntityId::new(id)))
}

/// What the policies see of a round besides who and what (docs/policy.md, "The schema"): the
/// context of the Cedar request, each set the union over the round's input requests. Never an
/// answer's value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Facts {
    /// The 1-based round number.
    pub round: u64,
    /// The gate's round cap.
    pub max_rounds: u64,
    /// The server's normalised endpoint.
    pub server: String,
    /// Each input request's kind: `form`, `url`, `sampling`, `roots`.
    pub kinds: BTreeSet<String>,
    /// How many input requests.
    pub inputs: u64,
    /// The input requests' keys.
    pub keys: BTreeSet<String>,
    /// Form fields' names.
    pub form_fields: BTreeSet<String>,
    /// Form fields' types.
    pub form_types: BTreeSet<String>,
    /// Form fields' string formats.
    pub form_formats: BTreeSet<String>,
    /// The names of the form fields the user must fill in.
    pub form_required: BTreeSet<String>,
    /// Each URL's host (ASCII).
    pub url_hosts: BTreeSet<String>,
    /// The URLs' marks.
    pub url_marks: BTreeSet<String>,
    /// Whether the round carries a `requestState`.
    pub state: bool,
    /// Its size in bytes.
    pub state_bytes: u64,
    /// Whether the server asked for a deprecated method.
    pub deprecated: bool,
}

impl Facts {
    /// The facts of the round `view`.
    pub fn of(view: &ConsentView) -> Result<Self, String> {
        let mut f = Facts {
            round: u64::from(view.round),
            max_rounds: u64::from(view.max_rounds),
            server: view.server.clone(),
            inputs: u64::try_from(view.inputs.len()).unwrap_or(u64::MAX),
            state: view.state.present,
            state_bytes: view.state.bytes.unwrap_or(0),
            ..Facts::default()
        };
        for input in &view.inputs {
            f.keys.insert(input.key().to_owned());
            match input {
                ViewInput::Form { fields: form, .. } => {
                    f.kinds.insert("form".to_owned());
                    for field in form {
                        f.form_fields.insert(field.name.clone());
                        if field.required {
                            f.form_required.insert(field.name.clone());
                        }
                        let kind = match &field.kind {
                            FieldKind::String { format, .. } => {
                                if let Some(format) = format {
                                    f.form_formats.insert(format.clone());
                                }
                                "string"
                            }
                            FieldKind::Number { integer: true, .. } => "integer",
                            FieldKind::Number { integer: false, .. } => "number",
                            FieldKind::Boolean => "boolean",
                            FieldKind::SingleSelect { .. } => "single_select",
                            FieldKind::MultiSelect { .. } => "multi_select",
                            #[allow(unreachable_patterns)]
                            _ => "other",
                        };
                        f.form_types.insert(kind.to_owned());
                    }
                }
                ViewInput::Url { url, .. } => {
                    f.kinds.insert("url".to_owned());
                    f.url_hosts.insert(url.ascii_host.clone());
                    for warning in &url.warnings {
                        f.url_marks.insert(
                            match warning {
                                UrlWarning::Punycode => "punycode",
                                UrlWarning::MixedScript => "mixed_script",
                                UrlWarning::IpLiteral => "ip_literal",
                                UrlWarning::NonDefaultPort => "non_default_port",
                                #[allow(unreachable_patterns)]
                                _ => "other",
                            }
                            .to_owned(),
                        );
                    }
                    if url.has_query {
                        f.url_marks.insert("query".to_owned());
                    }
                }
                ViewInput::Roots { .. } => {
                    f.kinds.insert("roots".to_owned());
                    f.deprecated = true;
                }
                ViewInput::Sampling { .. } => {
                    f.kinds.insert("sampling".to_owned());
                    f.deprecated = true;
                }
                #[allow(unreachable_patterns)]
                _ => return Err("an input request of a kind this build does not know".into()),
            }
        }
        Ok(f)
    }

    /// The attribute `name` of the round's context (one of [`FIELDS`]).
    pub(crate) fn fact(&self, name: &str) -> Option<Fact<'_>> {
        let long = |n: u64| Fact::Long(i64::try_from(n).unwrap_or(i64::MAX));
        Some(match name {
            "round" => long(self.round),
            "max_rounds" => long(self.max_rounds),
            "server" => Fact::String(&self.server),
            "kinds" => Fact::Set(&self.kinds),
            "inputs" => long(self.inputs),
            "keys" => Fact::Set(&self.keys),
            "form_fields" => Fact::Set(&self.form_fields),
            "form_types" => Fact::Set(&self.form_types),
            "form_formats" => Fact::Set(&self.form_formats),
            "form_required" => Fact::Set(&self.form_required),
            "url_hosts" => Fact::Set(&self.url_hosts),
            "url_marks" => Fact::Set(&self.url_marks),
            "state" => Fact::Bool(self.state),
            "state_bytes" => long(self.state_bytes),
            "deprecated" => Fact::Bool(self.deprecated),
            _ => return None,
        })
    }

    /// The context of the Cedar request: every attribute of [`FIELDS`], as [`Facts::fact`]
    /// gives it (what a policy's guard reads is what Cedar would).
    fn context(&self) -> Result<Context, String> {
        let mut pairs = Vec::with_capacity(FIELDS.len());
        for name in FIELDS {
            let value = match self.fact(name) {
                Some(Fact::Long(n)) => RestrictedExpression::new_long(n),
                Some(Fact::Bool(b)) => RestrictedExpression::new_bool(b),
                Some(Fact::String(s)) => RestrictedExpression::new_string(s.to_owned()),
                Some(Fact::Set(set)) => RestrictedExpression::new_set(
                    set.iter().cloned().map(RestrictedExpression::new_string),
                ),
                None => return Err(format!("the round's context has no {name}")),
            };
            pairs.push((name.to_owned(), value));
        }
        Context::from_pairs(pairs).map_err(|e| format!("the round's context: {e}"))
    }
}

/// The attributes of a round's context (`Round` in [`crate::SCHEMA`]: a request is checked
/// against the schema, which wants each of them and no other, for every kind of round in
/// tests/policies.rs).
pub(crate) const FIELDS: [&str; 15] = [
    "round",
    "max_rounds",
    "server",
    "kinds",
    "inputs",
    "keys",
    "form_fields",
    "form_types",
    "form_formats",
    "form_required",
    "url_hosts",
    "url_marks",
    "state",
    "state_bytes",
    "deprecated",
];

/// One attribute's value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fact<'a> {
    Long(i64),
    Bool(bool),
    String(&'a str),
    Set(&'a BTreeSet<String>),
}

/// The Cedar request for the round `view` (its `facts`) of a call bound to `names`; checked
/// against `schema` when one is given (a view the schema cannot hold is then an error). A
/// request is built to the schema's shape, so deciding skips the check (it costs a tenth of a
/// decision: docs/performance.md) and the tests hold every kind of round to it; a request
/// that still strayed would make policies fail to evaluate, which fails the round (closed).
pub(crate) fn request(
    schema: Option<&Schema>,
    names: Names<'_>,
    view: &ConsentView,
    facts: &Facts,
) -> Result<Round, String> {
    let method = view.request.method.as_str();
    let Some(&(action, resource_kind)) = ACTIONS.iter().find(|(a, _)| *a == method) else {
        return Err(format!("no action for the method {method:?}"));
    };
    let tenant = uid("Tenant", names.tenant)?;
    let user = uid("User", names.user)?;
    let server = uid("Server", &view.server)?;
    let resource = uid(resource_kind, &view.request.name)?;
    let action_uid = EntityUid::from_str(&format!("Mrtr::Action::\"{action}\""))
        .map_err(|e| format!("the action: {e}"))?;
    let context = facts.context()?;
    let entities = Entities::from_entities(
        [
            Entity::new_no_attrs(tenant.clone(), HashSet::new()),
            Entity::new_no_attrs(user.clone(), HashSet::from([tenant])),
            Entity::new_no_attrs(server.clone(), HashSet::new()),
            Entity::new_no_attrs(resource.clone(), HashSet::from([server])),
        ],
        schema,
    )
    .map_err(|e| format!("the round's entities: {e}"))?;
    let request = Request::new(user, action_uid, resource.clone(), context, schema)
        .map_err(|e| format!("the round's request: {e}"))?;
    Ok(Round {
        request,
        entities,
        action,
        resource,
    })
}
