//! A job's run on the built-in loop: a read-only job completes, a job that wants to act
//! parks with its proposal, blocked material is refused, and a resumed run replays the stored
//! result (its checkpoint).

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_job_completes_with_the_final_answer_as_its_summary() {
    let bg = Bg::start().await;
    bg.fake.push(Script::tool_call(
        "contacts_search",
        json!({"query": "Alice", "reason": "find Alice"}),
    ));
    let answer = format!(
        "Alice's number is {ALICE}. {}",
        "She is in your contacts under her full name and works at the bakery. ".repeat(5)
    );
    bg.fake.push(Script::text(answer.clone()));
    let runner = Arc::new(bg.runner.clone());
    let scheduler = bg.scheduler(runner);
    let mut events = scheduler.subscribe();
    let job = scheduler
        .create(
            &JobRequest::from_json(&json!({
                "title": "Alice's number",
                "prompt": "Look up Alice's phone number.",
                "session_target": "isolated",
            }))
            .unwrap(),
            None,
        )
        .unwrap();
    let id = job.job.id;
    bg.clock.advance(20_000);
    let report = scheduler.tick().await.unwrap();
    assert_eq!(report.claimed, [(id, 1)]);
    scheduler.wait_idle().await;

    let finished = loop {
        match events.recv().await.unwrap() {
            SchedulerEvent::Finished {
                job,
                outcome,
                summary,
                ..
            } => break (job, outcome, summary),
            _ => continue,
        }
    };
    let (written, outcome, summary) = finished;
    assert_eq!(outcome, openphone_jobs::RunOutcome::Succeeded);
    assert_eq!(written.status, JobStatus::Completed);
    let expected = summary_of(&answer, 240).unwrap();
    assert!(expected.chars().count() <= 240);
    assert!(expected.ends_with('…') && !expected.ends_with(" …"));
    assert_eq!(summary.as_deref(), Some(expected.as_str()));
    // last_result: the answer, then the trace of the run.
    assert!(
        written.last_result.starts_with(answer.trim()),
        "{}",
        written.last_result
    );
    assert!(
        written
            .last_result
            .contains("[run: 2 model turn(s), 1 tool call(s): contacts_search ok;"),
        "{}",
        written.last_result
    );

    // The model was told it runs in the background, and ran the read.
    let system = bg.request(0)[0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("The user is not present"), "{system}");
    let opening = bg.request(0)[1]["content"].as_str().unwrap().to_owned();
    assert!(
        opening.contains("Look up Alice's phone number."),
        "{opening}"
    );
    assert!(bg.last_message(1).starts_with("contacts_search ran."));
    assert!(bg.phone.action_log().is_empty(), "nothing was changed");

    // What the run did is the transcript of its own phone session.
    let session = bg
        .store
        .get_session(&format!("background-job:{id}"))
        .unwrap()
        .unwrap();
    assert_eq!(session.runtime_kind, "builtin");
    assert_eq!(session.source, "background_job");
    assert_eq!(session.status, SessionStatus::Completed);
    let entries = bg.transcript(&job);
    let roles: Vec<&str> = entries.iter().map(|e| e.role.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", STATUS_ROLE]
    );
    assert_eq!(entries[0].body["job_id"], id);
    assert_eq!(tool_statuses(&entries), ["ok"]);
    assert_eq!(entries[4].body["outcome"], "completed");
    assert_eq!(
        entries[2].body["request_id"],
        format!("job-{id}-1-1"),
        "request ids name the job and the attempt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_wants_to_send_a_message_parks_with_the_exact_proposal_and_sends_nothing() {
    let bg = Bg::start().await;
    bg.fake.push(
        Script::tool_call("messages_send", send_args("Running 10 minutes late"))
            .with_content("I'll text Alice."),
    );
    // A read in the same turn after the parked call is not run.
    bg.fake.push(Script::text("never asked"));
    let job = bg.create(json!({"title": "Tell Alice", "prompt": "Tell Alice I'm late."}));

    let result = bg.run(&job).await;
    assert_eq!(
        result,
        RunResult::Parked {
            proposal: ReviewProposal {
                tool: "messages_send".into(),
                command: "openphone.messages.send".into(),
                params: send_args("Running 10 minutes late"),
            }
        }
    );
    assert!(bg.phone.action_log().is_empty(), "nothing was sent");
    assert_eq!(bg.fake.requests().len(), 1, "the run ended at the park");
    let pending = bg
        .store
        .list_confirmations(&openphone_store::ConfirmationFilter::default())
        .unwrap();
    assert!(
        pending.is_empty(),
        "a park is not a foreground confirmation"
    );
    let entries = bg.transcript(&job);
    assert_eq!(tool_statuses(&entries), ["parked"]);
    assert_eq!(entries.last().unwrap().body["outcome"], "parked");
    let parked = entries.iter().find(|e| e.role == "tool").unwrap();
    assert_eq!(
        parked.body["params_digest"],
        openphone_protocol::digest::params_digest(
            "messages_send",
            &send_args("Running 10 minutes late")
        )
        .unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_with_blocked_material_is_refused_and_the_loop_goes_on() {
    let bg = Bg::start().await;
    bg.fake.push(Script::tool_call(
        "messages_send",
        send_args("Bearer sk-live-1234567890"),
    ));
    bg.fake
        .push(Script::text("I could not send the token to Alice."));
    let job = bg.create(json!({"title": "Token", "prompt": "Send Alice my API token."}));

    let result = bg.run(&job).await;
    let RunResult::Completed { summary, .. } = &result else {
        panic!("{result:?}");
    };
    assert_eq!(
        summary.as_deref(),
        Some("I could not send the token to Alice.")
    );
    let told = bg.last_message(1);
    assert!(told.starts_with("messages_send was NOT done"), "{told}");
    let blocked: Value = serde_json::from_str(told.lines().last().unwrap()).unwrap();
    assert_eq!(
        blocked,
        json!({
            "status": "background.confirmation_required",
            "reason": "state_changing_tool_blocked",
            "tool": "messages_send",
            "review": "unavailable",
            "review_refused": "blocked_material",
        })
    );
    assert!(bg.phone.action_log().is_empty());
    assert_eq!(tool_statuses(&bg.transcript(&job)), ["review_refused"]);
}

fn checkpoint(job_id: i64, params: &Value, tool_result: Option<&str>) -> Map<String, Value> {
    let checkpoint = Checkpoint {
        schema: CHECKPOINT_SCHEMA.into(),
        job_id,
        phase: "awaiting_review".into(),
        tool: "messages_send".into(),
        params_digest: openphone_protocol::digest::params_digest("messages_send", params).unwrap(),
        binding_digest: "b".repeat(64),
        idempotency_key: format!("job:{job_id}:k"),
        resume_token: "resume-1".into(),
        created_at: 1,
        resume_pending: true,
        review_resolution: Some("approved".into()),
        tool_result: tool_result.map(str::to_owned),
        resolved_at: Some(2),
    };
    match serde_json::to_value(checkpoint).unwrap() {
        Value::Object(map) => map,
        other => panic!("{other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_replays_the_stored_result_and_executes_nothing() {
    let bg = Bg::start().await;
    let approved = send_args("Running 10 minutes late");
    // The model calls the reviewed action twice, then a different one.
    bg.fake
        .push(Script::tool_call("messages_send", approved.clone()));
    bg.fake.push(Script::tool_call(
        "openphone.messages.send",
        approved.clone(),
    ));
    bg.fake.push(Script::tool_call(
        "messages_send",
        send_args("And see you soon"),
    ));
    let mut job = bg.create(json!({"title": "Tell Alice", "prompt": "Tell Alice I'm late."}));
    let stored = r#"{"status":"ok","result":{"message_id":"sim-msg-77"}}"#;
    job.job.checkpoint_json = checkpoint(job.job.id, &approved, Some(stored));

    let result = bg.run(&job).await;
    // Any other state-changing call starts a new review.
    assert_eq!(
        result,
        RunResult::Parked {
            proposal: ReviewProposal {
                tool: "messages_send".into(),
                command: "openphone.messages.send".into(),
                params: send_args("And see you soon"),
            }
        }
    );
    assert!(
        bg.phone.action_log().is_empty(),
        "the approved action is never run again"
    );
    // The trusted checkpoint block follows the prompt.
    let opening = bg.request(0)[1]["content"].as_str().unwrap().to_owned();
    let prompt_at = opening.find("Tell Alice I'm late.").unwrap();
    let block_at = opening
        .find("<trusted_phone_state source=\"background_review\">")
        .unwrap();
    assert!(prompt_at < block_at);
    assert!(opening.contains("final outcome of the reviewed action"));
    assert!(
        opening.contains(r#""review_resolution":"approved""#),
        "{opening}"
    );
    assert!(opening.contains("sim-msg-77"));
    // Both repeats got the stored result.
    for n in [1, 2] {
        let told = bg.last_message(n);
        assert!(
            told.starts_with(
                "messages_send was reviewed by the user earlier (resolution: approved)"
            ),
            "{told}"
        );
        assert!(told.contains("sim-msg-77"), "{told}");
    }
    assert_eq!(
        tool_statuses(&bg.transcript(&job)),
        ["replayed", "replayed", "parked"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_without_a_stored_result_answers_review_result_missing() {
    let bg = Bg::start().await;
    let approved = send_args("Running 10 minutes late");
    bg.fake
        .push(Script::tool_call("messages_send", approved.clone()));
    bg.fake.push(Script::text("Its outcome is unknown."));
    let mut job = bg.create(json!({"title": "Tell Alice", "prompt": "Tell Alice I'm late."}));
    job.job.checkpoint_json = checkpoint(job.job.id, &approved, None);

    let result = bg.run(&job).await;
    assert!(matches!(result, RunResult::Completed { .. }), "{result:?}");
    let told = bg.last_message(1);
    assert!(
        told.starts_with("Error background.review_result_missing"),
        "{told}"
    );
    assert!(bg.phone.action_log().is_empty());
}
