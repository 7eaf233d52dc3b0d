//! A watcher works with its creator's authority (issue 28, item 5): what it watches and what
//! its stored tool call calls are checked against the creator's grants at creation and again
//! when it works; its polls and its tool call run as `builtin` narrowed to the creator; the
//! jobs it creates are the creator's; its attention requests go to the creator.

use openphone_jobs::{Asker, JobRequest, JobRunner, RunContext, RunResult, StopSignal};
use openphone_policy::{Autonomy, Caller, Context, ExposureGrants};
use openphone_protocol::{ToolRequest, ToolResult, ToolStatus};
use openphone_store::WatcherRecord;
use openphone_watchers::ToolCallRunner;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{BOB, Harness, NOSY_GRANTS, hermes, message, operator, registry, runtime};

fn screen_reads(h: &Harness) -> usize {
    h.store
        .export_audit(0, 10_000)
        .unwrap()
        .into_iter()
        .filter(|r| r.entry.tool.as_deref() == Some("openphone.screen.get"))
        .count()
}

fn refusal(result: &ToolResult) -> (String, String) {
    assert_eq!(result.status, ToolStatus::Error, "{result:?}");
    let error = result.error.as_ref().unwrap();
    let code = error.details.as_ref().unwrap()["device_error"]
        .as_str()
        .unwrap()
        .to_owned();
    (code, error.message.clone())
}

#[tokio::test]
async fn a_runtimes_watcher_polls_with_its_creators_grants() {
    let h = Harness::new();
    // At creation: a runtime without `private_read` may not watch messages (it would read
    // them through the watcher) nor store a call it may not make.
    let nosy = runtime("nosy", NOSY_GRANTS);
    let on_messages = h
        .call_as(
            &nosy,
            "openphone.watchers.create",
            json!({"title": "all texts", "source": "message", "match_any": true}),
        )
        .await;
    let (code, why) = refusal(&on_messages);
    assert_eq!(code, "tool_not_granted");
    assert!(why.contains("openphone.messages.search"), "{why}");
    assert!(why.contains("private_read"), "{why}");
    let stored_call = h
        .call_as(
            &nosy,
            "openphone.watchers.create",
            json!({"title": "who", "source": "time", "next_run_at": h.now() + 60_000,
                   "tool": "contacts_search", "arguments": {"query": "Bob"}}),
        )
        .await;
    let (code, why) = refusal(&stored_call);
    assert_eq!(code, "tool_not_granted");
    assert!(why.contains("openphone.contacts.search"), "{why}");
    assert!(h.store.list_watchers(None, None).unwrap().is_empty());

    // A screen watcher of Hermes reads the screen while Hermes may…
    let t0 = h.now();
    let w = h
        .watcher(json!({"title": "groceries", "source": "screen", "query": "groceries"}))
        .await;
    h.watchers.tick(t0).await;
    assert_eq!(screen_reads(&h), 1);
    // …and not once Hermes may not read the screen any more: `builtin` could, Hermes can't.
    h.set_grants(
        "hermes",
        ExposureGrants {
            safe_read: false,
            ..ExposureGrants::ALL
        },
    );
    let check = h.watcher_now(w.watcher_id).cursor["next_check_at"]
        .as_i64()
        .unwrap();
    assert!(h.watchers.tick(check).await.is_empty());
    assert_eq!(screen_reads(&h), 1, "no read was made for Hermes");
    let cursor = h.watcher_now(w.watcher_id).cursor;
    let error = cursor["last_error"].as_str().unwrap();
    assert!(error.starts_with("tool_not_granted"), "{error}");
    assert!(error.contains("safe_read"), "{error}");
}

/// A runtime's event watcher stops seeing events its creator may no longer read, and is not
/// told at its deadline whether a reply came.
#[tokio::test]
async fn a_runtimes_message_watcher_goes_blind_when_its_creator_loses_private_read() {
    let h = Harness::new();
    h.watcher(json!({"title": "any text", "source": "message", "match_any": true}))
        .await;
    let (silent, deadline) = h.bob_no_reply_watcher().await;
    h.set_grants("hermes", NOSY_GRANTS);
    assert!(h.inject(message(BOB, "code 482913")).await.is_empty());
    h.clock.set(deadline);
    assert!(h.watchers.tick(deadline).await.is_empty());
    assert_eq!(
        h.watcher_now(silent.watcher_id).end_reason.as_deref(),
        Some("not_granted")
    );
}

