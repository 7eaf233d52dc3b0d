//! What only a fleet has, for approvals, settings and phone sessions: two daemons (two
//! `PgStore`s with their own host ids) on one schema. A revoke committed on one host is seen on
//! the other at once (its approvals generation and its reads); settings are shared; a daemon's
//! restart fails and prunes only its own sessions.

use openphone_store::{
    Autonomy, MIN_SESSIONS_RETAINED, NewPhoneSession, NewStandingApproval, SessionStatus, Store,
};
use openphone_store_pg::testing::{self, SchemaGuard};
use openphone_store_pg::{PgConfig, PgStore};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::fleet_support::hosts;
use super::support::T0;

/// Two daemons, `host-a` and `host-b`, on one fresh schema (drop the stores before the guard).
fn two_hosts() -> (Store, Store, SchemaGuard) {
    let (a, b, _config, guard) = two_hosts_and_config();
    (a, b, guard)
}

/// [`two_hosts`], and the schema's configuration (for a connection of the test's own).
fn two_hosts_and_config() -> (Store, Store, PgConfig, SchemaGuard) {
    let (stores, config, guard) = hosts(&["a", "b"]);
    let mut stores = stores.into_iter().map(PgStore::into_store);
    (
        stores.next().unwrap(),
        stores.next().unwrap(),
        config,
        guard,
    )
}

fn tap_rule() -> NewStandingApproval {
    NewStandingApproval {
        runtime: "hermes".to_owned(),
        tool: "openphone.ui.tap".to_owned(),
        constraints: json!({}),
        ..NewStandingApproval::default()
    }
}

fn session(store: &Store, id: &str, runtime: &str, at: i64) {
    store
        .create_session(
            &NewPhoneSession {
                phone_session_id: id.to_owned(),
                runtime_kind: runtime.to_owned(),
                runtime_session_id: String::new(),
                attention_id: format!("attn-{id}"),
                source: "chat".to_owned(),
                autonomy: Autonomy::AskBeforeAction,
                summary: "fleet".to_owned(),
            },
            at,
        )
        .unwrap();
}

#[test]
fn a_revoke_committed_on_another_host_is_seen_at_once() {
    let (a, b, _schema) = two_hosts();
    let approval = a.create_approval(&tap_rule(), T0).unwrap();
    let ids = |store: &Store| {
        store
            .active_approvals("hermes", "openphone.ui.tap", T0 + 1)
            .unwrap()
            .into_iter()
            .map(|r| r.approval_id)
            .collect::<Vec<_>>()
    };
    // Made on A, it applies on B too.
    assert_eq!(ids(&b), [approval.approval_id]);
    let before = a.approvals_generation();
    assert_eq!(
        a.approvals_generation(),
        before,
        "no change, same generation"
    );

    let revoked = b
        .revoke_approval(approval.approval_id, "cli:operator@host-b", T0 + 2)
        .unwrap();
    assert!(!revoked.enabled);
    // Immediately after B's commit, A's generation has moved and its reads exclude it.
    let after = a.approvals_generation();
    assert_ne!(after, before);
    assert!(ids(&a).is_empty());
    assert_eq!(
        a.get_approval(approval.approval_id)
            .unwrap()
            .unwrap()
            .revoked_by
            .as_deref(),
        Some("cli:operator@host-b")
    );
    assert_eq!(b.approvals_generation(), after, "one generation fleet-wide");

    // Every kind of approval write on one host moves the other's generation.
    let made = b.create_approval(&tap_rule(), T0 + 3).unwrap();
    let g1 = a.approvals_generation();
    assert_ne!(g1, after);
    b.set_approval_enabled(made.approval_id, false, T0 + 4)
        .unwrap();
    let g2 = a.approvals_generation();
    assert_ne!(g2, g1);
    assert!(ids(&a).is_empty());
    assert!(b.delete_approval(made.approval_id).unwrap());
    let g3 = a.approvals_generation();
    assert_ne!(g3, g2);
    // Writes that change nothing leave it alone: a second revoke, a failed enable.
    b.revoke_approval(approval.approval_id, "cli:someone", T0 + 5)
        .unwrap();
    assert!(
        b.set_approval_enabled(made.approval_id, true, T0 + 6)
            .is_err()
    );
    assert_eq!(a.approvals_generation(), g3);
}

#[test]
fn settings_are_shared_by_the_fleet() {
    let (a, b, _schema) = two_hosts();
    a.set_setting("routing.chat", &json!({"runtime": "hermes"}), T0)
        .unwrap();
    assert_eq!(
        b.get_setting("routing.chat").unwrap(),
        Some(json!({"runtime": "hermes"}))
    );
    assert!(b.delete_setting("routing.chat").unwrap());
    assert_eq!(a.get_setting("routing.chat").unwrap(), None);
}

