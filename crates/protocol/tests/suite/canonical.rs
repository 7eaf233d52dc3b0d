//! Canonical JSON and digests (`runtime-protocol.md` §17, `agent-jobs.md` §9.11).

use openphone_protocol::canonical::{
    CanonicalError, canonical_json, format_js_number, parse_json_strict,
};
use openphone_protocol::{params_hash, value_hash};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn canon(text: &str) -> String {
    canonical_json(&parse_json_strict(text).unwrap()).unwrap()
}

#[test]
fn spec_reference_vector() {
    let params = parse_json_strict(r#"{"to":"+15551234567","body":"on my way"}"#).unwrap();
    let text = canonical_json(&params).unwrap();
    assert_eq!(text, r#"{"body":"on my way","to":"+15551234567"}"#);
    assert_eq!(text.len(), 40);
    assert_eq!(
        params_hash(&params).unwrap(),
        "sha256:1e920af2c02daa49a449d1ebe938e08f196a9dfa6a3c05b36adbabbd7387193b"
    );
}

#[test]
fn keys_sort_by_code_point_at_every_depth() {
    // U+1F600 (astral) sorts after U+FFFD by code point, though UTF-16 order would put it first.
    assert_eq!(
        canon("{\"\u{1F600}\":1,\"\u{FFFD}\":2}"),
        "{\"\u{FFFD}\":2,\"\u{1F600}\":1}"
    );
    assert_eq!(
        canon(r#"{"b":{"d":1,"c":[{"z":0,"a":0}]},"a":null,"B":true}"#),
        r#"{"B":true,"a":null,"b":{"c":[{"a":0,"z":0}],"d":1}}"#
    );
    assert_eq!(canon(r#"{"é":1,"e":2,"z":3}"#), r#"{"e":2,"z":3,"é":1}"#);
}

#[test]
fn strings_escape_only_what_the_spec_says() {
    assert_eq!(
        canon(r#""quote\" back\\ slash/ \b\f\n\r\t \u0001 \u001f \u007f é 🚗""#),
        "\"quote\\\" back\\\\ slash/ \\b\\f\\n\\r\\t \\u0001 \\u001f \u{7f} é 🚗\""
    );
    assert_eq!(canon(r#""\u00e9\ud83d\ude97""#), "\"é🚗\"");
}

#[test]
fn numbers_are_written_as_javascript_writes_them() {
    for (input, expected) in [
        ("1.0", "1"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("1e3", "1000"),
        ("0.5", "0.5"),
        ("-2.25", "-2.25"),
        ("123456789.125", "123456789.125"),
        ("0.000001", "0.000001"),
        ("0.0000001", "1e-7"),
        ("1.5e-7", "1.5e-7"),
        ("1e21", "1e+21"),
        ("1e20", "100000000000000000000"),
        ("123e18", "123000000000000000000"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("5e-324", "5e-324"),
        ("0.1", "0.1"),
        ("9007199254740991", "9007199254740991"),
        ("-9007199254740991", "-9007199254740991"),
        ("1152921504606846976", "1152921504606847000"),
        ("100", "100"),
        ("1E2", "100"),
        ("2.5E+25", "2.5e+25"),
    ] {
        assert_eq!(canon(input), expected, "{input}");
    }
    assert_eq!(format_js_number(f64::NAN), None);
    assert_eq!(format_js_number(f64::INFINITY), None);
}

#[test]
fn duplicate_keys_are_rejected_at_any_depth() {
    assert_eq!(
        parse_json_strict(r#"{"a":1,"a":2}"#),
        Err(CanonicalError::DuplicateKey { key: "a".into() })
    );
    assert!(matches!(
        parse_json_strict(r#"{"x":[{"k":1,"k":1}]}"#),
        Err(CanonicalError::DuplicateKey { .. })
    ));
}

#[test]
fn unpaired_surrogates_and_bad_text_are_rejected() {
    for bad in [
        r#""\ud800""#,
        r#""\udc00x""#,
        r#""\ud83d\u0041""#,
        "{",
        "[1,]",
        "NaN",
        "1 2",
        "",
    ] {
        assert!(
            matches!(parse_json_strict(bad), Err(CanonicalError::Syntax(_))),
            "{bad:?} must be refused"
        );
    }
}

#[test]
fn params_with_unsafe_integers_cannot_be_hashed() {
    for text in [
        r#"{"n":9007199254740992}"#,
        r#"{"n":-9007199254740992}"#,
        r#"{"a":[1,{"n":18446744073709551615}]}"#,
        r#"{"n":1e300}"#,
        r#"{"n":123456789012345678901234567890}"#,
    ] {
        let params = parse_json_strict(text).unwrap();
        assert!(
            matches!(
                params_hash(&params),
                Err(CanonicalError::UnsafeInteger { .. })
            ),
            "{text}"
        );
    }
    assert!(params_hash(&json!({"n": 9007199254740991_u64, "f": 1.5e300})).is_err());
    assert!(params_hash(&json!({"n": 9007199254740991_u64, "f": 0.25})).is_ok());
}

#[test]
fn params_must_be_an_object_of_bounded_depth() {
    assert!(matches!(
        params_hash(&json!([1])),
        Err(CanonicalError::NotAnObject { found: "array" })
    ));
    let mut deep = json!({});
    for _ in 0..31 {
        deep = json!({ "d": deep });
    }
    assert!(params_hash(&deep).is_ok(), "32 levels are allowed");
    let deeper = json!({ "d": deep });
    assert!(matches!(
        params_hash(&deeper),
        Err(CanonicalError::TooDeep { limit: 32 })
    ));
}

#[test]
fn any_value_hashes_for_the_cli() {
    assert_eq!(value_hash(&json!([1, "a"])).unwrap().len(), 7 + 64);
    assert!(value_hash(&json!("text")).unwrap().starts_with("sha256:"));
}

/// JSON equality as peers see it: every number is a double, and -0 equals 0.
fn numbers_as_f64(v: &Value) -> Value {
    match v {
        Value::Number(n) => {
            let f = n.as_f64().unwrap();
            json!(if f == 0.0 { 0.0 } else { f })
        }
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_f64).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), numbers_as_f64(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-9_007_199_254_740_991_i64..=9_007_199_254_740_991).prop_map(|i| json!(i)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,12}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("\\PC{0,6}", inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #[test]
    fn key_order_never_changes_the_hash(pairs in prop::collection::vec(("\\PC{0,8}", arb_json()), 0..8)) {
        let forward: Map<String, Value> = pairs.iter().cloned().collect();
        // Writing the members in reverse order as text must give the same canonical form.
        let mut reversed_text = String::from("{");
        for (i, (k, v)) in forward.iter().rev().enumerate() {
            if i > 0 { reversed_text.push(','); }
            reversed_text.push_str(&serde_json::to_string(k).unwrap());
            reversed_text.push(':');
            reversed_text.push_str(&serde_json::to_string(v).unwrap());
        }
        reversed_text.push('}');
        let reparsed = parse_json_strict(&reversed_text).unwrap();
        prop_assert_eq!(
            value_hash(&Value::Object(forward.clone())).unwrap(),
            value_hash(&reparsed).unwrap()
        );
    }

    #[test]
    fn canonical_output_reparses_to_the_same_value(v in arb_json()) {
        let text = canonical_json(&v).unwrap();
        let back = parse_json_strict(&text).unwrap();
        prop_assert_eq!(numbers_as_f64(&back), numbers_as_f64(&v));
        // and is a fixed point
        prop_assert_eq!(canonical_json(&back).unwrap(), text);
    }

    #[test]
    fn non_ascii_is_never_escaped(s in "\\PC{1,24}") {
        let text = canonical_json(&Value::String(s.clone())).unwrap();
        for c in s.chars().filter(|c| !c.is_ascii()) {
            prop_assert!(text.contains(c), "{c:?} was escaped in {text}");
        }
        prop_assert!(!text.contains("\\u00") || s.chars().any(|c| (c as u32) < 0x20));
    }

    #[test]
    fn numbers_round_trip_through_the_js_form(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
        let text = format_js_number(f).unwrap();
        let back: f64 = text.parse().unwrap();
        prop_assert_eq!(back, if f == 0.0 { 0.0 } else { f });
    }
}

proptest! {
    /// The digests hash canonical JSON as it is written (no text built): the same digest as
    /// hashing the text, for any value, and the object form the same as the value form.
    #[test]
    fn streamed_digests_equal_hashing_the_text(value in arb_json(), pairs in prop::collection::vec(("[\\x00-\\x7f\\PC]{0,6}", arb_json()), 0..6)) {
        let text = canonical_json(&value).unwrap();
        prop_assert_eq!(
            openphone_protocol::canonical_sha256_hex(&value).unwrap(),
            openphone_protocol::digest::sha256_hex(&text)
        );
        let map: Map<String, Value> = pairs.into_iter().collect();
        prop_assert_eq!(
            openphone_protocol::object_hash(&map).unwrap(),
            value_hash(&Value::Object(map.clone())).unwrap()
        );
        prop_assert_eq!(
            openphone_protocol::canonical_json_object(&map).unwrap(),
            canonical_json(&Value::Object(map)).unwrap()
        );
    }
}

#[test]
fn control_characters_are_escaped_the_same_in_a_run_of_text() {
    let value = json!({"a\u{1}b": "x\u{0}y\"z\\\n\u{1f}\u{7f}é"});
    assert_eq!(
        canonical_json(&value).unwrap(),
        "{\"a\\u0001b\":\"x\\u0000y\\\"z\\\\\\n\\u001f\u{7f}é\"}"
    );
}
