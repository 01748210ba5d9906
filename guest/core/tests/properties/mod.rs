//! Property tests, a module per property: random operation sequences over two gate instances
//! sharing one store and one audit sink (`sequences`), random input that must never panic the
//! gate (`hostile_input`), canonical text kept canonical (`canonical_text`), and no secret in
//! the trail (`redaction`). The executable model of the rules is `model/`.

use crate::common::*;
use mrtr_gate_core::ALL_CODES;
use mrtr_gate_core::EXPIRY_GRACE_MS;
use mrtr_gate_core::audit::verify_chain;
use mrtr_gate_core::memory::ScriptedAnswer;
use mrtr_gate_core::{CallerOutcome, Denial, Policy, RequestId, ResponseVerdict};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

mod canonical_text;
mod hostile_input;
mod redaction;
mod sequences;

pub(crate) fn assert_known(d: &Denial) {
    assert!(
        ALL_CODES.contains(&d.error.code()),
        "unknown code {}",
        d.error.code()
    );
}
