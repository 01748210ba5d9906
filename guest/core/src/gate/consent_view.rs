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
pub const VIEW_FORMAT: &str = "mrtr-gate/consent-view/v1";

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
    fn effect(&self, server: &str) -> String {
        match self {
            Self::Form { key, fields, .. } => format!(
                "{key}: what you enter in {} field(s) is sent to {server}",
                fields.len()
            ),
            Self::Url { key, url, .. } => format!(
                "{key}: accepting opens {} in your browser; the client and the model cannot see the page",
                url.full
            ),
            Self::Roots { key } => format!("{key}: your workspace roots are sent to {server}"),
            Self::Sampling { key, .. } => {
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

/// One round's view, before it is written.
pub(crate) struct RoundView<'a> {
    /// The binding the round belongs to.
    pub binding: &'a Binding,
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
        out.push_str(",\"request\":{\"id\":");
        self.binding.live_id.write_json(&mut out);
        out.push_str(",\"method\":");
        canonical::write_string(&mut out, &fixed.method);
        out.push_str(",\"name\":");
        canonical::write_string(&mut out, &fixed.name);
        out.push_str(",\"original_id\":");
        fixed.original_id.write_json(&mut out);
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
