//! Form `requestedSchema`: the MCP primitive subset, checked by whitelist.
//!
//! The spec allows a flat object of primitive properties (string, number/integer, boolean,
//! single- and multi-select enums) plus pure annotations. Anything else (`$ref`, nesting,
//! `pattern`, unknown keywords, `additionalProperties`, ...) is refused rather than
//! ignored: a keyword the gate does not understand is a keyword it cannot show the user.
//!
//! An accepted schema becomes a [`FormSchema`]: the fields as the consent view shows them
//! and the digest of the schema as the server sent it. The fields are also the compiled
//! form of the schema: [`FormSchema::validate`] checks content against them directly, with
//! no schema compiler in the sandbox (that keeps the component small and a never-seen
//! schema as cheap as a known one). Content may hold no field outside the schema
//! (`additionalProperties: false`): the user consented to the fields shown, nothing more.
//! [`FormSchema::json_schema`] gives the equivalent JSON Schema, which the differential
//! tests run through `jsonschema` as the reference.
//!
//! The module's parts: [`check`] (a server's schema against the subset) and [`content`] (the
//! user's answers against an accepted schema); schemas checked before are remembered with
//! the gate's other memos (`gate::memo`).

mod check;
mod content;

#[cfg(test)]
pub use check::check_form_schema;
pub(crate) use check::check_measured;
pub(crate) use check::non_negative_integer;
pub use content::{Broken, SchemaMismatch};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The formats the spec allows on string fields.
pub const FORMATS: [&str; 4] = ["email", "uri", "date", "date-time"];

/// One option of a select field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelectOption {
    /// The value sent.
    pub value: String,
    /// The label shown, when the server gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The kind and constraints of a field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FieldKind {
    /// Free text.
    String {
        /// Fewest characters.
        #[serde(skip_serializing_if = "Option::is_none")]
        min_length: Option<u64>,
        /// Most characters.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_length: Option<u64>,
        /// `email`, `uri`, `date` or `date-time`.
        #[serde(skip_serializing_if = "Option::is_none")]
        format: Option<String>,
    },
    /// A number (`integer` when whole numbers only).
    Number {
        /// Whole numbers only.
        integer: bool,
        /// Smallest value.
        #[serde(skip_serializing_if = "Option::is_none")]
        minimum: Option<serde_json::Number>,
        /// Largest value.
        #[serde(skip_serializing_if = "Option::is_none")]
        maximum: Option<serde_json::Number>,
    },
    /// Yes or no.
    Boolean,
    /// One of the options.
    SingleSelect {
        /// The options, in the server's order.
        options: Vec<SelectOption>,
    },
    /// Some of the options.
    MultiSelect {
        /// The options, in the server's order.
        options: Vec<SelectOption>,
        /// Fewest options.
        #[serde(skip_serializing_if = "Option::is_none")]
        min_items: Option<u64>,
        /// Most options.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_items: Option<u64>,
    },
}

/// A field as the consent view shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormField {
    /// The property name (the key in `content`).
    pub name: String,
    /// The server's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The server's description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Must the user fill it in.
    pub required: bool,
    /// The server's suggested value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Kind and constraints.
    #[serde(flatten)]
    pub kind: FieldKind,
}

/// An accepted form schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormSchema {
    /// SHA-256 of the schema as the server sent it (canonical JSON).
    pub schema_sha256: String,
    /// The fields, sorted by name.
    pub fields: Vec<FormField>,
}
