//! A policy's guard: the test of the round's facts Cedar evaluates first in its conditions,
//! taken out so the round's facts can answer it without Cedar (docs/policy.md, "What a round
//! costs"). Cedar evaluates a policy's scope, then its conditions in the order written, each
//! `&&` left to right, stopping at the first `false`. So when the first condition's leftmost
//! conjuncts are tests that cannot fail (`context.kinds.contains("url")`,
//! `context.inputs == 0`, `context.form_fields.containsAny([...])`, `context.deprecated`) and
//! the facts make them false, the policy can neither hold nor fail for the round, and leaving
//! it out changes no decision (tests/policies.rs holds the two to the same decisions).
//!
//! Only what is certain is taken: a context attribute of the type the schema gives it, a
//! literal of that type, and the operators that cannot fail on those types. Anything else
//! leaves the policy unguarded, evaluated by Cedar for every round its scope admits.

use crate::facts::{FIELDS, Fact, Facts};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// A test of a round's facts that cannot fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Guard {
    /// A `Bool` attribute.
    Is(&'static str),
    /// `!`.
    Not(Box<Guard>),
    /// `&&`, `||`: both sides are guards, so evaluating both is what Cedar's short circuit
    /// would conclude.
    And(Box<Guard>, Box<Guard>),
    Or(Box<Guard>, Box<Guard>),
    /// `==`, `!=` of two operands of one type.
    Eq(Operand, Operand),
    /// `<`, `<=`, `>`, `>=` of two `Long`s.
    Compare(Order, Operand, Operand),
    /// `set.contains(string)`.
    Contains(Operand, Operand),
    /// `set.containsAny(set)`, `set.containsAll(set)` of string sets.
    ContainsAny(Operand, Operand),
    ContainsAll(Operand, Operand),
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

/// A context attribute or a literal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Operand {
    Attribute(&'static str),
    Long(i64),
    Bool(bool),
    String(String),
    Set(BTreeSet<String>),
}

/// An operand's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Long,
    Bool,
    String,
    Set,
}

/// An operand's value for a round.
enum Val<'a> {
    Long(i64),
    Bool(bool),
    String(&'a str),
    Set(&'a BTreeSet<String>),
}

impl Operand {
    fn ty(&self) -> Type {
        match self {
            Operand::Attribute(name) => match Facts::default().fact(name) {
                Some(Fact::Long(_)) => Type::Long,
                Some(Fact::Bool(_)) => Type::Bool,
                Some(Fact::String(_)) => Type::String,
                // `of` only makes attributes the facts have.
                Some(Fact::Set(_)) | None => Type::Set,
            },
            Operand::Long(_) => Type::Long,
            Operand::Bool(_) => Type::Bool,
            Operand::String(_) => Type::String,
            Operand::Set(_) => Type::Set,
        }
    }

    fn value<'a>(&'a self, facts: &'a Facts) -> Option<Val<'a>> {
        Some(match self {
            Operand::Attribute(name) => match facts.fact(name)? {
                Fact::Long(n) => Val::Long(n),
                Fact::Bool(b) => Val::Bool(b),
                Fact::String(s) => Val::String(s),
                Fact::Set(s) => Val::Set(s),
            },
            Operand::Long(n) => Val::Long(*n),
            Operand::Bool(b) => Val::Bool(*b),
            Operand::String(s) => Val::String(s),
            Operand::Set(s) => Val::Set(s),
        })
    }

    /// `{".": {"left": {"Var": "context"}, "attr": NAME}}` naming an attribute of the round,
    /// or a literal `Long`, `Bool`, `String` or set of strings.
    fn of(expr: &Value) -> Option<Self> {
        let (op, arg) = single(expr)?;
        match op {
            "." => {
                let arg = arg.as_object()?;
                let left = single(arg.get("left")?)?;
                if left != ("Var", &Value::String("context".into())) {
                    return None;
                }
                let attr = arg.get("attr")?.as_str()?;
                FIELDS
                    .iter()
                    .find(|f| **f == attr)
                    .map(|f| Operand::Attribute(f))
            }
            "Value" => match arg {
                Value::Bool(b) => Some(Operand::Bool(*b)),
                Value::Number(n) => n.as_i64().map(Operand::Long),
                Value::String(s) => Some(Operand::String(s.clone())),
                Value::Array(items) => strings(items.iter().map(Some)),
                _ => None,
            },
            "Set" => {
                let items = arg.as_array()?;
                strings(items.iter().map(|item| match single(item)? {
                    ("Value", v) => Some(v),
                    _ => None,
                }))
            }
            _ => None,
        }
    }
}

/// The values of two operands for a round.
fn both<'a>(facts: &'a Facts, a: &'a Operand, b: &'a Operand) -> Option<(Val<'a>, Val<'a>)> {
    Some((a.value(facts)?, b.value(facts)?))
}

