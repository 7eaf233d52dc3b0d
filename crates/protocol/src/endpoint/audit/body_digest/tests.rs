//! The direct writer against the path it replaced (the record as a `serde_json::Value`,
//! `policy_proof` swapped for `policy_proof_sha256`, canonical JSON of that): the chain on
//! disk depends on their bytes being the same.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::super::{AuditCaller, AuditConfirmation, AuditEntry, AuditKind, PolicyDecision};
use crate::autonomy::Autonomy;
use crate::canonical::canonical_json;
use crate::digest::{canonical_sha256_hex, sha256_hex};
use crate::limits::MAX_SAFE_INTEGER;
use crate::manifest::Risk;
use crate::tool_result::ToolStatus;

/// The body as the stores built it before: serde's value of the record, edited.
fn reference_body(entry: &AuditEntry, proof: Option<&str>) -> Value {
    let mut value = serde_json::to_value(entry).unwrap();
    let map = value.as_object_mut().unwrap();
    map.remove("policy_proof");
    map.insert(
        "policy_proof_sha256".to_owned(),
        proof.map_or(Value::Null, |p| Value::String(p.to_owned())),
    );
    value
}

/// The digest as the stores computed it before.
fn reference_body_digest(entry: &AuditEntry, proof: Option<&str>) -> String {
    canonical_sha256_hex(&reference_body(entry, proof)).unwrap()
}

fn body_text(entry: &AuditEntry, proof: Option<&str>) -> String {
    let mut text = String::new();
    entry.write_body(proof, &mut text).unwrap();
    text
}

const STATUSES: [ToolStatus; 6] = [
    ToolStatus::Ok,
    ToolStatus::NeedsConfirmation,
    ToolStatus::Denied,
    ToolStatus::Error,
    ToolStatus::Timeout,
    ToolStatus::Cancelled,
];

/// A record with every optional field set.
fn full_entry() -> AuditEntry {
    AuditEntry {
        audit_id: "runtime:hermes:r1".into(),
        kind: AuditKind::ConfirmationTransition,
        at_ms: 1_700_000_000_123,
        runtime: "hermes".into(),
        caller: AuditCaller {
            runtime: "hermes".into(),
            transport: "ws".into(),
            principal: "token:abc".into(),
        },
        phone_session_id: Some("ps".into()),
        runtime_session_id: Some("rs".into()),
        request_id: "r1".into(),
        idempotency_key: Some("k".into()),
        tool: Some("sms.send".into()),
        risk: Some(Risk::High),
        mutating: Some(true),
        autonomy: Some(Autonomy::TrustedActions),
        decision: Some(PolicyDecision::Confirm),
        proof_digest: Some("a".repeat(64)),
        policy_proof: Some(json!({"layers": [{"verdict": "confirm"}]})),
        confirmation_id: Some("c1".into()),
        confirmation: Some(AuditConfirmation::Approved),
        status: Some(ToolStatus::Ok),
        error_code: Some("none".into()),
        duration_ms: Some(42),
        params_hash: Some(format!("sha256:{}", "b".repeat(64))),
        result_digest: Some(format!("sha256:{}", "c".repeat(64))),
        device_id: Some("phone-2".into()),
    }
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn the_body_writer_writes_every_key_serde_writes_and_no_other() {
    // A field added to `AuditEntry` serialises (as a value or as `null`), so it shows up in
    // serde's keys here until the writer writes it too.
    let proof = "d".repeat(64);
    for entry in [
        full_entry(),
        AuditEntry {
            device_id: None,
            ..full_entry()
        },
        AuditEntry::default(),
    ] {
        let written: Value = serde_json::from_str(&body_text(&entry, Some(&proof))).unwrap();
        let mut expected = keys(&serde_json::to_value(&entry).unwrap());
        assert!(expected.remove("policy_proof"));
        expected.insert("policy_proof_sha256".to_owned());
        assert_eq!(keys(&written), expected);
        assert_eq!(
            written.get("device_id").is_some(),
            entry.device_id.is_some()
        );
    }
}

#[test]
fn the_body_writer_writes_canonical_json_in_key_order() {
    for entry in [full_entry(), AuditEntry::default()] {
        let text = body_text(&entry, None);
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(text, canonical_json(&parsed).unwrap());
    }
}

#[test]
fn the_body_digest_of_a_known_record_is_pinned() {
    // Fixed bytes: a change here is a change of every audit chain on disk.
    let entry = full_entry();
    let proof = "d".repeat(64);
    let digest = entry.body_digest(Some(&proof)).unwrap();
    assert_eq!(digest, reference_body_digest(&entry, Some(&proof)));
    assert_eq!(digest, sha256_hex(&body_text(&entry, Some(&proof))));
    assert_eq!(
        digest,
        "2a8e37e45ea266e5a0172ee7f662a597271513460b246bc2a49ced244235d275"
    );
    assert_eq!(
        body_text(&AuditEntry::default(), None),
        "{\"at_ms\":0,\"audit_id\":\"\",\"autonomy\":null,\"caller\":{\"principal\":\"\",\
         \"runtime\":\"\",\"transport\":\"\"},\"confirmation\":null,\"confirmation_id\":null,\
         \"decision\":null,\"duration_ms\":null,\"error_code\":null,\"idempotency_key\":null,\
         \"kind\":\"tool_request\",\"mutating\":null,\"params_hash\":null,\
         \"phone_session_id\":null,\"policy_proof_sha256\":null,\"proof_digest\":null,\
         \"request_id\":\"\",\"result_digest\":null,\"risk\":null,\"runtime\":\"\",\
         \"runtime_session_id\":null,\"status\":null,\"tool\":null}"
    );
}

#[test]
fn integers_beyond_the_safe_range_are_written_as_doubles() {
    let entry = AuditEntry {
        at_ms: i64::MAX,
        duration_ms: Some(i64::MIN),
        ..AuditEntry::default()
    };
    let text = body_text(&entry, None);
    assert!(text.contains("\"at_ms\":9223372036854776000,"), "{text}");
    assert!(
        text.contains("\"duration_ms\":-9223372036854776000,"),
        "{text}"
    );
    assert_eq!(
        entry.body_digest(None).unwrap(),
        reference_body_digest(&entry, None)
    );
}

/// Text with what canonical strings escape or pass through: quotes, backslashes, every
/// control character, DEL, non-ASCII, astral characters, line separators.
fn text() -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        proptest::char::range('a', 'z'),
        Just('"'),
        Just('\\'),
        (0u8..0x20).prop_map(char::from),
        Just('\u{7f}'),
        Just('é'),
        Just('\u{2028}'),
        Just('😀'),
        any::<char>(),
    ];
    prop::collection::vec(ch, 0..12).prop_map(String::from_iter)
}

