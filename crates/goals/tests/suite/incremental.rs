//! What the engine no longer redoes for every read and write, and the guarantees that must
//! survive it: a goal document is served from the engine's copy only while the store still
//! holds that version; a document goes to the store as text and must be an object; an
//! artifact is rewritten only when its content changed; transitions are still stored before
//! the side effect of their new state.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_clock::Clock;
use openphone_goals::artifacts::write_if_changed;
use openphone_goals::engine::{from_stored, to_stored};
use openphone_goals::model::GoalState;
use openphone_goals::{AgentBackend, Backends, GoalEngine, GoalSpec};
use openphone_store::{GoalText, Store, StoreError};
use serde_json::json;

use super::support::{Harness, dentist_spec};

#[tokio::test]
async fn a_goal_written_behind_the_engines_back_is_read_fresh_not_from_its_copy() {
    let h = Harness::new();
    let goal = h.ticked_dentist().await;
    // The engine now holds its own copy of the document; another writer changes the goal.
    let read = h.engine.get(&goal.id).unwrap();
    let mut changed = from_stored(&h.store.get_goal(&goal.id).unwrap().unwrap()).unwrap();
    assert_eq!(changed, read);
    changed.objective = "changed by another writer".to_owned();
    changed.state = GoalState::Paused;
    h.store
        .update_goal(&to_stored(&changed).unwrap(), vec![], vec![])
        .unwrap();
    let fresh = h.engine.get(&goal.id).unwrap();
    assert_eq!(fresh.objective, "changed by another writer");
    assert_eq!(fresh.state, GoalState::Paused);
    assert_eq!(fresh.version, read.version + 1);
    // And the next tick works from that version (a stale copy would be a conflict).
    let t = h.engine.tick(&goal.id).await.unwrap();
    assert_eq!(t.state, Some(GoalState::Paused));
    assert_eq!(h.engine.get(&goal.id).unwrap().version, fresh.version + 1);
}

#[tokio::test]
async fn what_the_engine_reads_equals_what_the_store_holds_after_every_tick() {
    let h = Harness::new();
    let goal = h
        .engine
        .create(&dentist_spec(h.clock.now_ms()), Harness::owner())
        .unwrap();
    for _ in 0..3 {
        h.engine.tick(&goal.id).await.unwrap();
        let engine_copy = h.engine.get(&goal.id).unwrap();
        let stored = from_stored(&h.store.get_goal(&goal.id).unwrap().unwrap()).unwrap();
        assert_eq!(engine_copy, stored);
        h.clock.advance(60_000);
    }
}

/// What the store held when an action ran: (action, transitions logged, state by action).
type Seen = (String, Vec<String>, BTreeMap<String, String>);

/// An agent backend that, at each call, reads what the store holds: the transitions logged
/// and the document's state of every action.
struct Witness {
    store: Arc<Store>,
    goal: Mutex<String>,
    seen: Mutex<Vec<Seen>>,
}

#[async_trait]
impl AgentBackend for Witness {
    async fn agent_turn(&self, session: &str, _prompt: &str) -> Result<String, String> {
        let action = session.rsplit(':').next().unwrap_or_default().to_owned();
        let goal = self.goal.lock().unwrap().clone();
        let log = self
            .store
            .goal_transitions(&goal)
            .unwrap()
            .into_iter()
            .map(|l| {
                format!(
                    "{} {}>{}",
                    l.transition.action_id, l.transition.from_state, l.transition.to_state
                )
            })
            .collect();
        let doc = from_stored(&self.store.get_goal(&goal).unwrap().unwrap()).unwrap();
        let states = doc
            .actions
            .iter()
            .map(|a| (a.id.clone(), a.state.as_str().to_owned()))
            .collect();
        self.seen
            .lock()
            .unwrap()
            .push((action.clone(), log, states));
        Ok(format!("{action} done"))
    }
}

#[tokio::test]
async fn every_result_and_running_transition_is_stored_before_the_next_side_effect() {
    // b1 and b2 start together (max_parallel 2); c waits for both, in a later round of the
    // same tick. When each runs, the store already says it is RUNNING, and holds the results
    // of every action that ran before it.
    let h = Harness::new();
    let witness = Arc::new(Witness {
        store: Arc::clone(&h.store),
        goal: Mutex::new(String::new()),
        seen: Mutex::new(Vec::new()),
    });
    let engine = GoalEngine::new(
        Arc::clone(&h.store),
        Arc::clone(&h.bridge),
        Backends {
            agent: Some(Arc::clone(&witness) as Arc<dyn AgentBackend>),
            jobs: None,
        },
        None,
    );
    let spec: GoalSpec = serde_json::from_value(json!({
    "objective": "three turns", "max_parallel": 2, "plan": [
        {"id": "b1", "title": "one", "kind": "agent_turn", "prompt": "one"},
        {"id": "b2", "title": "two", "kind": "agent_turn", "prompt": "two"},
        {"id": "c", "title": "three", "kind": "agent_turn", "prompt": "three",
         "depends_on": ["b1", "b2"]}
    ]}))
    .unwrap();
    let goal = engine.create(&spec, Harness::owner()).unwrap();
    *witness.goal.lock().unwrap() = goal.id.clone();
    let t = engine.tick(&goal.id).await.unwrap();
    assert_eq!(t.state, Some(GoalState::Done));
    let seen = witness.seen.lock().unwrap().clone();
    let order: Vec<&str> = seen.iter().map(|(a, _, _)| a.as_str()).collect();
    assert_eq!(order, ["b1", "b2", "c"]);
    let mut before: Vec<&str> = Vec::new();
    for (action, log, states) in &seen {
        assert!(
            log.contains(&format!("{action} READY>RUNNING")),
            "{action}: {log:?}"
        );
        assert_eq!(states[action.as_str()], "RUNNING", "{action}: {states:?}");
        for earlier in &before {
            assert!(
                log.contains(&format!("{earlier} VERIFYING>DONE")),
                "{action} ran before {earlier}'s result was stored: {log:?}"
            );
            assert_eq!(states[*earlier], "DONE", "{action}: {states:?}");
        }
        before.push(action);
    }
}

#[test]
fn a_goal_document_that_is_not_an_object_is_refused_and_nothing_is_written() {
    let h = Harness::new();
    let goal = h
        .engine
        .create(&dentist_spec(h.clock.now_ms()), Harness::owner())
        .unwrap();
    let before = h.store.get_goal_text(&goal.id).unwrap().unwrap();
    for text in ["[1, 2]", "\"text\"", ""] {
        let err = h
            .store
            .update_goal_text(
                GoalText {
                    goal_json: text.to_owned(),
                    ..before.clone()
                },
                vec![],
                vec![],
            )
            .unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("JSON object"), "{err}");
    }
    assert_eq!(h.store.get_goal_text(&goal.id).unwrap().unwrap(), before);
}

#[test]
fn an_artifact_that_already_holds_its_content_is_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir
        .path()
        .join("goal_X")
        .join("runs")
        .join("0001-find-1.json");
    assert!(write_if_changed(&path, b"{\"a\": 1}").unwrap());
    assert!(!write_if_changed(&path, b"{\"a\": 1}").unwrap());
    assert!(write_if_changed(&path, b"{\"a\": 2}").unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\": 2}");
    // A file removed behind its back is written again.
    std::fs::remove_file(&path).unwrap();
    assert!(write_if_changed(&path, b"{\"a\": 2}").unwrap());
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\": 2}");
}
