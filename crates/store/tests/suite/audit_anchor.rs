//! Anchors: the head written down elsewhere proves the log still holds that exact prefix, which
//! plain verification cannot after an offline rewrite.

use openphone_store::{AuditAnchor, AuditEntry, AuditKind, Caller, GENESIS_HASH, Store};
use pretty_assertions::assert_eq;

use super::support::{T0, open, temp};

pub(super) fn entry(i: i64) -> AuditEntry {
    AuditEntry {
        audit_id: format!("runtime:hermes:req-{i}"),
        kind: AuditKind::ToolRequest,
        at_ms: T0 + i,
        runtime: "hermes".to_owned(),
        caller: Caller {
            runtime: "hermes".to_owned(),
            transport: "websocket".to_owned(),
            principal: "token:hermes".to_owned(),
        },
        request_id: format!("req-{i}"),
        ..AuditEntry::default()
    }
}

pub(super) fn fill(store: &Store, from: i64, to: i64) {
    for i in from..=to {
        store.append_audit(&entry(i)).unwrap();
    }
}

#[test]
fn an_untouched_log_holds_every_anchor_taken_from_it() {
    let dir = temp();
    let store = open(&dir);
    let empty = store.audit_head().unwrap();
    assert_eq!(
        empty,
        AuditAnchor {
            seq: 0,
            hash: GENESIS_HASH.to_owned()
        }
    );
    let mut anchors = vec![empty];
    for i in 1..=4 {
        fill(&store, i, i);
        anchors.push(store.audit_head().unwrap());
    }
    fill(&store, 5, 9);
    let report = store.verify_audit_anchored(&anchors).unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.anchors.len(), 5);
    assert!(report.anchors[3].to_string().contains("holds"));
}

#[test]
fn anchors_parse_print_and_refuse_garbage() {
    let hash = "ab".repeat(32);
    let anchor = AuditAnchor::parse(&format!(" 12:{} ", hash.to_uppercase())).unwrap();
    assert_eq!(
        anchor,
        AuditAnchor {
            seq: 12,
            hash: hash.clone()
        }
    );
    assert_eq!(anchor.to_string(), format!("12:{hash}"));
    assert_eq!(anchor.to_string().parse::<AuditAnchor>().unwrap(), anchor);
    for bad in [
        "12".to_owned(),
        format!("x:{hash}"),
        format!("-1:{hash}"),
        "3:abcd".to_owned(),
        format!("3:{}", "g".repeat(64)),
    ] {
        let err = AuditAnchor::parse(&bad).unwrap_err();
        assert!(err.to_string().contains("audit anchor"), "{bad}: {err}");
    }
    // A wrong hash for the empty log's seq 0 does not hold.
    let dir = temp();
    let store = open(&dir);
    let wrong = AuditAnchor { seq: 0, hash };
    let report = store.verify_audit_anchored(&[wrong]).unwrap();
    assert!(!report.is_intact());
}
