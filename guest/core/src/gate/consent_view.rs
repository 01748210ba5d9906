//! The consent view: what the user is shown before anything of theirs is sent, as a typed
//! model (one case per kind of input request) and its single writer.
//!
//! The view is written key by key as canonical JSON (RFC 8785, JCS): the exact text whose
//! SHA-256 a consent receipt must name. `docs/consent-view.md` shows an example, and a golden
//! test holds the writer to it; the tests also check every view against
//! `canonical::to_canonical` of the parsed text.

use crate::canonical;
use crate::gate::record::Binding;
use crate::schema::FormField;
use crate::url_view::UrlView;
use serde::Serialize;

/// The version of the view format, written into every view.
pub const VIEW_FORMAT: &str = "mrtr-gate/consent-view/v2";

/// What the view shows of one input request.
#[derive(Clone, Debug)]
pub(crate) enum InputView {
    /// Form elicitation: the fields the user fills in.
    Form {
        key: String,
        message: String,
        fields: Vec<FormField>,
        schema_sha256: String,
    },
    /// URL elicitation: where the user would go.
    Url {
        key: String,
        message: String,
        url: UrlView,
    },
    /// `roots/list` (deprecated): the workspace roots.
    Roots { key: String },
    /// `sampling/createMessage` (deprecated): the user's model answers for the server.
    Sampling {
        key: String,
        messages: usize,
        max_tokens: u64,
        include_context: &'static str,
        system_prompt: Option<String>,
        tools: bool,
    },
}

impl InputView {
    /// The sentence that says what accepting this input does.
    /// The key is quoted (as a JSON string): a key is any visible string a server picks, so
    /// unquoted it could pose as a sentence of its own.
    fn effect(&self, server: &str) -> String {
        let mut key = String::new();
        let (Self::Form { key: k, .. }
        | Self::Url { key: k, .. }
        | Self::Roots { key: k }
        | Self::Sampling { key: k, .. }) = self;
        canonical::write_string(&mut key, k);
        match self {
            Self::Form { fields, .. } => format!(
                "{key}: what you enter in {} field(s) is sent to {server}",
                fields.len()
            ),
            Self::Url { url, .. } => format!(
                "{key}: accepting opens {} in your browser; the client and the model cannot see the page",
                url.full
            ),
            Self::Roots { .. } => format!("{key}: your workspace roots are sent to {server}"),
            Self::Sampling { .. } => {
                format!("{key}: your model generates a reply for {server}, which receives it")
            }
        }
    }

    /// The input's entry, canonical JSON (members in canonical order).
    fn write(&self, out: &mut String) {
        match self {
            Self::Form {
                key,
                message,
                fields,
                schema_sha256,
            } => {
                out.push_str("{\"fields\":");
                write_serialized(out, fields);
                out.push_str(",\"key\":");
                canonical::write_string(out, key);
                out.push_str(",\"kind\":\"form\",\"message\":");
                canonical::write_string(out, message);
                out.push_str(",\"schema_sha256\":");
                canonical::write_string(out, schema_sha256);
            }
            Self::Url { key, message, url } => {
                out.push_str("{\"key\":");
                canonical::write_string(out, key);
                out.push_str(",\"kind\":\"url\",\"message\":");
                canonical::write_string(out, message);
                out.push_str(",\"url\":");
                write_serialized(out, url);
            }
            Self::Roots { key } => {
                out.push_str("{\"deprecated\":true,\"key\":");
                canonical::write_string(out, key);
                out.push_str(",\"kind\":\"roots\"");
            }
            Self::Sampling {
                key,
                messages,
                max_tokens,
                include_context,
                system_prompt,
                tools,
            } => {
                out.push_str("{\"deprecated\":true,\"include_context\":");
                canonical::write_string(out, include_context);
                out.push_str(",\"key\":");
                canonical::write_string(out, key);
                out.push_str(",\"kind\":\"sampling\",\"max_tokens\":");
                canonical::write_u64(out, *max_tokens);
                out.push_str(",\"messages\":");
                canonical::write_u64(out, u64::try_from(*messages).unwrap_or(u64::MAX));
                out.push_str(",\"system_prompt\":");
                match system_prompt {
                    Some(p) => canonical::write_string(out, p),
                    None => out.push_str("null"),
                }
                out.push_str(",\"tools\":");
                out.push_str(if *tools { "true" } else { "false" });
            }
        }
        out.push('}');
    }
}

/// A nested part whose shape serde's derive declares (form fields, a URL's description):
/// written through a `Value`, so the members come out in canonical order.
fn write_serialized(out: &mut String, part: &impl Serialize) {
    match serde_json::to_value(part) {
        Ok(value) => canonical::write_value(out, &value),
        // Fields and URL views are plain data: serializing them cannot fail.
        Err(_) => out.push_str("null"),
    }
}

