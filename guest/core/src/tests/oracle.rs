//! Differential tests: the gate's own validator for the MCP primitive subset against
//! `jsonschema` (the reference, draft-07 with format assertion on), over random schemas
//! and random content. Without formats the two must agree exactly; with formats the gate
//! may refuse more, never accept more (e.g. `email` takes IDNA A-labels of a few scripts'
//! letters only, where the reference takes any IDNA2008 PVALID label: see docs/errors.md).

use crate::formats;
use crate::schema::check_form_schema;
use proptest::prelude::*;
use serde_json::{Value, json};

fn reference(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .should_validate_formats(true)
        .build(schema)
        .unwrap()
}

fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop_oneof![Just(None), s.prop_map(Some)]
}

const OPTIONS: [&str; 4] = ["a", "b", "c", "ü"];

/// One property schema of the primitive subset.
fn property(with_formats: bool) -> impl Strategy<Value = Value> {
    let format = if with_formats {
        opt(prop::sample::select(vec![
            "email",
            "uri",
            "date",
            "date-time",
        ]))
        .boxed()
    } else {
        Just(None).boxed()
    };
    let string = (opt(0u64..4), opt(0u64..6), format).prop_map(|(lo, hi, f)| {
        let mut p = json!({"type": "string"});
        let (lo, hi) = match (lo, hi) {
            (Some(a), Some(b)) if a > b => (Some(b), Some(a)),
            x => x,
        };
        if let Some(v) = lo {
            p["minLength"] = json!(v);
        }
        if let Some(v) = hi {
            p["maxLength"] = json!(v);
        }
        if let Some(f) = f {
            p["format"] = json!(f);
        }
        p
    });
    let number = (any::<bool>(), opt(-5i64..5), opt(-5i64..5), any::<bool>()).prop_map(
        |(int, lo, hi, frac)| {
            let mut p = json!({"type": if int { "integer" } else { "number" }});
            let (lo, hi) = match (lo, hi) {
                (Some(a), Some(b)) if a > b => (Some(b), Some(a)),
                x => x,
            };
            if let Some(v) = lo {
                p["minimum"] = if frac {
                    json!(v as f64 + 0.5)
                } else {
                    json!(v)
                };
            }
            if let Some(v) = hi {
                p["maximum"] = if frac {
                    json!(v as f64 + 0.5)
                } else {
                    json!(v)
                };
            }
            if let (Some(a), Some(b)) = (
                p.get("minimum").and_then(Value::as_f64),
                p.get("maximum").and_then(Value::as_f64),
            ) && a > b
            {
                p.as_object_mut().unwrap().remove("maximum");
            }
            p
        },
    );
    let select = (1usize..=4, any::<bool>()).prop_map(|(n, titled)| {
        let values: Vec<&str> = OPTIONS[..n].to_vec();
        if titled {
            json!({"type": "string", "oneOf": values.iter().map(|v| json!({"const": v, "title": v})).collect::<Vec<_>>()})
        } else {
            json!({"type": "string", "enum": values})
        }
    });
    let multi = (1usize..=4, any::<bool>(), opt(0u64..3), opt(0u64..4)).prop_map(|(n, titled, lo, hi)| {
        let values: Vec<&str> = OPTIONS[..n].to_vec();
        let items = if titled {
            json!({"anyOf": values.iter().map(|v| json!({"const": v, "title": v})).collect::<Vec<_>>()})
        } else {
            json!({"type": "string", "enum": values})
        };
        let mut p = json!({"type": "array", "items": items});
        let (lo, hi) = match (lo, hi) {
            (Some(a), Some(b)) if a > b => (Some(b), Some(a)),
            x => x,
        };
        if let Some(v) = lo {
            p["minItems"] = json!(v);
        }
        if let Some(v) = hi {
            p["maxItems"] = json!(v);
        }
        p
    });
    prop_oneof![
        string,
        number,
        Just(json!({"type": "boolean"})),
        select,
        multi
    ]
}

