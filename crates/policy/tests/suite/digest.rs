//! The inputs digest and the proof digest.

use openphone_policy::{Autonomy, Decision, Transport, inputs_object};
use openphone_protocol::canonical_json;
use openphone_protocol::digest::sha256_hex;
use serde_json::json;

use super::support::*;

fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

#[test]
fn digests_are_sha256_hex() {
    let case = Case::new("openphone.ui.tap");
    let d = case.decide();
    assert!(is_hex64(&case.inputs_digest()));
    assert!(is_hex64(&d.proof_digest()));
}

#[test]
fn inputs_digest_is_stable_under_param_key_order() {
    let a: serde_json::Value =
        serde_json::from_str(r#"{"reason":"r","x":10,"y":20,"nested":{"b":1,"a":2}}"#).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(r#"{"nested":{"a":2,"b":1},"y":20,"x":10,"reason":"r"}"#).unwrap();
    let (ca, cb) = (
        Case::new("openphone.ui.tap").params(a),
        Case::new("openphone.ui.tap").params(b),
    );
    let (da, db) = (ca.decide(), cb.decide());
    assert_eq!(ca.inputs_digest(), cb.inputs_digest());
    assert_eq!(da.proof_digest(), db.proof_digest());
    // and repeatable
    assert_eq!(
        ca.inputs_digest(),
        Case::new("openphone.ui.tap")
            .params(json!({"reason":"r","x":10,"y":20,"nested":{"b":1,"a":2}}))
            .inputs_digest()
    );
}

#[test]
fn inputs_digest_changes_when_any_input_changes() {
    let base = Case::new("openphone.ui.tap");
    let base_digest = base.inputs_digest();
    let variants: Vec<(&str, Case)> = vec![
        ("tool", {
            let mut c = base.clone();
            c.command = cmd("openphone.ui.swipe");
            c
        }),
        ("runtime", {
            let mut c = base.clone();
            c.caller.runtime = "openclaw".to_owned();
            c
        }),
        ("transport", {
            let mut c = base.clone();
            c.caller.transport = Transport::Mcp;
            c
        }),
        ("principal", {
            let mut c = base.clone();
            c.caller.principal = "token:other".to_owned();
            c
        }),
        ("enabled", {
            let mut c = base.clone();
            c.caller.enabled = false;
            c
        }),
        ("grants", {
            let mut c = base.clone();
            c.caller.grants = openphone_policy::ExposureGrants::REMOTE_DEFAULT;
            c
        }),
        ("ceiling", {
            let mut c = base.clone();
            c.caller.max_autonomy = Autonomy::TrustedActions;
            c
        }),
        ("request autonomy", base.clone().request("observe_only")),
        (
            "session autonomy",
            base.clone().session(Some(Autonomy::TrustedActions)),
        ),
        ("no session", base.clone().session(None)),
        ("context", base.clone().background()),
        ("job id", {
            let mut c = base.clone().background();
            c.context = openphone_policy::Context::job(43);
            c
        }),
        ("platform", {
            let mut c = base.clone();
            c.platform_supported = false;
            c
        }),
        ("rules", base.clone().rule(rule("sa-1", "tap"))),
        (
            "tool policy",
            base.clone()
                .policy(r#"{"global": {"deny": ["group:messages"]}}"#),
        ),
        (
            "tool profile",
            base.clone()
                .policy(r#"{"runtimes": {"hermes": {"profile": "full"}}}"#),
        ),
        (
            "params",
            base.clone().params(json!({"reason": "test", "x": 1})),
        ),
        ("time", {
            let mut c = base.clone();
            c.now_ms += 1;
            c
        }),
    ];
    let mut seen = std::collections::BTreeSet::new();
    seen.insert(base_digest.clone());
    for (what, case) in variants {
        let d = case.inputs_digest();
        assert_ne!(d, base_digest, "{what}");
        assert!(seen.insert(d), "{what} collides with another variant");
    }
}

#[test]
fn synonyms_digest_as_their_canonical_mode() {
    let a = Case::new("openphone.ui.tap")
        .request("yolo")
        .inputs_digest();
    let b = Case::new("openphone.ui.tap")
        .request(" trusted_actions ")
        .inputs_digest();
    assert_eq!(a, b);
}

#[test]
fn raw_params_never_enter_the_inputs() {
    let case = Case::new("openphone.ui.type_text")
        .params(json!({"reason": "r", "text": "hunter2-secret-value"}));
    let object = inputs_object(&case.input());
    let text = object.to_string();
    assert!(!text.contains("hunter2"));
    let hash = openphone_protocol::params_hash_hex(&case.params).unwrap();
    assert_eq!(object["params_hash"], json!(hash));
    assert_eq!(
        case.inputs_digest(),
        sha256_hex(&canonical_json(&object).unwrap())
    );
}

#[test]
fn proof_digest_is_the_hash_of_the_canonical_proof() {
    let d = Case::new("openphone.messages.send").decide();
    let proof_json = serde_json::to_value(&d.proof).unwrap();
    assert_eq!(
        d.proof_digest(),
        sha256_hex(&canonical_json(&proof_json).unwrap())
    );
    let other = Case::new("openphone.messages.send")
        .session(Some(Autonomy::ObserveOnly))
        .decide();
    assert_ne!(d.proof_digest(), other.proof_digest());
}

#[test]
fn decisions_round_trip_through_json() {
    for case in [
        Case::new("openphone.ui.tap"),
        Case::new("openphone.ui.tap").rule(rule("sa", "tap")),
        Case::new("openphone.ui.tap").session(Some(Autonomy::ObserveOnly)),
        Case::new("openphone.messages.send").background(),
    ] {
        let d = case.decide();
        let text = serde_json::to_string(&d).unwrap();
        let back: Decision = serde_json::from_str(&text).unwrap();
        assert_eq!(back, d);
    }
    let d = Case::new("openphone.ui.tap")
        .session(Some(Autonomy::ObserveOnly))
        .decide();
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["requirement"]["kind"], json!("deny"));
    assert_eq!(
        v["requirement"]["code"],
        json!("observe_only_mutation_denied")
    );
    assert_eq!(
        v["requirement"]["policy_detail"],
        json!("observe_only_blocks_mutation")
    );
    assert_eq!(v["effective_autonomy"], json!("observe_only"));
    assert_eq!(v["proof"][3]["layer"], json!("autonomy"));
    assert_eq!(v["proof"][3]["kind"], json!("deny"));
    assert_eq!(v["source"], json!({"kind": "policy", "layer": "autonomy"}));
}