/// The largest `arguments` shown in full, in bytes of their canonical JSON; larger ones are
/// shown by size (the params digest beside them covers every byte).
pub const MAX_SHOWN_ARGUMENTS_BYTES: usize = 4096;

/// The request's `arguments` (tools and prompts) as the view shows them: `{"bytes":N,
/// "value":V}` with `V` the arguments themselves up to [`MAX_SHOWN_ARGUMENTS_BYTES`], else
/// `null`; `null` when the params carry none (`resources/read`). `params` is the registered
/// canonical text, so the member is copied as it is.
fn write_arguments(out: &mut String, params: &str) {
    let arguments = canonical::top_level_member(params, "arguments");
    match arguments {
        None => out.push_str("null"),
        Some(text) => {
            out.push_str("{\"bytes\":");
            canonical::write_u64(out, u64::try_from(text.len()).unwrap_or(u64::MAX));
            out.push_str(",\"value\":");
            if text.len() <= MAX_SHOWN_ARGUMENTS_BYTES {
                out.push_str(text);
            } else {
                out.push_str("null");
            }
            out.push('}');
        }
    }
}

/// One round's view, before it is written.
pub(crate) struct RoundView<'a> {
    /// The binding the round belongs to.
    pub binding: &'a Binding,
    /// The binding's record version at its first round (see `Binding::binding_version`).
    pub binding_version: u64,
    /// The 1-based round number.
    pub number: u32,
    /// One entry per input key, in key order.
    pub inputs: &'a [InputView],
    /// The `requestState` and its digest, when the server sent one (the digest is computed
    /// once by the caller: a state may be a megabyte).
    pub state: Option<(&'a str, &'a str)>,
}

impl RoundView<'_> {
    /// The view as canonical JSON, written key by key: the same text `canonical::to_canonical`
    /// gives for the object (checked in the tests), with no object built on the way.
    pub(crate) fn write(&self) -> String {
        let fixed = &self.binding.fixed;
        let server = fixed.server.display();
        let mut out = String::with_capacity(1024);
        out.push_str("{\"effects\":[");
        for input in self.inputs {
            canonical::write_string(&mut out, &input.effect(&server));
            out.push(',');
        }
        let then = format!(
            "then {} `{}` is retried at {server}{}",
            fixed.method,
            fixed.name,
            if self.state.is_some() {
                " with the server's saved state"
            } else {
                ""
            }
        );
        canonical::write_string(&mut out, &then);
        out.push_str("],\"inputs\":[");
        for (i, input) in self.inputs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            input.write(&mut out);
        }
        out.push_str("],\"max_rounds\":");
        canonical::write_u64(&mut out, u64::from(fixed.policy.max_rounds));
        // What the request is and whose: the user approves what the tool will do, and no two
        // bindings (other user, tenant, arguments, or the same id again later) share a view.
        out.push_str(",\"request\":{\"arguments\":");
        write_arguments(&mut out, fixed.params_json.get());
        out.push_str(",\"binding_version\":");
        canonical::write_u64(&mut out, self.binding_version);
        out.push_str(",\"id\":");
        self.binding.live_id.write_json(&mut out);
        out.push_str(",\"method\":");
        canonical::write_string(&mut out, &fixed.method);
        out.push_str(",\"name\":");
        canonical::write_string(&mut out, &fixed.name);
        out.push_str(",\"original_id\":");
        fixed.original_id.write_json(&mut out);
        out.push_str(",\"params_sha256\":");
        canonical::write_string(&mut out, &fixed.params_sha256);
        out.push_str(",\"tenant_sha256\":");
        canonical::write_string(&mut out, &fixed.tenant_sha256);
        out.push_str(",\"user_sha256\":");
        canonical::write_string(&mut out, &fixed.user_sha256);
        out.push_str("},\"round\":");
        canonical::write_u64(&mut out, u64::from(self.number));
        out.push_str(",\"server\":");
        canonical::write_string(&mut out, &server);
        out.push_str(",\"state\":");
        match self.state {
            Some((state, sha256)) => {
                out.push_str("{\"bytes\":");
                canonical::write_u64(&mut out, u64::try_from(state.len()).unwrap_or(u64::MAX));
                out.push_str(",\"present\":true,\"sha256\":");
                canonical::write_string(&mut out, sha256);
                out.push('}');
            }
            None => out.push_str("{\"present\":false}"),
        }
        out.push_str(",\"view\":");
        canonical::write_string(&mut out, VIEW_FORMAT);
        out.push('}');
        out
    }
}
