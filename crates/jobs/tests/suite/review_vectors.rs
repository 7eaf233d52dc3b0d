//! The digests of §9.11 against vectors computed independently (`tests/vectors/
//! make_review_vectors.py`, Python standard library only, from the specification text), and
//! the offline verifier against tampered records made by the same script.

use openphone_jobs::review::summary_of;
use openphone_jobs::{CheckedKind, check_stored};
use openphone_protocol::{
    Binding, binding_digest, canonical_json, params_digest, parse_json_strict,
};
use pretty_assertions::assert_eq;
use serde_json::Value;

fn load(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn rust_digests_match_the_independent_vectors() {
    let file = load(include_str!("../vectors/review_vectors.json"));
    let vectors = file["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 7);
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let tool = v["tool"].as_str().unwrap();
        let params = parse_json_strict(v["params_text"].as_str().unwrap()).unwrap();
        assert_eq!(
            canonical_json(&params).unwrap(),
            v["canonical"],
            "{name}: canonical JSON"
        );
        assert_eq!(
            summary_of(tool, &params).unwrap(),
            v["summary"],
            "{name}: summary"
        );
        let digest = params_digest(tool, &params).unwrap();
        assert_eq!(digest, v["params_digest"], "{name}: params_digest");
        let b = &v["binding"];
        let binding = Binding {
            job_id: b["job_id"].as_u64().unwrap(),
            runtime: b["runtime"].as_str().unwrap(),
            phone_session_id: b["phone_session_id"].as_str().unwrap(),
            tool,
            params_digest: &digest,
            idempotency_key: b["idempotency_key"].as_str().unwrap(),
            expires_at: b["expires_at"].as_u64().unwrap(),
        };
        assert_eq!(
            binding_digest(&binding),
            v["binding_digest"],
            "{name}: binding_digest"
        );
    }
}

#[test]
fn inputs_without_a_canonical_form_are_rejected_on_both_sides() {
    let file = load(include_str!("../vectors/review_vectors.json"));
    for v in file["rejected"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap();
        let digest = parse_json_strict(v["params_text"].as_str().unwrap())
            .and_then(|params| params_digest(v["tool"].as_str().unwrap(), &params));
        assert!(digest.is_err(), "{name} was accepted: {digest:?}");
    }
}

#[test]
fn the_valid_fixture_passes_and_each_tampered_one_names_its_first_failure() {
    let file = load(include_str!("../vectors/review_records.json"));
    let checked = check_stored(&file["valid"]).unwrap();
    assert_eq!(checked.kind, CheckedKind::Record);
    assert_eq!(checked.review_state, "pending");
    let tampered = file["tampered"].as_array().unwrap();
    let names: Vec<&str> = tampered
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for needed in [
        "params_changed",
        "params_digest_changed",
        "window_longer_than_900000",
        "wrong_session",
        "secret_in_params",
        "unknown_member",
    ] {
        assert!(names.contains(&needed), "{needed} fixture missing");
    }
    for t in tampered {
        let name = t["name"].as_str().unwrap();
        let failure = check_stored(&t["record"]).unwrap_err();
        assert_eq!(failure.check, t["first_failure"], "{name}: {failure}");
        // Messages never repeat a param value.
        assert!(
            !failure.message.contains("sk-live-123"),
            "{name}: {failure}"
        );
    }
}

#[test]
fn input_that_is_no_record_is_named() {
    assert_eq!(
        check_stored(&Value::from(3)).unwrap_err().check,
        "input.not_object"
    );
    let empty = check_stored(&serde_json::json!({})).unwrap_err();
    assert_eq!(empty.check, "record.schema");
}

#[test]
fn the_vendored_record_schema_is_the_projects() {
    assert_eq!(
        include_str!("../../schemas/background-confirmation.schema.json"),
        include_str!("../../../../schemas/background-confirmation.schema.json")
    );
}
