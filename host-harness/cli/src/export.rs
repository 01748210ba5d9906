//! `mrtr-gate export-audit`: a verified trail as a SIEM takes it, one JSON line per event:
//! OCSF API Activity events (class 6003, `--format ocsf`) or OpenTelemetry log records (each
//! line an OTLP/JSON `ExportLogsServiceRequest` holding one record, the OTLP file format,
//! `--format otel`). Only what the trail holds goes out: digests, codes, ids, the method and
//! the tool's name, never an argument or an answer (the trail has none); the trail's own
//! chain fields travel with each event so a SIEM can tie it back. The chain is verified
//! first (and the links and anchor, with host keys): a trail that does not verify exports
//! nothing.

use mrtr_gate_host::core::digest::sha256_hex;
use serde_json::{Map, Value, json};

/// What to export as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum Format {
    /// OCSF 1.3 API Activity (class_uid 6003).
    Ocsf,
    /// OpenTelemetry logs (OTLP/JSON, one request per line).
    Otel,
}

/// The OCSF schema version the events name.
pub const OCSF_VERSION: &str = "1.3.0";

/// The trail's fields each exported event carries apart from those mapped to a place of the
/// format's own (the chain's, and the digests).
const KEPT: &[&str] = &[
    "schema",
    "shard",
    "seq",
    "prev_sha256",
    "binding",
    "live_id",
    "retry_id",
    "round",
    "input_kinds",
    "params_sha256",
    "state_sha256",
    "view_sha256",
    "schema_sha256",
    "consent_method",
    "consent_receipt_id",
    "policy_version",
    "heads",
];

/// One trail line (canonical JSON, verified) as an exported line of `format`, `log` naming the
/// trail.
pub fn export_line(line: &str, format: Format, log: &str) -> Result<String, String> {
    let event: Map<String, Value> =
        serde_json::from_str(line).map_err(|e| format!("a trail line is no JSON object: {e}"))?;
    let digest = sha256_hex(line.as_bytes());
    let out = match format {
        Format::Ocsf => ocsf(&event, &digest, log),
        Format::Otel => otel(&event, &digest, log),
    };
    Ok(out.to_string())
}

fn text<'a>(event: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    event.get(key).and_then(Value::as_str)
}

/// A refusal, or a consent refused: what a SIEM counts as a failure.
fn failed(event: &Map<String, Value>) -> bool {
    matches!(text(event, "event"), Some("rejected"))
        || matches!(text(event, "outcome"), Some("refused" | "denied" | "error"))
}

fn kept(event: &Map<String, Value>) -> Map<String, Value> {
    KEPT.iter()
        .filter_map(|k| {
            event
                .get(*k)
                .filter(|v| !v.is_null())
                .map(|v| ((*k).to_owned(), v.clone()))
        })
        .collect()
}

fn message(event: &Map<String, Value>) -> String {
    let kind = text(event, "event").unwrap_or("event");
    match (text(event, "method"), text(event, "outcome")) {
        (Some(method), Some(outcome)) => format!("mrtr-gate {kind}: {method} {outcome}"),
        (None, Some(outcome)) => format!("mrtr-gate {kind}: {outcome}"),
        _ => format!("mrtr-gate {kind}"),
    }
}

/// What kind of MCP thing a method's name names.
fn resource_type(method: &str) -> &'static str {
    match method {
        "tools/call" => "mcp_tool",
        "prompts/get" => "mcp_prompt",
        "resources/read" => "mcp_resource",
        _ => "mcp_request",
    }
}

