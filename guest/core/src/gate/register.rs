//! `register`: bind a request before it is sent.

use super::record::{Binding, Fixed};
use super::round::Declared;
use super::{Gate, MRTR_METHODS, Registered, Registration, request_text};
use crate::canonical;
use crate::digest;
use crate::error::{CallerMisuse, GateError, HostFault};
use crate::host::Host;
use crate::json::{self, JsonError, quoted};
use crate::policy::limits;
use serde_json::Value;
use serde_json::value::RawValue;
use std::rc::Rc;

fn non_empty_principal(value: &str, field: &'static str) -> Result<(), GateError> {
    if value.is_empty() {
        return Err(GateError::from(CallerMisuse::BindingFieldMissing(field)));
    }
    if value.len() > limits::MAX_PRINCIPAL_BYTES || value.chars().any(char::is_control) {
        return Err(GateError::from(CallerMisuse::InvalidPrincipal(field)));
    }
    Ok(())
}

impl<H: Host> Gate<H> {
    pub(super) fn register_request(&mut self, r: Registration) -> Result<Registered, GateError> {
        let request_id = r.request_id.validated()?;
        non_empty_principal(&r.user, "subject")?;
        non_empty_principal(&r.tenant, "tenantId")?;
        if r.method.is_empty() {
            return Err(GateError::from(CallerMisuse::BindingFieldMissing("method")));
        }
        if !MRTR_METHODS.contains(&r.method.as_str()) {
            return Err(GateError::from(CallerMisuse::UnsupportedMethod(quoted(
                &r.method,
            ))));
        }
        if r.params_json.is_empty() {
            return Err(GateError::from(CallerMisuse::BindingFieldMissing("params")));
        }
        r.policy.validate()?;
        let params = json::parse_strict(&r.params_json, limits::PARAMS).map_err(|e| {
            GateError::from(CallerMisuse::InvalidParams(match e {
                JsonError::Syntax(w) | JsonError::Limit(w) => w,
                JsonError::DuplicateKey(k) => format!("the key `{k}` appears twice"),
            }))
        })?;
        let Value::Object(params) = params else {
            return Err(GateError::from(CallerMisuse::InvalidParams(
                "params must be an object".into(),
            )));
        };
        if params.contains_key("inputResponses") || params.contains_key("requestState") {
            return Err(GateError::from(CallerMisuse::ParamsCarriedMrtrFields));
        }
        let name_field = if r.method == "resources/read" {
            "uri"
        } else {
            "name"
        };
        let name = params
            .get(name_field)
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty() && n.len() <= limits::MAX_NAME_BYTES)
            .ok_or_else(|| {
                GateError::from(CallerMisuse::InvalidParams(format!(
                    "`{}` needs a `{name_field}` string",
                    r.method
                )))
            })?
            .to_owned();
        let audit_name = if r.method == "resources/read" {
            crate::redact::uri(&name)
        } else {
            name.clone()
        };
        let declared = Declared::from_params(&params);
        let params = Value::Object(params);
        let params_json = canonical::to_canonical(&params);
        let params_sha256 = digest::text_sha256_hex(&params_json);
        // Compared and digested canonically; sent with the client's own number digits.
        let sent = canonical::to_sent_form(&params);
        let as_raw = |text: String| {
            RawValue::from_string(text).map_err(|_| {
                GateError::from(CallerMisuse::InvalidParams("params must be json".into()))
            })
        };
        let params_sent = if sent == params_json {
            None
        } else {
            Some(as_raw(sent)?)
        };
        let params_json = as_raw(params_json)?;
        let now = self.now();
        let server = self.principals.server(&r.server);
        let fixed = Fixed {
            original_id: request_id.clone(),
            server: r.server,
            user_sha256: self.principals.user(&r.user),
            tenant_sha256: self.principals.tenant(&r.tenant),
            user: r.user,
            tenant: r.tenant,
            method: r.method,
            name,
            audit_name,
            declared,
            params_json,
            params_sent,
            params_sha256: params_sha256.clone(),
            expires_at_ms: now.saturating_add(r.policy.round_trip_lifetime_ms),
            policy: r.policy,
            created_at_ms: now,
            audited_server: super::memo::Derived::known(server.audited),
            server_key: super::memo::Derived::known(server.key),
            rendered: super::memo::Derived::new(),
        };
        let fixed_json = fixed.record_json();
        let binding = Binding {
            fixed: Rc::new(fixed),
            fixed_json: Rc::from(fixed_json),
            live_id: request_id.clone(),
            used_ids: vec![request_id.clone()],
            alias_versions: Vec::new(),
            rounds: 0,
            binding_version: None,
            open: None,
            audited: false,
            sent: true,
            params_hashed_here: true,
        };
        // Writing the record under the id's key, if the key is free, reserves the id against
        // every live binding on its server (original and retry ids share the server's key
        // space) in one step.
        let binding = match self.store.store(self.host.storage(), now, binding, 0) {
            Ok((b, _)) => b,
            Err((e, _)) => {
                return Err(match e {
                    GateError::Host(HostFault::StateAlreadyUsed) => {
                        GateError::from(CallerMisuse::RequestIdInUse)
                    }
                    other => other,
                });
            }
        };
        Ok(Registered {
            request_json: request_text(
                &request_id,
                &binding.fixed.method,
                binding.fixed.sent_params(),
            ),
            params_sha256,
            expires_at_ms: binding.fixed.expires_at_ms,
        })
    }
}
