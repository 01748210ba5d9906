//! [`DecidedConsent`]: consent from decisions the host recorded before the gate asks (a dialog
//! the host showed and the user answered, then `build_retry`): the host records the user's
//! decision for the verdict it got and the answers it will send, in one call; the gate's
//! `request-consent` then finds exactly that decision.

use mrtr_gate_core::host::{Consent, ConsentMethod, ConsentPrompt, ConsentReceipt, HostError};
use mrtr_gate_core::{AcceptedRound, GateError, canonical_responses, digest};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// One decision, waiting for the prompt it was made for.
#[derive(Clone, Debug)]
struct Decision {
    receipt_id: String,
    granted: bool,
    method: ConsentMethod,
}

/// The decisions waiting, by (view digest, answers digest), and how many were recorded.
#[derive(Debug, Default)]
struct Decisions {
    recorded: u64,
    by_prompt: HashMap<(String, String), Decision>,
}

/// Decisions recorded with [`DecidedConsent::decide_for`], each found once by the prompt for
/// exactly that view and those answers; a prompt nobody decided on is a host error, which
/// the gate denies as `consent_unavailable`.
#[derive(Debug, Default)]
pub struct DecidedConsent {
    decisions: Mutex<Decisions>,
}

impl DecidedConsent {
    /// No decisions yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record that the user, shown `round`'s view, decided (`granted`) on the answers
    /// `responses_json` (the `inputResponses` the host then passes to `build_retry`), in the
    /// way `method` says. The package digests the answers as the gate will; answers the gate
    /// would refuse (not an object, duplicate keys, over the limits) are refused here too.
    /// Returns the receipt id the trail will record.
    pub fn decide_for(
        &self,
        round: &AcceptedRound,
        responses_json: &str,
        granted: bool,
        method: ConsentMethod,
    ) -> Result<String, GateError> {
        let responses_sha256 = digest::sha256_hex(canonical_responses(responses_json)?.as_bytes());
        let mut d = self
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        d.recorded = d.recorded.saturating_add(1);
        let receipt_id = format!("consent-{}", d.recorded);
        d.by_prompt.insert(
            (round.view_sha256.clone(), responses_sha256),
            Decision {
                receipt_id: receipt_id.clone(),
                granted,
                method,
            },
        );
        Ok(receipt_id)
    }
}

impl Consent for DecidedConsent {
    fn request_consent(&self, prompt: &ConsentPrompt) -> Result<ConsentReceipt, HostError> {
        let key = (prompt.view_sha256.clone(), prompt.responses_sha256.clone());
        let decision = self
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_prompt
            .remove(&key)
            .ok_or_else(|| {
                HostError::new("no decision was made for this view and these answers")
            })?;
        Ok(ConsentReceipt::for_prompt(
            prompt,
            decision.receipt_id,
            decision.granted,
            decision.method,
        ))
    }
}