fn run_context(h: &Harness, job_id: i64) -> RunContext {
    RunContext {
        job: h.scheduler.get(job_id).unwrap().job,
        attempt: 1,
        deadline_ms: h.now() + 480_000,
        stop: StopSignal::never(),
        clock: h.bridge.clock(),
    }
}

#[tokio::test]
async fn a_watcher_created_job_belongs_to_the_watchers_creator() {
    let h = Harness::new();
    let prompt = h
        .watcher(
            json!({"title": "summarise", "source": "message", "match_any": true,
                        "prompt": "Summarise {{event.text}}"}),
        )
        .await;
    let lookup = h
        .watcher(
            json!({"title": "who", "source": "message", "match_any": true,
                        "tool": "contacts_search", "arguments": {"query": "{{event.name}}"}}),
        )
        .await;
    let users = h
        .watcher_as(
            &operator(),
            json!({"title": "mine", "source": "message", "match_any": true, "prompt": "Look"}),
        )
        .await;
    let fired = h.inject(message(BOB, "hello")).await;
    assert_eq!(fired.len(), 3, "{fired:?}");
    let job_of = |watcher_id: i64| {
        let job_id = fired
            .iter()
            .find(|f| f.watcher_id == watcher_id)
            .unwrap()
            .job_id
            .unwrap();
        h.scheduler.get(job_id).unwrap()
    };
    assert_eq!(job_of(prompt.watcher_id).created_by, "hermes");
    assert_eq!(job_of(lookup.watcher_id).created_by, "hermes");
    assert_eq!(job_of(users.watcher_id).created_by, "operator");

    // The stored call runs with Hermes' authority now: without `private_read` it calls
    // nothing, though `builtin` could.
    h.set_grants("hermes", NOSY_GRANTS);
    let job_id = job_of(lookup.watcher_id).job.id;
    let outcome = ToolCallRunner::new(h.bridge.clone(), registry())
        .run(run_context(&h, job_id))
        .await;
    let RunResult::Failed { detail, .. } = &outcome else {
        panic!("ran: {outcome:?}");
    };
    assert!(detail.contains("openphone.contacts.search"), "{detail}");
    assert!(detail.contains("private_read"), "{detail}");
    let searched = h
        .store
        .export_audit(0, 10_000)
        .unwrap()
        .into_iter()
        .any(|r| r.entry.tool.as_deref() == Some("openphone.contacts.search"));
    assert!(!searched, "no contact was read");
}

#[tokio::test]
async fn a_runtimes_watcher_asks_its_creator_not_the_users_assistant() {
    let h = Harness::new();
    let w = h
        .watcher_as(
            &hermes(),
            json!({"title": "bell", "source": "message", "match_any": true}),
        )
        .await;
    let fired = h.inject(message(BOB, "ring")).await;
    assert_eq!(fired[0].reaction, "attention");
    // The built-in runtime (the user's assistant, routed for the `watcher` surface) is not
    // asked; the request went to Hermes, which this phone has not configured.
    assert!(h.recorder.attended.lock().unwrap().is_empty());
    let firing = &h.store.watcher_firings(w.watcher_id).unwrap()[0];
    assert_eq!(firing.reaction_state, "failed");
    assert!(firing.reaction_note.contains("hermes"), "{firing:?}");
}

/// A runtime's watcher counts its jobs against the runtime's job quota; when that is full, the
/// firing is not lost: it becomes an attention request to the creator, saying why.
#[tokio::test]
async fn a_full_job_quota_turns_a_runtimes_reaction_into_an_attention_request() {
    let h = Harness::new();
    let w = h
        .watcher(
            json!({"title": "every text", "source": "message", "match_any": true,
                        "recurring": true, "prompt": "Summarise {{event.text}}"}),
        )
        .await;
    let per_runtime = h.scheduler.config().quota().per_runtime;
    for n in 0..per_runtime {
        let fired = h.inject(message(BOB, &format!("text {n}"))).await;
        assert_eq!(fired[0].reaction, "agent_job", "{fired:?}");
    }
    let fired = h.inject(message(BOB, "one too many")).await;
    assert_eq!(fired.len(), 1, "the firing is not lost");
    assert_eq!(fired[0].reaction, "attention");
    assert_eq!(fired[0].job_id, None);
    let firings = h.store.watcher_firings(w.watcher_id).unwrap();
    assert_eq!(firings.len(), per_runtime + 1);
    // The user's own watchers still get their jobs.
    h.watcher_as(
        &operator(),
        json!({"title": "mine", "source": "message", "match_any": true, "prompt": "Look"}),
    )
    .await;
    let fired = h.inject(message(BOB, "for the user")).await;
    let users = fired.iter().find(|f| f.watcher_id != w.watcher_id).unwrap();
    assert_eq!(users.reaction, "agent_job");
}