/// A set of string literals (`None` when any member is not one).
fn strings<'a>(items: impl Iterator<Item = Option<&'a Value>>) -> Option<Operand> {
    let mut set = BTreeSet::new();
    for item in items {
        set.insert(item?.as_str()?.to_owned());
    }
    Some(Operand::Set(set))
}

/// The one key of an EST node and its value.
fn single(expr: &Value) -> Option<(&str, &Value)> {
    let map: &Map<String, Value> = expr.as_object()?;
    if map.len() != 1 {
        return None;
    }
    map.iter().next().map(|(k, v)| (k.as_str(), v))
}

/// The `left` and `right` of a binary EST node.
fn sides(arg: &Value) -> Option<(&Value, &Value)> {
    let arg = arg.as_object()?;
    Some((arg.get("left")?, arg.get("right")?))
}

/// Two operands of the types `want` (either order of a symmetric operator is the caller's).
fn operands(arg: &Value, left: Type, right: Type) -> Option<(Operand, Operand)> {
    let (l, r) = sides(arg)?;
    let (l, r) = (Operand::of(l)?, Operand::of(r)?);
    (l.ty() == left && r.ty() == right).then_some((l, r))
}

impl Guard {
    /// The guard of a policy, from its EST (`Policy::to_json`): the first condition's leftmost
    /// conjuncts that are guards (an `unless` clause's body negated), if any are.
    pub(crate) fn of_policy(est: &Value) -> Option<Self> {
        let first = est.get("conditions")?.as_array()?.first()?;
        let body = first.get("body")?;
        match first.get("kind")?.as_str()? {
            "when" => Self::leftmost(body),
            "unless" => Self::of(body).map(|g| Guard::Not(Box::new(g))),
            _ => None,
        }
    }

    /// A policy's whole condition (every clause, each `unless` negated), when every clause is a
    /// guard: the policy then holds exactly when its scope admits the round and this holds,
    /// and can never fail to evaluate.
    pub(crate) fn of_conditions(est: &Value) -> Option<Self> {
        let mut whole: Option<Guard> = None;
        for clause in est.get("conditions")?.as_array()? {
            let body = Self::of(clause.get("body")?)?;
            let test = match clause.get("kind")?.as_str()? {
                "when" => body,
                "unless" => Guard::Not(Box::new(body)),
                _ => return None,
            };
            whole = Some(match whole {
                Some(before) => Guard::And(Box::new(before), Box::new(test)),
                None => test,
            });
        }
        // No condition: the scope alone decides, as Cedar's `true` would.
        Some(whole.unwrap_or(Guard::Eq(Operand::Bool(true), Operand::Bool(true))))
    }

    /// `expr` as a guard, or else the guard of its left conjunct (evaluated first).
    fn leftmost(expr: &Value) -> Option<Self> {
        if let Some(guard) = Self::of(expr) {
            return Some(guard);
        }
        match single(expr)? {
            ("&&", arg) => Self::leftmost(sides(arg)?.0),
            _ => None,
        }
    }

