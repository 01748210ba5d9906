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

/// The request and the entities it names.
pub(crate) struct Round {
    pub request: Request,
    pub entities: Entities,
}

fn uid(kind: &str, id: &str) -> Result<EntityUid, String> {
    let name = EntityTypeName::from_str(&format!("Mrtr::{kind}"))
        .map_err(|e| format!("the entity type {kind}: {e}"))?;
    Ok(EntityUid::from_type_name_and_id(name, EntityId::new(id)))
}

fn strings(values: BTreeSet<String>) -> RestrictedExpression {
    RestrictedExpression::new_set(values.into_iter().map(RestrictedExpression::new_string))
}

fn long(n: u64) -> RestrictedExpression {
    RestrictedExpression::new_long(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The Cedar request for the round `view` of a call bound to `names`, checked against the
/// schema (a view the schema cannot hold is an error, never a request with parts left out).
pub(crate) fn request(
    schema: &Schema,
    names: Names<'_>,
    view: &ConsentView,
) -> Result<Round, String> {
    let (resource_kind, action) = match view.request.method.as_str() {
        "tools/call" => ("Tool", "tools/call"),
        "prompts/get" => ("Prompt", "prompts/get"),
        "resources/read" => ("Resource", "resources/read"),
        other => return Err(format!("no action for the method {other:?}")),
    };
    let tenant = uid("Tenant", names.tenant)?;
    let user = uid("User", names.user)?;
    let server = uid("Server", &view.server)?;
    let resource = uid(resource_kind, &view.request.name)?;
    let action = EntityUid::from_str(&format!("Mrtr::Action::\"{action}\""))
        .map_err(|e| format!("the action: {e}"))?;

    let mut kinds = BTreeSet::new();
    let mut keys = BTreeSet::new();
    let (mut fields, mut types, mut formats, mut required) = (
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
    );
    let (mut hosts, mut marks) = (BTreeSet::new(), BTreeSet::new());
    let mut deprecated = false;
    for input in &view.inputs {
        keys.insert(input.key().to_owned());
        match input {
            ViewInput::Form { fields: form, .. } => {
                kinds.insert("form".to_owned());
                for field in form {
                    fields.insert(field.name.clone());
                    if field.required {
                        required.insert(field.name.clone());
                    }
                    let kind = match &field.kind {
                        FieldKind::String { format, .. } => {
                            if let Some(format) = format {
                                formats.insert(format.clone());
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
                    types.insert(kind.to_owned());
                }
            }
            ViewInput::Url { url, .. } => {
                kinds.insert("url".to_owned());
                hosts.insert(url.ascii_host.clone());
                for warning in &url.warnings {
                    marks.insert(
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
                    marks.insert("query".to_owned());
                }
            }
            ViewInput::Roots { .. } => {
                kinds.insert("roots".to_owned());
                deprecated = true;
            }
            ViewInput::Sampling { .. } => {
                kinds.insert("sampling".to_owned());
                deprecated = true;
            }
            #[allow(unreachable_patterns)]
            _ => return Err("an input request of a kind this build does not know".into()),
        }
    }
    let inputs = u64::try_from(view.inputs.len()).unwrap_or(u64::MAX);
    let context = Context::from_pairs([
        ("round".to_owned(), long(u64::from(view.round))),
        ("max_rounds".to_owned(), long(u64::from(view.max_rounds))),
        (
            "server".to_owned(),
            RestrictedExpression::new_string(view.server.clone()),
        ),
        ("kinds".to_owned(), strings(kinds)),
        ("inputs".to_owned(), long(inputs)),
        ("keys".to_owned(), strings(keys)),
        ("form_fields".to_owned(), strings(fields)),
        ("form_types".to_owned(), strings(types)),
        ("form_formats".to_owned(), strings(formats)),
        ("form_required".to_owned(), strings(required)),
        ("url_hosts".to_owned(), strings(hosts)),
        ("url_marks".to_owned(), strings(marks)),
        (
            "state".to_owned(),
            RestrictedExpression::new_bool(view.state.present),
        ),
        (
            "state_bytes".to_owned(),
            long(view.state.bytes.unwrap_or(0)),
        ),
        (
            "deprecated".to_owned(),
            RestrictedExpression::new_bool(deprecated),
        ),
    ])
    .map_err(|e| format!("the round's context: {e}"))?;
    let entities = Entities::from_entities(
        [
            Entity::new_no_attrs(tenant.clone(), HashSet::new()),
            Entity::new_no_attrs(user.clone(), HashSet::from([tenant])),
            Entity::new_no_attrs(server.clone(), HashSet::new()),
            Entity::new_no_attrs(resource.clone(), HashSet::from([server])),
        ],
        Some(schema),
    )
    .map_err(|e| format!("the round's entities: {e}"))?;
    let request = Request::new(user, action, resource, context, Some(schema))
        .map_err(|e| format!("the round's request: {e}"))?;
    Ok(Round { request, entities })
}