fn int() -> impl Strategy<Value = i64> {
    let safe = MAX_SAFE_INTEGER as i64;
    prop_oneof![
        any::<i64>(),
        -1000i64..1000,
        (safe - 3)..(safe + 3),
        (-safe - 3)..(-safe + 3),
        Just(i64::MIN),
        Just(i64::MAX),
    ]
}

fn proof_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        text().prop_map(|t| Some(json!({"layers": [{"reason": t}], "n": 1.5}))),
    ]
}

fn entry() -> impl Strategy<Value = AuditEntry> {
    use proptest::option::of;
    use proptest::sample::select;
    let ids = (
        text(),
        select(AuditKind::ALL.to_vec()),
        int(),
        text(),
        (text(), text(), text()),
        of(text()),
        of(text()),
        text(),
        of(text()),
        of(text()),
    );
    let policy = (
        of(select(Risk::ALL.to_vec())),
        of(any::<bool>()),
        of(select(Autonomy::ALL.to_vec())),
        of(select(PolicyDecision::ALL.to_vec())),
        of(text()),
        proof_value(),
        of(text()),
        of(select(AuditConfirmation::ALL.to_vec())),
        of(select(STATUSES.to_vec())),
        of(text()),
        of(int()),
    );
    let digests = (of(text()), of(text()), of(text()));
    (ids, policy, digests).prop_map(|(ids, policy, digests)| {
        let (audit_id, kind, at_ms, runtime, caller, phone, runtime_session, request_id, key, tool) =
            ids;
        let (
            risk,
            mutating,
            autonomy,
            decision,
            proof_digest,
            policy_proof,
            confirmation_id,
            confirmation,
            status,
            error_code,
            duration_ms,
        ) = policy;
        let (params_hash, result_digest, device_id) = digests;
        // Every field named (no `..Default`): a new field fails to compile here.
        AuditEntry {
            audit_id,
            kind,
            at_ms,
            runtime,
            caller: AuditCaller {
                runtime: caller.0,
                transport: caller.1,
                principal: caller.2,
            },
            phone_session_id: phone,
            runtime_session_id: runtime_session,
            request_id,
            idempotency_key: key,
            tool,
            risk,
            mutating,
            autonomy,
            decision,
            proof_digest,
            policy_proof,
            confirmation_id,
            confirmation,
            status,
            error_code,
            duration_ms,
            params_hash,
            result_digest,
            device_id,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_body_digest_equals_the_value_tree_path(
        entry in entry(),
        proof in proptest::option::of(prop_oneof![text(), "[0-9a-f]{64}"]),
    ) {
        let proof = proof.as_deref();
        let reference = canonical_json(&reference_body(&entry, proof)).unwrap();
        prop_assert_eq!(body_text(&entry, proof), reference);
        prop_assert_eq!(
            entry.body_digest(proof).unwrap(),
            reference_body_digest(&entry, proof)
        );
    }
}
