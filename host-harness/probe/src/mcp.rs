//! What every scenario's server answers besides its tools' legs: `server/discover` and
//! `tools/list` (complete results with `ttlMs` and `cacheScope`, which mcp 2.3.0 requires),
//! the sentinel tool, `ping`, the 2025 `initialize` (refused with -32022: MRTR rounds are
//! 2026-07-28's), notifications and responses (202, no body), the scenario's `resources`
//! (`resources/list`; `resources/read` by URI and leg, the `resources` capability declared when
//! it has any) and `methods` (a task's `tasks/get`, `tasks/update`) by leg, and -32601 for the
//! rest.

use crate::record::Request;
use crate::respond::{Fill, Reply, envelope, reply};
use crate::scenario::{Answer, SENTINEL_TOOL, Scenario};
use serde_json::{Value, json};

/// The protocol version the probe speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// The answer to one message, for a transport to frame: HTTP uses the status and the reply,
/// stdio the reply only.
pub struct Answered {
    /// 200, 202 or 400.
    pub status: u16,
    /// The body (`None`: empty).
    pub reply: Option<Reply>,
}

/// The answer to `request` (its `leg` already counted) in `scenario`.
pub fn answer(scenario: &Scenario, request: &Request, canary: u16) -> Answered {
    let (Some(method), Some(id)) = (&request.method, &request.id) else {
        return Answered {
            status: 202,
            reply: None,
        };
    };
    let ok = |result: Value| Answered {
        status: 200,
        reply: Some(Reply::Json(envelope(id, "result", &result))),
    };
    // A tool's, a resource's or a method's answer for the request's leg, or the error `code`
    // when the scenario has none.
    let leg = request.leg.unwrap_or_default();
    let legged = |answer: Option<&Answer>, code: i64, missing: String| Answered {
        status: 200,
        reply: Some(match answer {
            Some(answer) => reply(answer, &Fill { id, canary, leg }),
            None => Reply::Json(envelope(
                id,
                "error",
                &json!({"code": code, "message": missing}),
            )),
        }),
    };
    match method.as_str() {
        "server/discover" => ok(json!({
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "supportedVersions": [PROTOCOL_VERSION],
            "capabilities": if scenario.resources.is_empty() {
                json!({"tools": {}})
            } else {
                json!({"tools": {}, "resources": {}})
            },
            "serverInfo": {"name": "mrtr-gate-probe", "version": env!("CARGO_PKG_VERSION")},
        })),
        "tools/list" => {
            let mut tools: Vec<Value> = scenario
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": scenario.description, "inputSchema": {"type": "object"}}))
                .collect();
            tools.push(json!({"name": SENTINEL_TOOL, "description": "the scenario's last call", "inputSchema": {"type": "object"}}));
            ok(
                json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": tools}),
            )
        }
        "ping" => ok(json!({})),
        "resources/list" => {
            let resources: Vec<Value> = scenario
                .resources
                .iter()
                .map(|r| json!({"uri": r.uri, "name": r.uri, "description": scenario.description}))
                .collect();
            ok(
                json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "resources": resources}),
            )
        }
        "resources/read" => {
            let uri = request
                .value
                .as_ref()
                .and_then(|v| v.pointer("/params/uri"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            legged(
                scenario.resource(uri).map(|r| r.answer(leg)),
                -32602,
                format!("unknown resource: {uri}"),
            )
        }
        "initialize" => {
            let requested = request
                .value
                .as_ref()
                .and_then(|v| v.pointer("/params/protocolVersion"))
                .cloned()
                .unwrap_or(Value::Null);
            let error = json!({"code": -32022, "message": "Unsupported protocol version",
                               "data": {"supported": [PROTOCOL_VERSION], "requested": requested}});
            Answered {
                status: 400,
                reply: Some(Reply::Json(envelope(id, "error", &error))),
            }
        }
        "tools/call" => {
            let tool_name = request.tool.as_deref().unwrap_or_default();
            if tool_name == SENTINEL_TOOL {
                return ok(
                    json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]}),
                );
            }
            legged(
                scenario.tool(tool_name).map(|t| t.answer(leg)),
                -32602,
                format!("unknown tool: {tool_name}"),
            )
        }
        other => legged(
            scenario.method(other).map(|m| m.answer(leg)),
            -32601,
            format!("method not found: {other}"),
        ),
    }
}