fn ocsf(event: &Map<String, Value>, digest: &str, log: &str) -> Value {
    let kind = text(event, "event").unwrap_or("unknown");
    let method = text(event, "method").unwrap_or(kind);
    let failure = failed(event);
    let mut out = json!({
        "class_uid": 6003,
        "class_name": "API Activity",
        "category_uid": 6,
        "category_name": "Application Activity",
        "activity_id": 99,
        "activity_name": kind,
        "type_uid": 600_399,
        "type_name": "API Activity: Other",
        "time": event.get("at_ms").cloned().unwrap_or(json!(0)),
        "severity_id": if failure { 3 } else { 1 },
        "severity": if failure { "Medium" } else { "Informational" },
        "status_id": if failure { 2 } else { 1 },
        "status": if failure { "Failure" } else { "Success" },
        "message": message(event),
        "metadata": {
            "version": OCSF_VERSION,
            "product": {
                "name": "mrtr-gate",
                "vendor_name": "mrtr-gate",
                "version": env!("CARGO_PKG_VERSION"),
            },
            "log_name": log,
            "uid": digest,
            "sequence": event.get("seq").cloned().unwrap_or(Value::Null),
        },
        "api": {"operation": method},
        "actor": {"app_name": "mrtr-gate"},
        // The gate runs where the client does: the activity's source is that host's client,
        // which the trail does not name.
        "src_endpoint": {"svc_name": "mrtr-gate"},
        "unmapped": kept(event),
    });
    let Some(object) = out.as_object_mut() else {
        return out;
    };
    if let Some(outcome) = text(event, "outcome") {
        object.insert("status_detail".into(), outcome.into());
    }
    if let Some(reason) = text(event, "reason") {
        object.insert("status_code".into(), reason.into());
    }
    if let Some(cause) = text(event, "cause") {
        object.insert(
            "status_detail".into(),
            format!("{cause}: {}", text(event, "outcome").unwrap_or("denied")).into(),
        );
    }
    if let Some(user) = text(event, "user_sha256") {
        let mut u = json!({"uid": user, "type_id": 99, "type": "pseudonym"});
        if let (Some(tenant), Some(u)) = (text(event, "tenant_sha256"), u.as_object_mut()) {
            u.insert("org".into(), json!({"uid": tenant}));
        }
        object.insert("actor".into(), json!({"app_name": "mrtr-gate", "user": u}));
    }
    let mut api = json!({"operation": method});
    if let (Some(server), Some(a)) = (text(event, "server"), api.as_object_mut()) {
        a.insert("service".into(), json!({"name": server}));
    }
    if let (Some(id), Some(a)) = (
        event.get("request_id").filter(|v| !v.is_null()),
        api.as_object_mut(),
    ) {
        a.insert("request".into(), json!({"uid": id_text(id)}));
    }
    object.insert("api".into(), api);
    if let Some(name) = text(event, "name") {
        object.insert(
            "resources".into(),
            json!([{"name": name, "type": resource_type(method)}]),
        );
    }
    if let Some(binding) = event.get("binding").filter(|v| !v.is_null())
        && let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut)
    {
        let request = event.get("request_id").map_or_else(String::new, id_text);
        m.insert(
            "correlation_uid".into(),
            format!("{request}#{}", id_text(binding)).into(),
        );
    }
    out
}

/// An id as text (a string as it is, a number in decimal).
fn id_text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// An OTLP/JSON `AnyValue`.
fn any_value(v: &Value) -> Value {
    match v {
        Value::String(s) => json!({"stringValue": s}),
        Value::Bool(b) => json!({"boolValue": b}),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"intValue": n.to_string()}),
        Value::Number(n) => json!({"doubleValue": n.as_f64().unwrap_or(0.0)}),
        Value::Object(m) => json!({"kvlistValue": {"values": attributes(m.iter())}}),
        Value::Array(a) => {
            json!({"arrayValue": {"values": a.iter().map(any_value).collect::<Vec<_>>()}})
        }
        Value::Null => json!({}),
    }
}

fn attributes<'a>(fields: impl Iterator<Item = (&'a String, &'a Value)>) -> Vec<Value> {
    fields
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| json!({"key": k, "value": any_value(v)}))
        .collect()
}