/// `tool` with `params` through the bridge as `builtin` working in runtime session `session`
/// (a job's run: `background-job:<id>`), as a review's execution or a job's tool call makes
/// it; a ceiling of `trusted_actions`, so a state change runs without a confirmation.
async fn builtin_in(h: &Harness, session: &str, n: u32, tool: &str, params: Value) -> ToolResult {
    let mut caller = Caller::builtin("daemon");
    caller.max_autonomy = Autonomy::TrustedActions;
    let mut params = params;
    params["reason"] = json!("the job's step");
    h.bridge
        .invoke(
            &caller,
            ToolRequest {
                request_id: format!("in-job-{n}"),
                runtime: Some("builtin".into()),
                runtime_session_id: session.to_owned(),
                phone_session_id: Some(session.to_owned()),
                tool: tool.into(),
                params,
                autonomy: Some("trusted_actions".into()),
                ..ToolRequest::default()
            },
            Context::Interactive,
        )
        .await
}

#[tokio::test]
async fn a_watcher_created_inside_a_runtimes_job_belongs_to_that_runtime() {
    let h = Harness::new();
    let users = h
        .watcher_as(
            &operator(),
            json!({"title": "bank texts", "source": "message", "match_any": true}),
        )
        .await;
    // `nosy` (no `private_read`) made a job; `builtin` does its work.
    let job = h
        .scheduler
        .create_as(
            &JobRequest::from_json(&json!({"title": "Watch", "prompt": "Set up watchers."}))
                .unwrap(),
            None,
            &Asker::runtime("nosy"),
        )
        .unwrap();
    let session = format!("background-job:{}", job.job.id);

    // A message watcher needs `private_read`, which nosy lacks: refused, though `builtin`
    // has it.
    let on_messages = builtin_in(
        &h,
        &session,
        1,
        "openphone.watchers.create",
        json!({"title": "all texts", "source": "message", "match_any": true}),
    )
    .await;
    let (code, why) = refusal(&on_messages);
    assert_eq!(code, "tool_not_granted");
    assert!(why.contains("private_read"), "{why}");
    assert!(why.contains("nosy"), "{why}");

    // One it may have is nosy's, not the user's.
    let timer = builtin_in(
        &h,
        &session,
        2,
        "openphone.watchers.create",
        json!({"title": "later", "source": "time", "next_run_at": h.now() + 60_000}),
    )
    .await;
    assert_eq!(timer.status, ToolStatus::Ok, "{timer:?}");
    let created: WatcherRecord = serde_json::from_value(timer.result["watcher"].clone()).unwrap();
    assert_eq!(created.runtime, "nosy");
    assert_eq!(h.watcher_now(created.watcher_id).runtime, "nosy");

    // Listing and stopping there act on nosy's watchers only, never the user's.
    let listed = builtin_in(&h, &session, 3, "openphone.watchers.list", json!({})).await;
    assert_eq!(listed.status, ToolStatus::Ok, "{listed:?}");
    assert_eq!(listed.result["count"], 1, "{:?}", listed.result);
    assert_eq!(
        listed.result["watchers"][0]["watcher_id"],
        created.watcher_id
    );
    let stopped = builtin_in(
        &h,
        &session,
        4,
        "openphone.watchers.stop",
        json!({"all": true}),
    )
    .await;
    assert_eq!(stopped.status, ToolStatus::Ok, "{stopped:?}");
    assert_eq!(stopped.result["stopped"], 1, "{:?}", stopped.result);
    assert_eq!(
        h.watcher_now(users.watcher_id).end_reason,
        None,
        "the user's watcher still runs"
    );

    // A job session whose job cannot be read is refused, never taken for the user's.
    let unknown = builtin_in(
        &h,
        "background-job:987654",
        5,
        "openphone.watchers.create",
        json!({"title": "later", "source": "time", "next_run_at": h.now() + 60_000}),
    )
    .await;
    let (code, why) = refusal(&unknown);
    assert_eq!(code, "work_owner_unknown");
    assert!(why.contains("background-job:987654"), "{why}");
}
