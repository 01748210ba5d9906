//! The official Rust SDK client (`rmcp` 3.11.0) as a client of `mrtr-gate probe` (docs/probe.md,
//! "Run it against your client"): `mrtr-probe-rmcp-client URL`, or with
//! `MCP_PROBE_TRANSPORT=stdio` `mrtr-probe-rmcp-client SERVER_COMMAND_LINE` (a shell line,
//! spawned by the SDK's `TokioChildProcess` through `/bin/sh -c`). It lists the endpoint's tools,
//! calls each in order with `{}` by the SDK's `call_tool` (its automatic MRTR driver: the round
//! cap, the state-only pacing and the answers are the SDK's), goes on after a failed call (one
//! JSON line per call on stdout), reads each URI of the context's `read_twice` twice, one read
//! after the other, by the SDK's `read_resource` (the same automatic driver, and the SDK's
//! response cache, on by default), answers each elicitation as `MCP_CONFORMANCE_CONTEXT`'s
//! `answers` say (the SDK hands the handler the input key as the request's id), and exits 0
//! once the calls are done.
//!
//! The context's `capabilities` are declared as given (the SDK declares what the handler's
//! config says). Its `forge`: once the forged tool's call has ended, a new call carrying the
//! given `requestState` and `inputResponses` with other arguments, by the SDK's
//! `call_tool_once`, which sends what the app gives it. Its `cancel_on`
//! (`notifications/message`): the call in flight is dropped when the notification comes, as an
//! app that stops waiting would; the SDK then sends `notifications/cancelled` for it.
//!
//! The tasks extension (SEP-2663): when the context's `capabilities` declare
//! `extensions["io.modelcontextprotocol/tasks"]`, the app declares it too and calls by the SDK's
//! `call_tool_once`, since `call_tool` does not drive tasks ("callers that declare the tasks
//! extension capability should use `call_tool_once` and poll `tasks/get`", its source says). A
//! task it drives as the SDK's types allow: `get_task` until the task ends, and on
//! `input_required` each elicitation answered by the same answers as a round's, sent by
//! `update_task`. The SDK checks nothing of a task's input requests; neither does the app.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, ExtensionCapabilities,
    FormElicitationCapability, GetTaskParams, Implementation, InputRequest, InputResponses,
    NumberOrString, ReadResourceRequestParams, TASKS_EXTENSION_ID, TaskPayload, UpdateTaskParams,
    UrlElicitationCapability,
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
    tasks: bool,
    read_twice: Vec<String>,
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
            read_twice: context
                .get("read_twice")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            tasks: context
                .pointer("/capabilities/extensions")
                .and_then(|e| e.get(TASKS_EXTENSION_ID))
                .is_some(),
        }
    }

    /// The answer the probe gives for input `key` (the handler's and a task's alike).
    fn answer(&self, key: &str, message: &str) -> Result<ElicitResult, ErrorData> {
        report(json!({"handler": message, "key": key}));
        match self.answers.get(key) {
            Some(answer) => serde_json::from_value(answer.clone())
                .map_err(|e| ErrorData::invalid_params(format!("the probe's answer: {e}"), None)),
            None => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }
}

fn message_of(request: &ElicitRequestParams) -> String {
    match request {
        ElicitRequestParams::FormElicitationParams { message, .. }
        | ElicitRequestParams::UrlElicitationParams { message, .. } => message.clone(),
        #[allow(unreachable_patterns)]
        _ => String::new(),
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
        if self.context.tasks {
            let mut extensions = ExtensionCapabilities::new();
            extensions.insert(TASKS_EXTENSION_ID.to_owned(), Map::new());
            capabilities.extensions = Some(extensions);
        }
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
        // The SDK's MRTR driver gives the input key as the request's id.
        let key = match &context.id {
            NumberOrString::String(key) => key.to_string(),
            NumberOrString::Number(n) => n.to_string(),
        };
        self.context.answer(&key, &message_of(&request))
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

type Client = rmcp::service::RunningService<RoleClient, App>;

/// One call of `name` by the SDK's automatic driver (by `call_tool_once` and the task's
/// polling when the app declares tasks), dropped if the app cancels it.
async fn call(client: &Client, context: &Context, name: &str, cancel: &Notify) {
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(Map::new());
    if context.tasks {
        let outcome = match call_as_task(client, context, params).await {
            Ok(()) => json!({"tool": name, "ok": true}),
            Err(e) => json!({"tool": name, "ok": false, "error": truncate(e)}),
        };
        report(outcome);
        return;
    }
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

/// A call that may become a task: the task polled until it ends, its input requests answered.
async fn call_as_task(
    client: &Client,
    context: &Context,
    params: CallToolRequestParams,
) -> Result<(), String> {
    let created = match client.call_tool_once(params).await {
        Ok(CallToolResponse::Task(created)) => created,
        Ok(CallToolResponse::Complete(_)) => return Ok(()),
        Ok(_) => {
            return Err("a round, which this app does not drive when it declares tasks".into());
        }
        Err(e) => return Err(e.to_string()),
    };
    let id = created.task.task_id;
    // Not a safety cap: it keeps the program finite if a scenario never ends its task.
    for _ in 0..100 {
        let task = client
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .map_err(|e| e.to_string())?;
        match task.task.payload {
            TaskPayload::InputRequired { input_requests } => {
                let mut responses = InputResponses::new();
                for (key, request) in input_requests {
                    let answer = match request {
                        InputRequest::Elicitation(request) => context
                            .answer(&key, &message_of(&request.params))
                            .map_err(|e| e.message.to_string())?,
                        _ => ElicitResult::new(ElicitationAction::Decline),
                    };
                    responses.insert(
                        key,
                        serde_json::to_value(answer).map_err(|e| e.to_string())?,
                    );
                }
                client
                    .update_task(UpdateTaskParams::new(id.clone(), responses))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            TaskPayload::Working => {
                tokio::time::sleep(std::time::Duration::from_millis(
                    task.task.task.poll_interval_ms.unwrap_or(50),
                ))
                .await;
            }
            TaskPayload::Completed { .. } => return Ok(()),
            _ => return Err(format!("the task ended {:?}", task.task.status())),
        }
    }
    Err("the task did not end".into())
}

/// A new call of the forged tool carrying the context's `requestState` and `inputResponses`.
async fn forge(client: &Client, forge: &Value) {
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
        call(&client, &context, &tool.name, &cancel).await;
        if forged == Some(tool.name.as_ref())
            && let Some(f) = &context.forge
        {
            forge(&client, f).await;
        }
    }
    for uri in &context.read_twice {
        for _ in 0..2 {
            let outcome = match client
                .read_resource(ReadResourceRequestParams::new(uri.clone()))
                .await
            {
                Ok(_) => json!({"read": uri, "ok": true}),
                Err(e) => json!({"read": uri, "ok": false, "error": truncate(e.to_string())}),
            };
            report(outcome);
        }
    }
    client.cancel().await?;
    Ok(())
}
