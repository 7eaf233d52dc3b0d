//! The transition table of §2: every legal edge is applied, every other edge is refused, a
//! wrong source is refused, and BLOCKED always carries its resume path.

use openphone_goals::model::{ActionState, BlockerKind};
use openphone_goals::spec::new_goal;
use openphone_goals::transition::{
    BlockWith, IllegalTransition, Source, TABLE, check, move_action,
};
use openphone_goals::{Goal, GoalSpec};
use serde_json::json;

use super::support::Harness;

const ALL_SOURCES: [Source; 8] = [
    Source::Clock,
    Source::Dependency,
    Source::Policy,
    Source::Budget,
    Source::User,
    Source::Executor,
    Source::Recovery,
    Source::Verifier,
];

fn goal_with(state: ActionState) -> Goal {
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "table test",
        "plan": [{"id": "a", "title": "A", "kind": "verify"}]
    }))
    .unwrap();
    let mut goal = new_goal(&spec, "goal_T".to_owned(), Harness::owner(), 1_000).unwrap();
    goal.actions[0].state = state;
    goal
}

fn blocked() -> Option<BlockWith> {
    Some(BlockWith {
        kind: BlockerKind::Failure,
        resume_token: "retry:a".to_owned(),
        how_to_resolve: "openphone goals retry goal_T a".to_owned(),
    })
}

#[test]
fn every_legal_edge_is_applied_with_each_of_its_sources() {
    let mut applied = 0;
    for (from, to, sources) in TABLE {
        for source in *sources {
            let mut goal = goal_with(*from);
            let t = move_action(&mut goal, "a", *to, *source, "because", 2_000, blocked()).unwrap();
            assert_eq!((t.from, t.to, t.source, t.at), (*from, *to, *source, 2_000));
            assert_eq!(goal.actions[0].state, *to);
            applied += 1;
        }
    }
    assert!(applied >= TABLE.len());
    // The table holds the spec's edges, every non-terminal state may be aborted.
    for s in ActionState::ALL.into_iter().filter(|s| !s.is_terminal()) {
        assert!(
            check(s, ActionState::Aborted, Source::User).is_ok(),
            "{s} -> ABORTED"
        );
    }
}

#[test]
fn every_edge_not_in_the_table_is_refused_and_nothing_changes() {
    let mut refused = 0;
    for from in ActionState::ALL {
        for to in ActionState::ALL {
            let entry = TABLE.iter().find(|(f, t, _)| *f == from && *t == to);
            for source in ALL_SOURCES {
                let legal = entry.is_some_and(|(_, _, s)| s.contains(&source));
                let mut goal = goal_with(from);
                let before = goal.clone();
                let outcome = move_action(&mut goal, "a", to, source, "x", 2_000, blocked());
                if legal {
                    assert!(outcome.is_ok());
                } else {
                    let err = outcome.unwrap_err();
                    match entry {
                        None => assert_eq!(err, IllegalTransition::NoEdge { from, to }),
                        Some(_) => assert_eq!(
                            err,
                            IllegalTransition::WrongSource {
                                from,
                                to,
                                by: source
                            }
                        ),
                    }
                    assert_eq!(goal, before, "a refused edge changed the goal");
                    refused += 1;
                }
            }
        }
    }
    // DONE and ABORTED are left by nothing.
    for to in ActionState::ALL {
        for terminal in [ActionState::Done, ActionState::Aborted] {
            assert!(check(terminal, to, Source::User).is_err());
        }
    }
    assert!(refused > 400);
}

#[test]
fn blocked_always_has_a_resume_token_and_a_command() {
    let mut goal = goal_with(ActionState::Ready);
    let err = move_action(
        &mut goal,
        "a",
        ActionState::Blocked,
        Source::Policy,
        "denied",
        1,
        None,
    )
    .unwrap_err();
    assert_eq!(err, IllegalTransition::BlockedWithoutResume);
    let empty = Some(BlockWith {
        kind: BlockerKind::Policy,
        resume_token: "t".to_owned(),
        how_to_resolve: "  ".to_owned(),
    });
    assert!(
        move_action(
            &mut goal,
            "a",
            ActionState::Blocked,
            Source::Policy,
            "d",
            1,
            empty
        )
        .is_err()
    );
    assert_eq!(goal.actions[0].state, ActionState::Ready);

    move_action(
        &mut goal,
        "a",
        ActionState::Blocked,
        Source::Policy,
        "denied",
        1,
        blocked(),
    )
    .unwrap();
    assert_eq!(goal.actions[0].resume_token.as_deref(), Some("retry:a"));
    assert_eq!(goal.blockers.len(), 1);
    assert_eq!(
        goal.blockers[0].how_to_resolve,
        "openphone goals retry goal_T a"
    );
    // Leaving BLOCKED closes its blocker.
    move_action(
        &mut goal,
        "a",
        ActionState::Ready,
        Source::User,
        "retry",
        2,
        None,
    )
    .unwrap();
    assert!(goal.blockers.is_empty());
    assert_eq!(goal.actions[0].resume_token, None);
}

#[test]
fn an_unknown_action_is_refused() {
    let mut goal = goal_with(ActionState::Ready);
    assert_eq!(
        move_action(
            &mut goal,
            "nope",
            ActionState::Running,
            Source::Policy,
            "x",
            1,
            None
        )
        .unwrap_err(),
        IllegalTransition::UnknownAction("nope".to_owned())
    );
}

#[test]
fn plans_are_checked_naming_the_field() {
    let bad = |plan: serde_json::Value| {
        let spec: GoalSpec =
            serde_json::from_value(json!({"objective": "x", "plan": plan})).unwrap();
        new_goal(&spec, "goal_T".to_owned(), Harness::owner(), 1_000).unwrap_err()
    };
    assert_eq!(
        bad(json!([{"id": "A", "title": "t", "kind": "verify"}])).field,
        "plan[0].id"
    );
    assert_eq!(
        bad(json!([{"id": "a", "title": "t", "kind": "tool", "command": "no.such"}])).field,
        "plan[0].kind"
    );
    assert_eq!(
        bad(json!([{"id": "a", "title": "t", "kind": "verify", "depends_on": ["b"]}])).field,
        "a.depends_on"
    );
    assert_eq!(
        bad(json!([
            {"id": "a", "title": "t", "kind": "verify", "depends_on": ["b"]},
            {"id": "b", "title": "t", "kind": "verify", "depends_on": ["a"]}
        ]))
        .message,
        "the dependencies form a cycle"
    );
    let spec: GoalSpec = serde_json::from_value(json!({"objective": " ", "plan": []})).unwrap();
    assert_eq!(
        new_goal(&spec, "g".to_owned(), Harness::owner(), 1)
            .unwrap_err()
            .field,
        "objective"
    );
}
