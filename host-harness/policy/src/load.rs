//! A policy file, read: bounded before Cedar sees it (size, nesting), parsed, every policy
//! named, and validated against the schema in Cedar's strict mode. Each mistake is a
//! [`PolicyError`] with the line (and column) Cedar's own diagnostics point at.

use crate::{ASK_ANNOTATION, ID_ANNOTATION, Policies, SCHEMA};
use cedar_policy::{Effect, Policy, PolicyId, PolicySet, Schema, ValidationMode, Validator};
use miette::Diagnostic;
use std::collections::{HashMap, HashSet};

/// The largest policy file, in bytes.
pub const MAX_POLICY_BYTES: usize = 1 << 20;
/// The deepest nesting of brackets (`(`, `[`, `{`) a policy file may have.
pub const MAX_NESTING: usize = 64;
/// The longest policy id (`@id`): it goes into a receipt id of at most 128 bytes.
const MAX_ID_BYTES: usize = 100;
/// The stack the parse and validation run on: Cedar turns long chains of operators into deep
/// trees, and a file at [`MAX_POLICY_BYTES`] must fail as an error, not overflow a thread's
/// default stack.
const LOAD_STACK_BYTES: usize = 256 << 20;

/// One mistake, where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line (0: the file as a whole).
    pub line: usize,
    /// 1-based column (0: unknown).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (0, _) => write!(f, "{}", self.message),
            (line, 0) => write!(f, "line {line}: {}", self.message),
            (line, column) => write!(f, "line {line}, column {column}: {}", self.message),
        }
    }
}

/// Why a policy file is refused (the operator's mistake: cause `caller`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyError {
    /// Over [`MAX_POLICY_BYTES`] (`policy_too_large`).
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// Brackets nested deeper than [`MAX_NESTING`] (`policy_too_deep`).
    TooDeep {
        /// Where the limit is passed.
        line: usize,
    },
    /// Not Cedar (`policy_unparsable`).
    Unparsable(Vec<Problem>),
    /// A policy the schema refuses (`policy_invalid`).
    Invalid(Vec<Problem>),
    /// An `@id` that is empty, too long, not printable ASCII, or given twice
    /// (`policy_bad_id`).
    BadId(Problem),
    /// A template, or an `@ask` on a `permit` (`policy_unsupported`).
    Unsupported(Problem),
}

impl PolicyError {
    /// The stable snake_case code (docs/errors.md).
    pub fn code(&self) -> &'static str {
        match self {
            PolicyError::TooLarge { .. } => "policy_too_large",
            PolicyError::TooDeep { .. } => "policy_too_deep",
            PolicyError::Unparsable(_) => "policy_unparsable",
            PolicyError::Invalid(_) => "policy_invalid",
            PolicyError::BadId(_) => "policy_bad_id",
            PolicyError::Unsupported(_) => "policy_unsupported",
        }
    }

    /// Every problem, with its line.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            PolicyError::TooLarge { bytes } => vec![Problem {
                line: 0,
                column: 0,
                message: format!("{bytes} bytes, over {MAX_POLICY_BYTES}"),
            }],
            PolicyError::TooDeep { line } => vec![Problem {
                line: *line,
                column: 0,
                message: format!("brackets nested deeper than {MAX_NESTING}"),
            }],
            PolicyError::Unparsable(p) | PolicyError::Invalid(p) => p.clone(),
            PolicyError::BadId(p) | PolicyError::Unsupported(p) => vec![p.clone()],
        }
    }
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let problems: Vec<String> = self.problems().iter().map(ToString::to_string).collect();
        write!(f, "{}: {}", self.code(), problems.join("; "))
    }
}

impl std::error::Error for PolicyError {}

/// The 1-based line and column of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// How many bytes of `source` come before its first character that is neither whitespace nor
/// in a `//` comment: where a statement's policy starts.
fn leading(source: &str) -> usize {
    let mut at = 0;
    for line in source.split_inclusive('\n') {
        let body = line.trim_start();
        if body.is_empty() || body.starts_with("//") {
            at += line.len();
        } else {
            return at + (line.len() - body.len());
        }
    }
    at
}

/// A Cedar diagnostic about the statement at `offset` as problems: one per labelled span (its
/// line in the file), or one at the statement.
fn problems(text: &str, offset: usize, d: &dyn Diagnostic) -> Vec<Problem> {
    let mut message = d.to_string();
    if let Some(help) = d.help() {
        message = format!("{message} ({help})");
    }
    let spans: Vec<usize> = d
        .labels()
        .map(|labels| labels.map(|l| l.offset()).collect())
        .unwrap_or_default();
    if spans.is_empty() {
        let (line, column) = position(text, offset);
        return vec![Problem {
            line,
            column,
            message,
        }];
    }
    spans
        .into_iter()
        .map(|at| {
            let (line, column) = position(text, offset + at);
            Problem {
                line,
                column,
                message: message.clone(),
            }
        })
        .collect()
}

