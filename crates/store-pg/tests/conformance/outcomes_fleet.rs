//! The outbox of deferred outcomes in a fleet (PostgreSQL only): each daemon lists only the
//! rows its own runtime connection recorded, so one daemon's restart (which fails the rows it
//! finds left `posting`) never touches a row another live daemon is posting.

use openphone_store::{OutcomeState, OutcomeStore};
use openphone_store_pg::PgStore;
use serde_json::json;

use super::fleet_support::two_host_configs;
use super::outcomes::row;
use super::support::T0;

#[test]
fn each_daemon_lists_only_its_own_outbox_and_one_poster_wins_across_daemons() {
    let Some((a, b, _schema)) = two_host_configs() else {
        return;
    };
    let (host_a, host_b) = (PgStore::open(&a).unwrap(), PgStore::open(&b).unwrap());
    host_a.insert_deferred_outcome(&row("a-1"), T0).unwrap();
    host_b.insert_deferred_outcome(&row("b-1"), T0).unwrap();
    // A request id is recorded once in the fleet.
    assert!(host_b.insert_deferred_outcome(&row("a-1"), T0).is_err());

    for (store, id) in [(&host_a, "a-1"), (&host_b, "b-1")] {
        assert!(
            store
                .deferred_outcome_known(id, &json!({"status": "done"}), T0 + 1)
                .unwrap()
        );
        let mine = store.list_deferred_outcomes("openclaw", &[]).unwrap();
        let ids: Vec<_> = mine.iter().map(|r| r.request.request_id.as_str()).collect();
        assert_eq!(ids, [id]);
    }
    // B is posting its row when A restarts: A's start-up sweep of `posting` rows sees none.
    assert!(
        host_b
            .move_deferred_outcome(
                "b-1",
                OutcomeState::Ready,
                OutcomeState::Posting,
                "",
                T0 + 2
            )
            .unwrap()
    );
    assert!(
        host_a
            .list_deferred_outcomes("openclaw", &[OutcomeState::Waiting, OutcomeState::Posting])
            .unwrap()
            .is_empty()
    );
    // Moves by id are conditional whoever makes them: a second claim of A's row loses.
    let claim = |store: &PgStore| {
        store
            .move_deferred_outcome(
                "a-1",
                OutcomeState::Ready,
                OutcomeState::Posting,
                "",
                T0 + 3,
            )
            .unwrap()
    };
    assert!(claim(&host_a));
    assert!(!claim(&host_b));
    assert_eq!(
        host_b.get_deferred_outcome("b-1").unwrap().unwrap().state,
        OutcomeState::Posting
    );
}
