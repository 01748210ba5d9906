//! A retry's params: members added to canonical text stay canonical.

use super::*;
use crate::properties::hostile_input::{arb_json, arb_key};

/// Keys that test canonical order where it is subtle: UTF-16 order differs from code point
/// order from U+E000 on, and escapes sort by the character, not by their text.
fn arb_ordering_key() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => arb_key(),
        1 => "\\PC{0,4}",
        1 => prop::sample::select(vec![
            "\u{e000}", "\u{ffff}", "\u{10000}", "\u{1f600}", "\u{7f}", "é", "\"", "\\", "\n",
            "inputResponses", "requestState", "",
        ])
        .prop_map(str::to_owned),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn members_added_to_canonical_text_give_the_canonical_text_of_the_whole(
        object in prop::collection::btree_map(arb_ordering_key(), arb_json(), 0..6),
        extra in prop::collection::btree_map(arb_ordering_key(), arb_json(), 0..3),
    ) {
        use mrtr_gate_core::canonical::{CanonicalObject, to_canonical};
        let object: serde_json::Map<String, Value> = object.into_iter().collect();
        let text = to_canonical(&Value::Object(object.clone()));
        let members = CanonicalObject::parse(&text);
        prop_assert!(members.is_some(), "the canonical text of an object: {}", text);
        let extra_text: Vec<(String, String)> =
            extra.iter().map(|(k, v)| (k.clone(), to_canonical(v))).collect();
        let added: Vec<(&str, &str)> =
            extra_text.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let got = members.and_then(|m| m.with(&added));
        if extra.keys().any(|k| object.contains_key(k)) {
            prop_assert_eq!(got, None, "a key already there is refused");
        } else {
            let mut whole = object;
            whole.extend(extra);
            prop_assert_eq!(got, Some(to_canonical(&Value::Object(whole))));
        }
    }

    #[test]
    fn member_lists_of_random_text_never_panic(text in "\\PC{0,40}", json in arb_json()) {
        use mrtr_gate_core::canonical::CanonicalObject;
        let _ = CanonicalObject::parse(&text).map(|m| m.with(&[("k", "1")]));
        // serde_json writes object keys in byte order, which is canonical order for the
        // keys arb_json makes: every object is read, nothing else is.
        let as_text = json.to_string();
        prop_assert_eq!(CanonicalObject::parse(&as_text).is_some(), json.is_object());
    }
}