    /// `expr` as a whole, as a guard.
    fn of(expr: &Value) -> Option<Self> {
        let (op, arg) = single(expr)?;
        let order = |o| {
            let (l, r) = operands(arg, Type::Long, Type::Long)?;
            Some(Guard::Compare(o, l, r))
        };
        match op {
            "." => match Operand::of(expr)? {
                a @ Operand::Attribute(name) if a.ty() == Type::Bool => Some(Guard::Is(name)),
                _ => None,
            },
            "!" => Some(Guard::Not(Box::new(Self::of(arg.get("arg")?)?))),
            "&&" | "||" => {
                let (l, r) = sides(arg)?;
                let (l, r) = (Box::new(Self::of(l)?), Box::new(Self::of(r)?));
                Some(if op == "&&" {
                    Guard::And(l, r)
                } else {
                    Guard::Or(l, r)
                })
            }
            "==" | "!=" => {
                let (l, r) = sides(arg)?;
                let (l, r) = (Operand::of(l)?, Operand::of(r)?);
                if l.ty() != r.ty() {
                    return None;
                }
                let eq = Guard::Eq(l, r);
                Some(if op == "==" {
                    eq
                } else {
                    Guard::Not(Box::new(eq))
                })
            }
            // The resource's one parent is the round's server (`Server`'s id is the `server`
            // attribute), and a resource is never a server: `resource in Mrtr::Server::"x"`
            // is `context.server == "x"`.
            "in" => {
                let (l, r) = sides(arg)?;
                if single(l)? != ("Var", &Value::String("resource".into())) {
                    return None;
                }
                let entity = match single(r)? {
                    ("Value", v) => v.get("__entity")?,
                    _ => return None,
                };
                if entity.get("type")?.as_str()? != "Mrtr::Server" {
                    return None;
                }
                let id = entity.get("id")?.as_str()?.to_owned();
                Some(Guard::Eq(Operand::Attribute("server"), Operand::String(id)))
            }
            "<" => order(Order::Less),
            "<=" => order(Order::LessOrEqual),
            ">" => order(Order::Greater),
            ">=" => order(Order::GreaterOrEqual),
            "contains" => {
                let (l, r) = operands(arg, Type::Set, Type::String)?;
                Some(Guard::Contains(l, r))
            }
            "containsAny" => {
                let (l, r) = operands(arg, Type::Set, Type::Set)?;
                Some(Guard::ContainsAny(l, r))
            }
            "containsAll" => {
                let (l, r) = operands(arg, Type::Set, Type::Set)?;
                Some(Guard::ContainsAll(l, r))
            }
            _ => None,
        }
    }

    /// Whether the guard holds for the round `facts`. `true` when it cannot tell (an operand
    /// of another type than compiled, which `of` rules out): the policy is then evaluated.
    pub(crate) fn holds(&self, facts: &Facts) -> bool {
        self.eval(facts).unwrap_or(true)
    }

    /// Whether the guard holds for the round `facts`; `None` when it cannot tell (which `of`
    /// rules out), for a caller that must then fail closed.
    pub(crate) fn eval(&self, facts: &Facts) -> Option<bool> {
        let both = |a, b| both(facts, a, b);
        Some(match self {
            Guard::Is(name) => match facts.fact(name)? {
                Fact::Bool(b) => b,
                _ => return None,
            },
            Guard::Not(g) => !g.eval(facts)?,
            Guard::And(a, b) => a.eval(facts)? && b.eval(facts)?,
            Guard::Or(a, b) => a.eval(facts)? || b.eval(facts)?,
            Guard::Eq(a, b) => match both(a, b)? {
                (Val::Long(a), Val::Long(b)) => a == b,
                (Val::Bool(a), Val::Bool(b)) => a == b,
                (Val::String(a), Val::String(b)) => a == b,
                (Val::Set(a), Val::Set(b)) => a == b,
                _ => return None,
            },
            Guard::Compare(order, a, b) => match both(a, b)? {
                (Val::Long(a), Val::Long(b)) => match order {
                    Order::Less => a < b,
                    Order::LessOrEqual => a <= b,
                    Order::Greater => a > b,
                    Order::GreaterOrEqual => a >= b,
                },
                _ => return None,
            },
            Guard::Contains(a, b) => match both(a, b)? {
                (Val::Set(set), Val::String(s)) => set.contains(s),
                _ => return None,
            },
            Guard::ContainsAny(a, b) => match both(a, b)? {
                (Val::Set(a), Val::Set(b)) => !a.is_disjoint(b),
                _ => return None,
            },
            Guard::ContainsAll(a, b) => match both(a, b)? {
                (Val::Set(a), Val::Set(b)) => b.is_subset(a),
                _ => return None,
            },
        })
    }
}