fn otel(event: &Map<String, Value>, digest: &str, log: &str) -> Value {
    let failure = failed(event);
    let at_ns = event
        .get("at_ms")
        .and_then(Value::as_u64)
        .map_or(0u128, |ms| u128::from(ms) * 1_000_000)
        .to_string();
    let kind = text(event, "event").unwrap_or("unknown");
    let mut fields: Map<String, Value> = event
        .iter()
        .filter(|(k, _)| k.as_str() != "at_ms")
        .map(|(k, v)| (format!("mrtr_gate.{k}"), v.clone()))
        .collect();
    fields.insert(
        "event.name".into(),
        format!("mrtr_gate.audit.{kind}").into(),
    );
    fields.insert("mrtr_gate.event_sha256".into(), digest.into());
    fields.insert("mrtr_gate.trail".into(), log.into());
    json!({"resourceLogs": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "mrtr-gate"}},
            {"key": "service.version", "value": {"stringValue": env!("CARGO_PKG_VERSION")}},
        ]},
        "scopeLogs": [{
            "scope": {"name": "mrtr-gate.audit", "version": env!("CARGO_PKG_VERSION")},
            "logRecords": [{
                "timeUnixNano": at_ns,
                "observedTimeUnixNano": at_ns,
                "severityNumber": if failure { 13 } else { 9 },
                "severityText": if failure { "WARN" } else { "INFO" },
                "body": {"stringValue": message(event)},
                "attributes": attributes(fields.iter()),
            }],
        }],
    }]})
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"at_ms":1796622159065,"binding":1,"cause":"caller","consent_method":null,"consent_receipt_id":null,"event":"rejected","input_kinds":{"seat":"form"},"live_id":1,"method":"tools/call","name":"book","outcome":"denied","params_sha256":"aa","policy_version":"default","prev_sha256":"00","reason":"consent_refused","request_id":"mg-1","retry_id":null,"round":1,"schema":"mrtr-gate/audit/v4","schema_sha256":{"seat":"bb"},"seq":7,"server":"http://h/mcp","shard":"s1","state_sha256":null,"tenant_sha256":"tt","user_sha256":"uu","view_sha256":"vv"}"#;

    #[test]
    fn a_refusal_is_an_ocsf_api_activity_failure_with_its_code() {
        let v: Value =
            serde_json::from_str(&export_line(LINE, Format::Ocsf, "t").unwrap()).unwrap();
        assert_eq!(v["class_uid"], 6003);
        assert_eq!(v["type_uid"], 600_399);
        assert_eq!(v["time"], 1_796_622_159_065u64);
        assert_eq!(
            (&v["status_id"], &v["status_code"]),
            (&json!(2), &json!("consent_refused"))
        );
        assert_eq!(v["actor"]["user"]["uid"], "uu");
        assert_eq!(v["actor"]["user"]["org"]["uid"], "tt");
        assert_eq!(v["api"]["operation"], "tools/call");
        assert_eq!(v["api"]["request"]["uid"], "mg-1");
        assert_eq!(
            v["resources"][0],
            json!({"name": "book", "type": "mcp_tool"})
        );
        assert_eq!(v["metadata"]["uid"], sha256_hex(LINE.as_bytes()));
        assert_eq!(v["unmapped"]["seq"], 7);
        assert_eq!(v["unmapped"]["prev_sha256"], "00");
        assert!(v["unmapped"].get("state_sha256").is_none());
    }

    #[test]
    fn a_refusal_is_an_otel_warn_record_with_every_field_as_an_attribute() {
        let v: Value =
            serde_json::from_str(&export_line(LINE, Format::Otel, "t").unwrap()).unwrap();
        let record = &v["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
        assert_eq!(record["timeUnixNano"], "1796622159065000000");
        assert_eq!(record["severityNumber"], 13);
        let attribute = |key: &str| {
            record["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == key)
                .map(|a| a["value"].clone())
        };
        assert_eq!(
            attribute("mrtr_gate.reason"),
            Some(json!({"stringValue": "consent_refused"}))
        );
        assert_eq!(attribute("mrtr_gate.seq"), Some(json!({"intValue": "7"})));
        assert_eq!(
            attribute("event.name"),
            Some(json!({"stringValue": "mrtr_gate.audit.rejected"}))
        );
        assert_eq!(attribute("mrtr_gate.state_sha256"), None);
    }
}
