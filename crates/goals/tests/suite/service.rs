//! The goal commands for runtimes (`openphone.goals.*`) through the real bridge: confirmed
//! like any state-changing command, ownership (the creating runtime owns and plans its goal,
//! another runtime may not), errors naming the field, the wake callback.

use std::sync::{Arc, Mutex};

use openphone_core::ConfirmDecision;
use openphone_core::Operator;
use openphone_goals::{Backends, GoalEngine, GoalTools, Wake};
use openphone_policy::{Autonomy, Caller, ExposureGrants, Role, Transport};
use openphone_protocol::{ErrorCode, ToolRequest, ToolResult, ToolStatus};
use serde_json::{Value, json};

use super::support::Harness;

struct Tools {
    h: Harness,
    engine: Arc<GoalEngine>,
    woken: Arc<Mutex<Vec<String>>>,
    next: Mutex<u32>,
}

fn runtime(id: &str) -> Caller {
    Caller {
        runtime: id.to_owned(),
        transport: Transport::Websocket,
        principal: id.to_owned(),
        role: Role::Runtime,
        enabled: true,
        grants: ExposureGrants::ALL,
        max_autonomy: Autonomy::AskBeforeAction,
    }
}

impl Tools {
    /// A bridge configured with the runtimes these tests use, as a daemon has them: a
    /// runtime's goal works with its owner's authority as configured (`narrow` may read
    /// safe data and change things only; the others may do everything).
    fn new() -> Tools {
        let mut narrow = runtime("narrow");
        narrow.grants =
            ExposureGrants::REMOTE_DEFAULT.with(openphone_protocol::Exposure::Dangerous);
        let mut table = std::collections::BTreeMap::new();
        table.insert(
            "builtin".to_owned(),
            Caller::builtin("daemon").authorisation(),
        );
        for name in ["hermes", "intruder", "wide"] {
            table.insert(name.to_owned(), runtime(name).authorisation());
        }
        table.insert("narrow".to_owned(), narrow.authorisation());
        Tools::on(Harness::with_config(openphone_core::BridgeConfig {
            runtimes: Some(table),
            ..openphone_core::BridgeConfig::default()
        }))
    }

    fn on(h: Harness) -> Tools {
        let engine = Arc::new(GoalEngine::new(
            Arc::clone(&h.store),
            Arc::clone(&h.bridge),
            Backends::default(),
            None,
        ));
        let woken = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&woken);
        let wake: Wake = Arc::new(move |id: &str| seen.lock().unwrap().push(id.to_owned()));
        h.bridge
            .install_service(Arc::new(GoalTools::new(&engine, wake)));
        Tools {
            h,
            engine,
            woken,
            next: Mutex::new(0),
        }
    }

    /// One call as `caller`; a confirmation is approved by the operator and the final result
    /// returned. The second value says whether a confirmation was asked.
    async fn call(&self, caller: &Caller, tool: &str, mut params: Value) -> (ToolResult, bool) {
        params["reason"] = json!("the user asked");
        let n = {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            *next
        };
        let request = ToolRequest {
            request_id: format!("req-{n}"),
            runtime: Some(caller.runtime.clone()),
            runtime_session_id: "rs-1".to_owned(),
            phone_session_id: None,
            tool: tool.to_owned(),
            params,
            reason: None,
            autonomy: None,
            idempotency_key: None,
            timeout_ms: None,
        };
        let result = self
            .h
            .bridge
            .invoke(caller, request, openphone_policy::Context::Interactive)
            .await;
        match result.pending_confirmation() {
            Some(pending) => {
                let operator =
                    Operator::from_caller(&Caller::operator("cli", Transport::Cli, "tester"))
                        .unwrap();
                let done = self
                    .h
                    .bridge
                    .resolve(
                        &operator,
                        &pending.confirmation_id,
                        ConfirmDecision::Approve,
                    )
                    .await
                    .unwrap();
                (done, true)
            }
            None => (result, false),
        }
    }

    async fn create(&self, caller: &Caller, params: Value) -> String {
        let (result, asked) = self.call(caller, "openphone.goals.create", params).await;
        assert!(asked, "creating a goal is confirmed");
        assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
        result.result["goal"]["id"].as_str().unwrap().to_owned()
    }
}