fn schema(with_formats: bool) -> impl Strategy<Value = Value> {
    prop::collection::vec((property(with_formats), any::<bool>()), 1..5).prop_map(|props| {
        let names = ["p0", "p1", "p2", "p3", "p4"];
        let mut properties = serde_json::Map::new();
        let mut required = Vec::new();
        for (i, (p, req)) in props.into_iter().enumerate() {
            properties.insert(names[i].into(), p);
            if req {
                required.push(names[i]);
            }
        }
        json!({"type": "object", "properties": properties, "required": required})
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-cü]{0,6}",
        "[a-z0-9.@_+-]{0,12}",
        "[0-9:TZ.+-]{0,25}",
        "(19|20)[0-9]{2}-[01][0-9]-[0-3][0-9](T[0-2][0-9]:[0-6][0-9]:[0-6][0-9](\\.[0-9]{1,3})?(Z|[+-][0-2][0-9]:[0-6][0-9]))?",
        "[a-z]{1,5}@[a-z]{1,5}(\\.[a-z-]{1,4}){0,2}",
        "[a-z]{1,5}:(//)?[a-z0-9@:%./?#\\[\\]-]{0,15}",
        ".{0,8}",
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        text().prop_map(Value::String),
        (-7i64..7).prop_map(Value::from),
        (-7.0f64..7.0).prop_map(|f| json!((f * 4.0).round() / 4.0)),
        any::<bool>().prop_map(Value::Bool),
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "ü", "z"]), 0..5)
            .prop_map(|v| json!(v)),
        Just(Value::Null),
        Just(json!({"nested": 1})),
    ]
}

