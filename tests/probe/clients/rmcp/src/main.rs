//! The official Rust SDK client (`rmcp` 3.11.0) as a client of `mrtr-gate probe` (docs/probe.md,
//! "Run it against your client"): `mrtr-probe-rmcp-client URL`, or with
//! `MCP_PROBE_TRANSPORT=stdio` `mrtr-probe-rmcp-client SERVER_COMMAND_LINE` (a shell line,
//! spawned by the SDK's `TokioChildProcess` through `/bin/sh -c`). It lists the endpoint's tools,
//! calls each in order with `{}` by the SDK's `call_tool` (its automatic MRTR driver: the round
//! cap, the state-only pacing and the answers are the SDK's), goes on after a failed call (one
//! JSON line per call on stdout), answers each elicitation as `MCP_CONFORMANCE_CONTEXT`'s
//! `answers` say (the SDK hands the handler the input key as the request's id), and exits 0
//! once the calls are done.
//!
//! The context's `capabilities` are declared as given (the SDK declares what the handler's
//! config says). Its `forge`: once the forged tool's call has ended, a new call carrying the
//! given `requestState` and `inputResponses` with other arguments, by the SDK's
//! `call_tool_once`, which sends what the app gives it. Its `cancel_on`
//! (`notifications/message`): the call in flight is dropped when the notification comes, as an
//! app that stops waiting would; the SDK then sends `notifications/cancelled` for it.

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, FormElicitationCapability, Implementation,
    InputResponses, NumberOrString, UrlElicitationCapability,
};
// Logging is deprecated (SEP-2577), but a server's log message is what the probe's cancel
// scenario sends, and this is the SDK's one hook for it.
#[allow(deprecated)]
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::model::ProtocolVersion;
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RoleClient,
};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use tokio::sync::Notify;

/// What the probe's context tells the app.
struct Context {
    answers: Map<String, Value>,
    capabilities: Option<Value>,
    forge: Option<Value>,
    cancel_on: Option<String>,
}

impl Context {
    fn from_env() -> Self {
        let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or(Value::Null);
        Context {
            answers: context
                .get("answers")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            capabilities: context.get("capabilities").cloned(),
            forge: context.get("forge").cloned(),
            cancel_on: context
                .get("cancel_on")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }
}

fn report(line: Value) {
    println!("{line}");
}

/// The app: answers by input key, cancels on the context's notification.
struct App {
    context: Arc<Context>,
    cancel: Arc<Notify>,
}

impl ClientHandler for App {
    fn get_info(&self) -> ClientConfig {
        // The context's capabilities when it gives them (only elicitation is read), else form
        // and URL elicitation both.
        let elicitation = match self
            .context
            .capabilities
            .as_ref()
            .and_then(|c| c.get("elicitation"))
        {
            Some(wanted) => {
                let mut e = ElicitationCapability::new();
                if wanted.get("form").is_some() {
                    e = e.with_form(FormElicitationCapability::default());
                }
                if wanted.get("url").is_some() {
                    e = e.with_url(UrlElicitationCapability::default());
                }
                e
            }
            None => ElicitationCapability::new()
                .with_form(FormElicitationCapability::default())
                .with_url(UrlElicitationCapability::default()),
        };
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        ClientConfig::new(
            capabilities,
            Implementation::new("mrtr-probe-rmcp-client", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. }
            | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
            #[allow(unreachable_patterns)]
            _ => String::new(),
        };
        // The SDK's MRTR driver gives the input key as the request's id.
        let key = match &context.id {
            NumberOrString::String(key) => key.to_string(),
            NumberOrString::Number(n) => n.to_string(),
        };
        report(json!({"handler": message, "key": key}));
        match self.context.answers.get(&key) {
            Some(answer) => serde_json::from_value(answer.clone())
                .map_err(|e| ErrorData::invalid_params(format!("the probe's answer: {e}"), None)),
            None => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }

    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        _params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if self.context.cancel_on.as_deref() == Some("notifications/message") {
            report(json!({"cancel": "notifications/message"}));
            self.cancel.notify_waiters();
        }
    }
}

/// One call of `name` by the SDK's automatic driver, dropped if the app cancels it.
async fn call(
    client: &rmcp::service::RunningService<RoleClient, App>,
    name: &str,
    cancel: &Notify,
) {
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(Map::new());
    let outcome = tokio::select! {
        result = client.call_tool(params) => match result {
            Ok(result) if result.is_error != Some(true) => json!({"tool": name, "ok": true}),
            Ok(_) => json!({"tool": name, "ok": false, "error": "the tool's result is an error"}),
            Err(e) => json!({"tool": name, "ok": false, "error": truncate(e.to_string())}),
        },
        () = cancel.notified() => json!({"tool": name, "ok": false, "error": "cancelled by the app"}),
    };
    report(outcome);
}

/// A new call of the forged tool carrying the context's `requestState` and `inputResponses`.
async fn forge(client: &rmcp::service::RunningService<RoleClient, App>, forge: &Value) {
    let name = forge
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut params = CallToolRequestParams::new(name.clone()).with_arguments(
        forge
            .get("arguments")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    );
    params.request_state = forge
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_owned);
    params.input_responses = forge
        .get("inputResponses")
        .and_then(|v| serde_json::from_value::<InputResponses>(v.clone()).ok());
    let outcome = match client.call_tool_once(params).await {
        Ok(_) => json!({"forged": name, "ok": true}),
        Err(e) => json!({"forged": name, "ok": false, "error": truncate(e.to_string())}),
    };
    report(outcome);
}

fn truncate(mut text: String) -> String {
    if text.len() > 300 {
        let mut end = 300;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = std::env::args()
        .next_back()
        .ok_or("usage: mrtr-probe-rmcp-client URL")?;
    let context = Arc::new(Context::from_env());
    if let Some(on) = &context.cancel_on
        && on != "notifications/message"
    {
        println!("mrtr-probe: unsupported: cancel");
        return Ok(());
    }
    let cancel = Arc::new(Notify::new());
    let app = App {
        context: context.clone(),
        cancel: cancel.clone(),
    };
    // 2026-07-28 has no `initialize`: the SDK's lifecycle for it is `server/discover`.
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = if std::env::var("MCP_PROBE_TRANSPORT").as_deref() == Ok("stdio") {
        let mut command = tokio::process::Command::new("/bin/sh");
        command.arg("-c").arg(format!("exec {target}"));
        app.serve_with_lifecycle(TokioChildProcess::new(command)?, lifecycle)
            .await?
    } else {
        app.serve_with_lifecycle(StreamableHttpClientTransport::from_uri(target), lifecycle)
            .await?
    };
    let tools = client.list_all_tools().await?;
    let forged = context
        .forge
        .as_ref()
        .and_then(|f| f.get("tool"))
        .and_then(Value::as_str);
    for tool in &tools {
        call(&client, &tool.name, &cancel).await;
        if forged == Some(tool.name.as_ref())
            && let Some(f) = &context.forge
        {
            forge(&client, f).await;
        }
    }
    client.cancel().await?;
    Ok(())
}