/// The file's statements: each policy's text and its byte offset, split at the `;` that ends
/// it (outside strings, comments and brackets); or the line where brackets first nest deeper
/// than [`MAX_NESTING`]. Text after the last `;` that is not blank is a statement too (Cedar
/// says what is wrong with it).
fn statements(text: &str) -> Result<Vec<(usize, &str)>, usize> {
    let (mut depth, mut line, mut start) = (0usize, 1usize, 0usize);
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\n' => line += 1,
            '"' => {
                // A string literal, escapes included; a newline in it still counts.
                while let Some((_, s)) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' => line += 1,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek().is_some_and(|(_, n)| *n == '/') => {
                for (_, s) in chars.by_ref() {
                    if s == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(line);
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            ';' if depth == 0 => {
                let end = at + c.len_utf8();
                out.push((start, text.get(start..end).unwrap_or_default()));
                start = end;
            }
            _ => {}
        }
    }
    let rest = text.get(start..).unwrap_or_default();
    if !blank(rest) {
        out.push((start, rest));
    }
    Ok(out)
}

/// Whether `text` holds nothing but whitespace and `//` comments.
fn blank(text: &str) -> bool {
    text.lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with("//"))
}

/// [`Policies::parse`], on a thread with room for Cedar's recursion.
pub(crate) fn load(text: &str) -> Result<Policies, PolicyError> {
    if text.len() > MAX_POLICY_BYTES {
        return Err(PolicyError::TooLarge { bytes: text.len() });
    }
    if let Err(line) = statements(text) {
        return Err(PolicyError::TooDeep { line });
    }
    let owned = text.to_owned();
    let worker = std::thread::Builder::new()
        .name("mrtr-gate-policy-load".into())
        .stack_size(LOAD_STACK_BYTES)
        .spawn(move || load_here(&owned));
    match worker.map(std::thread::JoinHandle::join) {
        Ok(Ok(loaded)) => loaded,
        // A panic inside Cedar, or no thread: refused, never allowed.
        Ok(Err(_)) | Err(_) => Err(PolicyError::Unparsable(vec![Problem {
            line: 0,
            column: 0,
            message: "the policy file could not be read".into(),
        }])),
    }
}

fn load_here(text: &str) -> Result<Policies, PolicyError> {
    let (schema, _) = Schema::from_cedarschema_str(SCHEMA).map_err(|e| {
        PolicyError::Invalid(vec![Problem {
            line: 0,
            column: 0,
            message: format!("the built-in schema: {e}"),
        }])
    })?;
    let statements = statements(text).map_err(|line| PolicyError::TooDeep { line })?;
    // Every policy under its `@id`, or its position (`policy1`, … in the file's order).
    let mut set = PolicySet::new();
    let mut ask = HashSet::new();
    let mut ids = Vec::new();
    let mut offsets = HashMap::new();
    let mut unparsable = Vec::new();
    for (n, (offset, source)) in statements.into_iter().enumerate() {
        let policy = match Policy::parse(None, source) {
            Ok(p) => p,
            Err(e) => {
                for error in e.iter() {
                    unparsable.extend(problems(text, offset, error));
                }
                continue;
            }
        };
        let (line, column) = position(text, offset + leading(source));
        let at = |message: String| Problem {
            line,
            column,
            message,
        };
        let id = match policy.annotation(ID_ANNOTATION) {
            Some(id) => {
                if id.is_empty()
                    || id.len() > MAX_ID_BYTES
                    || !id.bytes().all(|b| b.is_ascii_graphic())
                {
                    return Err(PolicyError::BadId(at(format!(
                        "@id must be 1 to {MAX_ID_BYTES} printable ASCII characters, no space"
                    ))));
                }
                id.to_owned()
            }
            None => format!("policy{}", n + 1),
        };
        if offsets.contains_key(&id) {
            return Err(PolicyError::BadId(at(format!("@id {id:?} is given twice"))));
        }
        let asks = policy.annotation(ASK_ANNOTATION).is_some();
        if asks && policy.effect() != Effect::Forbid {
            return Err(PolicyError::Unsupported(at(
                "@ask on a permit: only a forbid can send a round to the configured consent".into(),
            )));
        }
        let named = policy.new_id(PolicyId::new(id.clone()));
        if asks {
            ask.insert(named.id().clone());
        }
        set.add(named)
            .map_err(|e| PolicyError::BadId(at(e.to_string())))?;
        offsets.insert(id.clone(), offset);
        ids.push(id);
    }
    if !unparsable.is_empty() {
        return Err(PolicyError::Unparsable(unparsable));
    }
    let validated = Validator::new(schema.clone()).validate(&set, ValidationMode::Strict);
    let mut invalid = Vec::new();
    for error in validated.validation_errors() {
        let offset = offsets
            .get(&error.policy_id().to_string())
            .copied()
            .unwrap_or(0);
        invalid.extend(problems(text, offset, error));
    }
    if !invalid.is_empty() {
        return Err(PolicyError::Invalid(invalid));
    }
    let scopes = crate::scope::Scopes::new(&set).map_err(|e| {
        PolicyError::Invalid(vec![Problem {
            line: 0,
            column: 0,
            message: e,
        }])
    })?;
    Ok(Policies {
        set,
        scopes,
        schema,
        ask,
        ids,
    })
}
