//! What the driver sends: a server's reply as wire text and the caller's answers, built from
//! the generator's picks.

use crate::common::*;
use crate::model::content::{Input, Request};
use crate::model::ops::{AnswerPlan, ReplyPick, WholeChange};
use crate::model::rules::Reply;
use mrtr_gate_core::RequestId;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The server's message for `id`, and the same message as the model reads it.
pub(crate) fn reply_text(id: &RequestId, reply: &ReplyPick) -> (String, Reply) {
    let (requests, state) = match reply {
        ReplyPick::InputRequired { requests, state } => (requests, state),
        ReplyPick::Complete => return (response(id.to_json(), complete()), Reply::Complete),
        ReplyPick::Error => return (error_response(id.to_json(), -32603), Reply::Error(-32603)),
        ReplyPick::BadResultType => {
            return (
                response(id.to_json(), json!({"resultType": "partial"})),
                Reply::BadResultType,
            );
        }
    };
    let mut result = json!({"resultType": "input_required"});
    if !requests.is_empty() {
        let wire: serde_json::Map<String, Value> = requests
            .iter()
            .map(|(k, r)| (k.clone(), wire_request(*r)))
            .collect();
        result["inputRequests"] = Value::Object(wire);
    }
    if let Some(s) = state {
        result["requestState"] = json!(s);
    }
    (
        response(id.to_json(), result),
        Reply::InputRequired {
            requests: requests.clone(),
            state: state.clone(),
        },
    )
}

fn wire_request(r: Request) -> Value {
    match r {
        Request::Form => form("F"),
        Request::FormBadSchema => form_request(
            None,
            "F",
            json!({"type": "object", "properties": {"login": {"type": "string", "pattern": "^a"}}}),
        ),
        Request::Url => url_request("https://auth.example.com/x?y=1"),
        Request::UrlUnsafe => url_request("http://auth.example.com/x"),
        Request::UnknownMode => {
            json!({"method": "elicitation/create", "params": {"mode": "voice", "message": "m"}})
        }
        Request::Roots => json!({"method": "roots/list", "params": {}}),
    }
}

/// Answers to a form: right ones first (index 0 is the one mostly picked), then wrong ones.
fn form_answers() -> Vec<Value> {
    vec![
        accept_with(json!({"login": "octocat", "count": 2})),
        accept_with(json!({"login": "octocat", "count": 3, "confirm": true})),
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        accept_with(json!({"login": "o", "count": 2.0})),
        accept_with(json!({"login": 5})),
        accept_with(json!({"login": ""})),
        accept_with(json!({"count": 3})),
        accept_with(json!({"login": "o", "count": 11})),
        accept_with(json!({"login": "o", "extra": 1})),
        json!({"action": "accept"}),
        json!({"action": "decline", "content": {"login": "x"}}),
        json!({"action": "maybe"}),
        json!({"action": "accept", "content": {"login": "o"}, "extra": 1}),
        json!(5),
    ]
}

fn url_answers() -> Vec<Value> {
    vec![
        json!({"action": "accept"}),
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        accept_with(json!({"x": 1})),
        json!({"action": "cancel", "content": {"x": 1}}),
        json!({"action": "nope"}),
        json!("x"),
    ]
}

fn roots_answers() -> Vec<Value> {
    vec![
        json!({"roots": [{"uri": "file:///p", "name": "p"}]}),
        json!({"roots": []}),
        json!({"action": "accept"}),
        json!({"roots": [{"uri": "https://example.com/p"}]}),
        json!({"roots": "file:///p"}),
    ]
}

/// Answers for a round with `inputs`, per the plan.
pub(crate) fn answers_value(inputs: &BTreeMap<String, Input>, plan: &AnswerPlan) -> Value {
    let (forms, urls, roots) = (form_answers(), url_answers(), roots_answers());
    let mut m = serde_json::Map::new();
    for (i, (key, input)) in inputs.iter().enumerate() {
        let pick = plan.picks[i % plan.picks.len()];
        let pool = match input {
            Input::Form => &forms,
            Input::Url => &urls,
            Input::Roots => &roots,
        };
        m.insert(key.clone(), pool[pick % pool.len()].clone());
    }
    match plan.change {
        None => {}
        Some(WholeChange::ExtraKey) => {
            m.insert("zz".into(), json!({"action": "decline"}));
        }
        Some(WholeChange::MissingKey) => {
            let first = m.keys().next().cloned();
            first.map(|k| m.remove(&k));
        }
        Some(WholeChange::NotAnObject) => return json!(["not", "an", "object"]),
    }
    Value::Object(m)
}