fn device_error(result: &ToolResult) -> (ErrorCode, String, Value) {
    let error = result.error.as_ref().expect("an error");
    let details = Value::Object(error.details.clone().unwrap_or_default());
    (
        error.code,
        details["device_error"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        details,
    )
}

fn read_plan() -> Value {
    json!([{"id": "find", "title": "Find the dentist", "kind": "tool",
            "command": "openphone.calendar.search", "params": {"query": "Dentist"}}])
}

#[tokio::test]
async fn a_runtime_creating_a_goal_owns_and_plans_it_and_the_driver_is_woken() {
    let t = Tools::new();
    let hermes = runtime("hermes");
    let id = t
        .create(
            &hermes,
            json!({"objective": "move the dentist", "plan": read_plan()}),
        )
        .await;
    let goal = t.engine.get(&id).unwrap();
    assert_eq!(goal.owner.runtime.as_deref(), Some("hermes"));
    assert_eq!(goal.owner.surface, "runtime");
    assert_eq!(goal.planner, "hermes");
    assert_eq!(goal.plan_version, 1);
    assert_eq!(*t.woken.lock().unwrap(), vec![id.clone()]);

    // Reads are not confirmed; the owner sees it, with its envelope.
    let (got, asked) = t
        .call(&hermes, "openphone.goals.get", json!({"goal_id": id}))
        .await;
    assert!(!asked);
    assert_eq!(got.status, ToolStatus::Ok, "{got:?}");
    assert_eq!(got.result["goal"]["id"], json!(id));
    let envelope = got.result["envelope"].as_array().unwrap();
    assert_eq!(envelope[0]["action_id"], "find");
    assert_eq!(envelope[0]["outcome"], "allow");
    let (listed, _) = t.call(&hermes, "openphone.goals.list", json!({})).await;
    assert_eq!(listed.result["count"], 1, "{listed:?}");
    assert_eq!(listed.result["goals"][0]["goal_id"], json!(id));

    // Its planner re-plans it: a new plan version, the driver woken again.
    let plan = json!([{"id": "wait", "title": "Wait a little", "kind": "wait",
                       "until_ms": t.engine.now() + 60_000}]);
    let (planned, asked) = t
        .call(
            &hermes,
            "openphone.goals.plan",
            json!({"goal_id": id, "plan": plan}),
        )
        .await;
    assert!(asked, "a plan is confirmed");
    assert_eq!(planned.status, ToolStatus::Ok, "{planned:?}");
    assert_eq!(planned.result["goal"]["plan_version"], 2);
    assert_eq!(t.woken.lock().unwrap().len(), 2);

    // And stops it.
    let (stopped, _) = t
        .call(&hermes, "openphone.goals.stop", json!({"goal_id": id}))
        .await;
    assert_eq!(stopped.status, ToolStatus::Ok, "{stopped:?}");
    assert_eq!(stopped.result["stopped"], "goal");
    assert!(
        t.engine
            .get(&id)
            .unwrap()
            .actions
            .iter()
            .all(|a| a.state == openphone_goals::ActionState::Aborted)
    );
    assert_eq!(t.woken.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn another_runtime_may_not_read_plan_or_stop_a_goal_it_does_not_own() {
    let t = Tools::new();
    let id = t
        .create(
            &runtime("hermes"),
            json!({"objective": "move the dentist", "plan": read_plan()}),
        )
        .await;
    let other = runtime("intruder");
    for (tool, params) in [
        ("openphone.goals.get", json!({"goal_id": id})),
        (
            "openphone.goals.plan",
            json!({"goal_id": id, "plan": read_plan()}),
        ),
        ("openphone.goals.stop", json!({"goal_id": id})),
    ] {
        let (result, _) = t.call(&other, tool, params).await;
        let (code, device, details) = device_error(&result);
        assert_eq!(code, ErrorCode::ToolError, "{tool}: {result:?}");
        assert_eq!(device, "forbidden", "{tool}: {details}");
        assert!(
            details["message"].as_str().unwrap().contains("hermes"),
            "{tool}: names who may: {details}"
        );
    }
    // Nothing changed, and the other runtime's list does not show it.
    let goal = t.engine.get(&id).unwrap();
    assert_eq!(goal.plan_version, 1);
    assert!(!goal.state.is_terminal());
    let (listed, _) = t.call(&other, "openphone.goals.list", json!({})).await;
    assert_eq!(listed.result["count"], 0, "{listed:?}");
}

#[tokio::test]
async fn a_goal_planned_manually_cannot_be_planned_by_its_creator() {
    let t = Tools::new();
    let hermes = runtime("hermes");
    let id = t
        .create(
            &hermes,
            json!({"objective": "move the dentist", "planner": "manual"}),
        )
        .await;
    let (result, _) = t
        .call(
            &hermes,
            "openphone.goals.plan",
            json!({"goal_id": id, "plan": read_plan()}),
        )
        .await;
    let (_, device, details) = device_error(&result);
    assert_eq!(device, "forbidden", "{details}");
    assert!(details["message"].as_str().unwrap().contains("manual"));
}

#[tokio::test]
async fn bad_input_is_invalid_params_naming_the_field() {
    let t = Tools::new();
    let hermes = runtime("hermes");
    let cases = [
        (
            "openphone.goals.create",
            json!({"objective": "x", "planner": "someone-else"}),
            "planner",
        ),
        (
            "openphone.goals.create",
            json!({"objective": "x", "plan": [{"id": "a", "title": "A", "kind": "teleport"}]}),
            "plan[0]",
        ),
        (
            "openphone.goals.create",
            json!({"objective": "x", "plan": [{"id": "a", "title": "A", "kind": "tool",
                    "command": "openphone.nothing.here", "params": {}}]}),
            "plan[0]",
        ),
        (
            "openphone.goals.create",
            json!({"objective": "x", "colour": "blue"}),
            "colour",
        ),
        (
            "openphone.goals.create",
            json!({"objective": "x", "risk_level": "extreme"}),
            "risk_level",
        ),
        (
            "openphone.goals.create",
            json!({"objective": "   "}),
            "objective",
        ),
        (
            "openphone.goals.list",
            json!({"state": "sleeping"}),
            "state",
        ),
        ("openphone.goals.list", json!({"limit": 0}), "limit"),
    ];
    for (tool, params, field) in cases {
        let (result, _) = t.call(&hermes, tool, params.clone()).await;
        let error = result
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("{params}: {result:?}"));
        assert_eq!(error.code, ErrorCode::InvalidParams, "{params}: {result:?}");
        let details = error.details.clone().unwrap_or_default();
        let named = details
            .get("field")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(
            named.starts_with(field),
            "{params}: field {named:?}, expected {field:?} ({})",
            error.message
        );
    }
    // Nothing was created, nobody was woken.
    assert!(t.engine.list(&[], None).unwrap().is_empty());
    assert!(t.woken.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_unknown_goal_is_goal_not_found() {
    let t = Tools::new();
    let (result, _) = t
        .call(
            &runtime("hermes"),
            "openphone.goals.get",
            json!({"goal_id": "goal_NOPE"}),
        )
        .await;
    let (_, device, _) = device_error(&result);
    assert_eq!(device, "goal_not_found", "{result:?}");
}

/// The `job` kind's own `title` collided with the action's `title` (the kind's fields are
/// flattened into the action): no `job` action could be read at all.
#[test]
fn regression_a_job_action_is_read_with_the_action_title() {
    let spec: openphone_goals::ActionSpec = serde_json::from_value(json!({
        "id": "later", "title": "Remind me", "kind": "job",
        "prompt": "Remind me of the dentist", "run_at": 5
    }))
    .unwrap();
    assert_eq!(spec.title, "Remind me");
    let openphone_goals::ActionKind::Job {
        title,
        prompt,
        run_at,
    } = &spec.kind
    else {
        panic!("{spec:?}");
    };
    assert!(title.is_empty(), "the job takes the action's title");
    assert_eq!(prompt, "Remind me of the dentist");
    assert_eq!(*run_at, Some(5));
    // A different title for the job itself is `job_title`, and survives a round trip.
    let spec: openphone_goals::ActionSpec = serde_json::from_value(json!({
        "id": "later", "title": "Remind me", "kind": "job", "job_title": "Dentist reminder",
        "prompt": "p"
    }))
    .unwrap();
    let again: openphone_goals::ActionSpec =
        serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
    assert_eq!(again, spec);
    assert!(
        matches!(&spec.kind, openphone_goals::ActionKind::Job { title, .. } if title == "Dentist reminder")
    );
}

/// A goal's steps run as the goal layer (runtime `builtin`): without a check, a runtime
/// granted `dangerous` (to create goals) but not `private_read` could have its goal read the
/// calendar, and one capped at `ask_before_action` could create a `trusted_actions` goal.
#[tokio::test]
async fn regression_a_runtime_goal_stays_within_the_runtime_grants_and_ceiling() {
    let t = Tools::new();
    let mut narrow = runtime("narrow");
    narrow.grants = ExposureGrants::REMOTE_DEFAULT.with(openphone_protocol::Exposure::Dangerous);
    let (result, _) = t
        .call(
            &narrow,
            "openphone.goals.create",
            json!({"objective": "find the dentist", "plan": read_plan()}),
        )
        .await;
    let (code, device, details) = device_error(&result);
    assert_eq!(code, ErrorCode::ToolError, "{result:?}");
    assert_eq!(device, "forbidden", "{details}");
    let message = details["message"].as_str().unwrap();
    assert!(
        message.contains("openphone.calendar.search") && message.contains("narrow"),
        "{message}"
    );
    assert!(
        t.engine.list(&[], None).unwrap().is_empty(),
        "no goal was made"
    );

    // Nor through a success criterion that reads, nor by handing work to the built-in
    // runtime (its own tools and grants).
    let criterion = json!([{"id": "moved", "description": "on Friday",
        "check": {"kind": "tool_predicate", "command": "openphone.calendar.search",
                  "params": {"query": "Dentist"},
                  "predicate": {"op": "exists", "pointer": "/events"}}}]);
    let judge = json!([{"id": "ok", "description": "looks right",
        "check": {"kind": "runtime_judge", "question": "what is in my calendar?"}}]);
    let turn = json!([{"id": "look", "title": "Look", "kind": "agent_turn",
        "prompt": "search my calendar and report what you find"}]);
    for (what, params) in [
        (
            "criterion",
            json!({"objective": "o", "success_criteria": criterion}),
        ),
        (
            "judge",
            json!({"objective": "o", "success_criteria": judge}),
        ),
        ("agent_turn", json!({"objective": "o", "plan": turn})),
    ] {
        let (result, _) = t.call(&narrow, "openphone.goals.create", params).await;
        let (_, device, details) = device_error(&result);
        assert_eq!(device, "forbidden", "{what}: {details}");
    }
    assert!(
        t.engine.list(&[], None).unwrap().is_empty(),
        "still no goal"
    );

    // A plan submitted later is held to the same rule; an `expect` read counts too.
    let id = t
        .create(
            &narrow,
            json!({"objective": "tell Alice", "autonomy": "trusted_actions"}),
        )
        .await;
    let goal = t.engine.get(&id).unwrap();
    assert_eq!(goal.autonomy, "ask_before_action", "clamped to the ceiling");
    let checked_send = json!([{"id": "tell", "title": "Tell Alice", "kind": "tool",
        "command": "openphone.messages.send", "params": {"to": "+49 151 2345 6789", "body": "hi"},
        "expect": {"command": "openphone.calendar.search", "params": {"query": "Dentist"},
                   "predicate": {"op": "exists", "pointer": "/events"}}}]);
    for plan in [read_plan(), checked_send] {
        let (result, _) = t
            .call(
                &narrow,
                "openphone.goals.plan",
                json!({"goal_id": id, "plan": plan}),
            )
            .await;
        let (_, device, details) = device_error(&result);
        assert_eq!(device, "forbidden", "{details}");
    }
    assert_eq!(
        t.engine.get(&id).unwrap().plan_version,
        0,
        "no plan accepted"
    );

    // A runtime granted the class may.
    t.create(
        &runtime("wide"),
        json!({"objective": "find the dentist", "plan": read_plan()}),
    )
    .await;
}

/// The runtime-goal check is the bridge's own policy: a command the runtime's tool policy
/// denies (layer 2) is refused for its goal as it would be for the runtime itself.
#[tokio::test]
async fn a_runtime_goal_may_not_use_a_command_its_tool_policy_denies() {
    let mut config = openphone_core::BridgeConfig::default();
    config.tool_policy.runtimes.insert(
        "hermes".to_owned(),
        openphone_policy::ToolList {
            profile: None,
            allow: None,
            deny: vec![openphone_policy::ToolSelector::parse("openphone.calendar.search").unwrap()],
        },
    );
    let t = Tools::on(Harness::with_config(config));
    let (result, _) = t
        .call(
            &runtime("hermes"),
            "openphone.goals.create",
            json!({"objective": "find the dentist", "plan": read_plan()}),
        )
        .await;
    let (_, device, details) = device_error(&result);
    assert_eq!(device, "forbidden", "{details}");
    let message = details["message"].as_str().unwrap();
    assert!(
        message.contains("tool_policy"),
        "names the layer: {message}"
    );
    // Another runtime without that deny entry may.
    t.create(
        &runtime("wide"),
        json!({"objective": "find the dentist", "plan": read_plan()}),
    )
    .await;
}

/// A runtime's goal's steps run as `builtin` narrowed to the owner's authority now (issue 28):
/// once Hermes may no longer read private data, its goal's calendar read is not made, though
/// `builtin` could make it.
#[tokio::test]
async fn a_runtimes_goal_step_runs_with_its_owners_authority_now() {
    let t = Tools::new();
    let id = t
        .create(
            &runtime("hermes"),
            json!({"objective": "find the dentist", "plan": read_plan()}),
        )
        .await;
    let mut config = t.h.bridge.config();
    let table = config.runtimes.as_mut().unwrap();
    let mut hermes = table["hermes"];
    hermes.grants = ExposureGrants::REMOTE_DEFAULT.with(openphone_protocol::Exposure::Dangerous);
    table.insert("hermes".to_owned(), hermes);
    t.h.bridge.set_config(config);

    t.engine.tick(&id).await.unwrap();
    let goal = t.engine.get(&id).unwrap();
    let find = goal.action("find").unwrap();
    assert_ne!(find.state, openphone_goals::ActionState::Done, "{:?}", find);
    assert!(
        find.attempts
            .iter()
            .all(|a| a.outcome != openphone_goals::AttemptOutcome::Ok),
        "{find:?}"
    );
    let read =
        t.h.store
            .export_audit(0, 10_000)
            .unwrap()
            .into_iter()
            .any(|r| {
                r.entry.tool.as_deref() == Some("openphone.calendar.search")
                    && r.entry.status == Some(ToolStatus::Ok)
            });
    assert!(
        !read,
        "the calendar was read for a goal whose owner may not read it"
    );
}

/// Waiting on a phone event reads it (the payload is matched by `where` and was kept as
/// evidence): a runtime granted only safe reads could read SMS texts and senders through a
/// goal's `wait on phone.message.received`. The wait needs the grant of the command that
/// reads such events, named in the refusal.
#[tokio::test]
async fn regression_a_safe_read_runtime_read_messages_through_a_goal_wait() {
    let t = Tools::new();
    let mut narrow = runtime("narrow");
    narrow.grants = ExposureGrants::REMOTE_DEFAULT.with(openphone_protocol::Exposure::Dangerous);
    for (event, command) in [
        ("phone.message.received", "openphone.messages.search"),
        ("phone.notification.posted", "openphone.notifications.list"),
        ("phone.call.received", "openphone.calls.search"),
    ] {
        let plan = json!([{"id": "reply", "title": "Wait", "kind": "wait",
            "until_ms": 4_000_000_000_000_i64, "on": {"event": event}}]);
        let (result, _) = t
            .call(
                &narrow,
                "openphone.goals.create",
                json!({"objective": "read their texts", "plan": plan}),
            )
            .await;
        let (_, device, details) = device_error(&result);
        assert_eq!(device, "forbidden", "{event}: {details}");
        let message = details["message"].as_str().unwrap();
        assert!(
            message.contains(command) && message.contains(event),
            "{message}"
        );
    }
    assert!(
        t.engine.list(&[], None).unwrap().is_empty(),
        "no goal was made"
    );
    // A runtime that may read messages may wait on them.
    let plan = json!([{"id": "reply", "title": "Wait", "kind": "wait",
        "until_ms": 4_000_000_000_000_i64, "on": {"event": "phone.message.received"}}]);
    t.create(
        &runtime("wide"),
        json!({"objective": "wait for Bob", "plan": plan}),
    )
    .await;
}