fn content() -> impl Strategy<Value = Value> {
    prop_oneof![
        9 => prop::collection::btree_map(prop::sample::select(vec!["p0", "p1", "p2", "p3", "p4", "extra"]), value(), 0..6)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        1 => value(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Without formats the gate's validator and the reference agree on every content.
    #[test]
    fn agrees_with_jsonschema_without_formats(raw in schema(false), c in content()) {
        let form = check_form_schema(&raw).unwrap();
        let theirs = reference(&form.json_schema()).is_valid(&c);
        prop_assert_eq!(form.validate(&c), theirs, "schema {} content {}", form.json_schema(), c);
    }

    /// One field at a time, so no other field masks a difference: exact agreement.
    #[test]
    fn agrees_field_by_field(p in property(false), v in value(), required in any::<bool>()) {
        let raw = json!({"type": "object", "properties": {"p0": p}, "required": if required { vec!["p0"] } else { vec![] }});
        let form = check_form_schema(&raw).unwrap();
        let c = json!({"p0": v});
        let theirs = reference(&form.json_schema()).is_valid(&c);
        prop_assert_eq!(form.validate(&c), theirs, "schema {} content {}", form.json_schema(), c);
    }

    /// With formats, field by field: the gate never accepts what the reference refuses.
    #[test]
    fn format_fields_never_more_permissive(p in property(true), v in value()) {
        let raw = json!({"type": "object", "properties": {"p0": p}});
        let form = check_form_schema(&raw).unwrap();
        let c = json!({"p0": v});
        if form.validate(&c) {
            prop_assert!(reference(&form.json_schema()).is_valid(&c), "schema {} content {}", form.json_schema(), c);
        }
    }

    /// With formats the gate never accepts what the reference refuses.
    #[test]
    fn never_more_permissive_than_jsonschema(raw in schema(true), c in content()) {
        let form = check_form_schema(&raw).unwrap();
        if form.validate(&c) {
            prop_assert!(reference(&form.json_schema()).is_valid(&c), "schema {} content {}", form.json_schema(), c);
        }
    }

    /// Each format check accepts a subset of what the reference's format check accepts.
    #[test]
    fn formats_are_a_subset_of_the_reference(s in text()) {
        for f in ["email", "uri", "date", "date-time"] {
            if formats::check(f, &s) {
                let v = reference(&json!({"type": "string", "format": f}));
                prop_assert!(v.is_valid(&json!(s)), "{} accepted `{}`", f, s);
            }
        }
    }
}

/// The subset is not trivially small: common values are accepted by both.
#[test]
fn common_values_pass_both() {
    for (f, s) in [
        ("email", "alice@example.com"),
        ("email", "first.last+tag@mail.example.co.uk"),
        ("uri", "https://example.com/path?q=1#frag"),
        ("uri", "urn:isbn:0451450523"),
        ("date", "2026-12-02"),
        ("date-time", "2026-12-02T10:28:19Z"),
        ("date-time", "2026-12-02T10:28:19.123+01:00"),
    ] {
        assert!(formats::check(f, s), "{f} {s}");
        assert!(
            reference(&json!({"type": "string", "format": f})).is_valid(&json!(s)),
            "{f} {s}"
        );
    }
}

/// A schema of the subset, or one mutated so that the check may refuse it (a count turned
/// into a fraction, or into a float with a zero fraction, which it accepts; a type changed;
/// a property dropped from `properties` but still required).
fn maybe_broken_schema() -> impl Strategy<Value = Value> {
    (schema(true), 0u8..6).prop_map(|(mut s, how)| {
        match how {
            0 => {
                if let Some(p) = s["properties"]["p0"].as_object_mut()
                    && p.contains_key("maxLength")
                {
                    p.insert("maxLength".into(), json!(3.5));
                }
            }
            3 => {
                if let Some(p) = s["properties"]["p0"].as_object_mut()
                    && p.contains_key("maxLength")
                {
                    p.insert("maxLength".into(), json!(3.0));
                }
            }
            1 => s["properties"]["p0"]["type"] = json!("object"),
            2 => {
                if let Some(props) = s["properties"].as_object_mut() {
                    props.remove("p0");
                }
                s["required"] = json!(["p0"]);
            }
            _ => {}
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The schema cache never changes a verdict: over a random sequence with repeats, every
    /// answer equals the check's own, and the cache stays within its bound.
    #[test]
    fn the_schema_cache_answers_as_the_check_does(
        pool in prop::collection::vec(maybe_broken_schema(), 1..12),
        picks in prop::collection::vec(0usize..12, 1..40),
    ) {
        use crate::gate::{SCHEMA_CACHE_ENTRIES, SchemaCache};
        let mut cache = SchemaCache::default();
        for pick in picks {
            let schema = &pool[pick % pool.len()];
            prop_assert_eq!(cache.check(schema), check_form_schema(schema), "schema {}", schema);
            prop_assert!(cache.len() <= SCHEMA_CACHE_ENTRIES);
        }
    }
}

/// Email domains in IDNA A-label form (Latin, Cyrillic, Greek, Hebrew, Arabic, kana, CJK,
/// Hangul) pass both; the same domains as Unicode (U-labels, `idn-email`) pass neither.
#[test]
fn idna_a_label_emails_pass_both_and_u_labels_neither() {
    let email =
        |s: &str| reference(&json!({"type": "string", "format": "email"})).is_valid(&json!(s));
    for unicode in [
        "bücher.example",
        "яндекс.рф",
        "παράδειγμα.example",
        "דוגמה.example",
        "مثال.example",
        "例え.jp",
        "テスト.example",
        "한국.example",
        "straße.example",
    ] {
        let ascii = unicode
            .split('.')
            .map(|l| {
                if l.is_ascii() {
                    l.to_owned()
                } else {
                    format!("xn--{}", idna::punycode::encode_str(l).unwrap())
                }
            })
            .collect::<Vec<_>>()
            .join(".");
        let a = format!("user@{ascii}");
        assert!(formats::check("email", &a), "gate refused {a}");
        assert!(email(&a), "reference refused {a}");
        let u = format!("user@{unicode}");
        assert!(!formats::check("email", &u), "gate accepted {u}");
        assert!(!email(&u), "reference accepted {u}");
    }
}

/// Labels the gate's A-label rule could meet: Punycode of letters it takes, of other
/// characters (marks, digits, symbols, the contextual ones), and random Punycode text.
fn a_label() -> impl Strategy<Value = String> {
    let chars = prop::sample::select(vec![
        'a',
        'z',
        '0',
        '-',
        'ü',
        'ß',
        'я',
        'ά',
        'ς',
        'א',
        'ب',
        'ـ',
        'あ',
        'ア',
        '・',
        '例',
        '한',
        '\u{0301}',
        '\u{0660}',
        '\u{06F0}',
        '·',
        '\u{0375}',
        '\u{200D}',
        '☃',
        'Ⓐ',
        'Ⅻ',
        '²',
        'É',
        '\u{1F150}',
        '\u{0903}',
        '\u{3007}',
    ]);
    prop_oneof![
        prop::collection::vec(chars, 1..6).prop_map(|cs| {
            let s: String = cs.into_iter().collect();
            format!("xn--{}", idna::punycode::encode_str(&s).unwrap_or_default())
        }),
        "xn--[a-z0-9-]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// An A-label domain the gate's `email` accepts, the reference accepts too.
    #[test]
    fn a_label_emails_are_a_subset_of_the_reference(label in a_label()) {
        let s = format!("user@{label}.example");
        if formats::check("email", &s) {
            let v = reference(&json!({"type": "string", "format": "email"}));
            prop_assert!(v.is_valid(&json!(s)), "email accepted `{}`", s);
        }
    }
}