#[test]
fn a_restart_fails_only_this_hosts_active_sessions() {
    let (a, b, _schema) = two_hosts();
    session(&a, "on-a", "openclaw", T0);
    session(&b, "on-b", "openclaw", T0 + 1);
    b.update_session_status("on-b", SessionStatus::Running, None, T0 + 2)
        .unwrap();
    let failed = a
        .fail_active_sessions("openclaw", "daemon restarted", T0 + 3)
        .unwrap();
    assert_eq!(
        failed
            .iter()
            .map(|s| (s.phone_session_id.as_str(), s.status))
            .collect::<Vec<_>>(),
        [("on-a", SessionStatus::Failed)]
    );
    // B's session is untouched, and both hosts see both sessions.
    for store in [&a, &b] {
        assert_eq!(
            store.get_session("on-b").unwrap().unwrap().status,
            SessionStatus::Running
        );
        assert_eq!(
            store
                .get_session("on-a")
                .unwrap()
                .unwrap()
                .failure_reason
                .as_deref(),
            Some("daemon restarted")
        );
    }
    // A session id is unique across the fleet.
    assert!(
        b.create_session(
            &NewPhoneSession {
                phone_session_id: "on-a".to_owned(),
                runtime_kind: "openclaw".to_owned(),
                runtime_session_id: String::new(),
                attention_id: "attn".to_owned(),
                source: "chat".to_owned(),
                autonomy: Autonomy::AskBeforeAction,
                summary: String::new(),
            },
            T0
        )
        .is_err()
    );
    // B's own restart fails B's session.
    let failed = b
        .fail_active_sessions("openclaw", "daemon restarted", T0 + 4)
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].phone_session_id, "on-b");
}

#[test]
fn pruning_keeps_another_hosts_sessions() {
    let (a, b, _schema) = two_hosts();
    // B's one session is the oldest of the fleet.
    session(&b, "b-old", "builtin", T0 - 1_000);
    for i in 0..=MIN_SESSIONS_RETAINED {
        session(
            &a,
            &format!("a-{i:03}"),
            "builtin",
            T0 + i64::try_from(i).unwrap(),
        );
    }
    assert_eq!(a.prune_sessions(0).unwrap(), 1);
    assert!(a.get_session("a-000").unwrap().is_none());
    assert!(a.get_session("b-old").unwrap().is_some());
    assert_eq!(b.prune_sessions(0).unwrap(), 0);
}

/// The generation is never a stale value when it cannot be read: each failed read answers a
/// value no stored generation takes (top bit set) and no other failed read answered, so a cache
/// keyed by it is never trusted.
#[test]
fn an_unreadable_generation_never_matches_a_cached_one() {
    let (a, b, config, _schema) = two_hosts_and_config();
    a.create_approval(&tap_rule(), T0).unwrap();
    let stored = a.approvals_generation();
    assert!(stored < 1 << 63);
    let mut admin = testing::connect(&config).unwrap();
    admin
        .batch_execute("DELETE FROM approvals_version")
        .unwrap();
    let (first, second) = (a.approvals_generation(), a.approvals_generation());
    assert!(first >= 1 << 63 && second >= 1 << 63, "{first} {second}");
    assert_ne!(first, second);
    assert_ne!(b.approvals_generation(), first);
    admin
        .batch_execute("INSERT INTO approvals_version (singleton, version) VALUES (TRUE, 7)")
        .unwrap();
    assert_eq!(a.approvals_generation(), 7);
}

/// Two daemons appending to one session's transcript at once: the numbers run 1..=n without a
/// repeat or a gap (the loser of a race on `MAX(seq)` is run again, never refused).
#[test]
fn concurrent_appends_from_two_hosts_number_without_gaps() {
    const EACH: i64 = 40;
    let (a, b, _schema) = two_hosts();
    session(&a, "shared", "builtin", T0);
    let (a, b) = (std::sync::Arc::new(a), std::sync::Arc::new(b));
    let appenders: Vec<_> = [("host_a", &a), ("host_b", &b)]
        .into_iter()
        .map(|(role, store)| {
            let store = std::sync::Arc::clone(store);
            std::thread::spawn(move || {
                for i in 0..EACH {
                    store
                        .append_transcript("shared", role, &json!({"i": i}), T0 + i)
                        .unwrap();
                }
            })
        })
        .collect();
    for appender in appenders {
        appender.join().unwrap();
    }
    let entries = a.transcript("shared").unwrap();
    assert_eq!(
        entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=2 * EACH).collect::<Vec<_>>()
    );
    for role in ["host_a", "host_b"] {
        let mine: Vec<_> = entries
            .iter()
            .filter(|e| e.role == role)
            .map(|e| e.body["i"].as_i64().unwrap())
            .collect();
        assert_eq!(mine, (0..EACH).collect::<Vec<_>>(), "{role}");
    }
}
