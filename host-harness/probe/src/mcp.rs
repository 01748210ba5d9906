//! What every scenario's server answers besides its tools' legs: `server/discover` and
//! `tools/list` (complete results with `ttlMs` and `cacheScope`, which mcp 2.3.0 requires),
//! the sentinel tool, `ping`, the 2025 `initialize` (refused with -32022: MRTR rounds are
//! 2026-07-28's), notifications and responses (202, no body), and -32601 for the rest.

use crate::record::Request;
use crate::respond::{Fill, Reply, envelope, reply};
use crate::scenario::{SENTINEL_TOOL, Scenario};
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
    match method.as_str() {
        "server/discover" => ok(json!({
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "supportedVersions": [PROTOCOL_VERSION],
            "capabilities": {"tools": {}},
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
            match scenario.tool(tool_name) {
                Some(tool) => {
                    let leg = request.leg.unwrap_or_default();
                    let fill = Fill { id, canary, leg };
                    Answered {
                        status: 200,
                        reply: Some(reply(tool.answer(leg), &fill)),
                    }
                }
                None => Answered {
                    status: 200,
                    reply: Some(Reply::Json(envelope(
                        id,
                        "error",
                        &json!({"code": -32602, "message": format!("unknown tool: {tool_name}")}),
                    ))),
                },
            }
        }
        other => Answered {
            status: 200,
            reply: Some(Reply::Json(envelope(
                id,
                "error",
                &json!({"code": -32601, "message": format!("method not found: {other}")}),
            ))),
        },
    }
}
