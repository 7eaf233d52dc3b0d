//! The dispatch of a job to an external runtime (`agent-jobs.md` §7.3): to a connected runtime,
//! never another runtime's job, and `unavailable` when the runtime is not connected or not
//! configured.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_dispatched_to_a_connected_runtime() {
    let bg = Bg::start().await;
    let presence = bg.manager.connect("hermes").unwrap();
    let mut events = bg.events.subscribe();
    let runner = AgentTurnRunner::from_setup(&bg.setup, None, Some(" Hermes ".into())).unwrap();
    let scheduler = bg.scheduler(runner);
    let job = scheduler
        .create(
            &JobRequest::from_json(&json!({
                "title": "Digest",
                "prompt": "Summarise my unread messages.",
                "payload": {"folder": "inbox"},
            }))
            .unwrap(),
            None,
        )
        .unwrap();
    bg.clock.advance(20_000);
    scheduler.tick().await.unwrap();
    scheduler.wait_idle().await;

    let written = scheduler.get(job.job.id).unwrap().job;
    assert_eq!(written.status, JobStatus::Dispatched, "{written:?}");
    assert!(
        written.last_result.contains("sent to runtime hermes"),
        "{}",
        written.last_result
    );
    let requested = loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .unwrap();
        if event.name == "runtime.attention.requested" {
            break event.payload;
        }
    };
    assert_eq!(requested["runtime"], "hermes");
    assert_eq!(requested["source"], "background_job");
    assert_eq!(requested["autonomy"], "ask_before_action");
    assert_eq!(requested["include_screen"], true);
    assert!(requested["screen"].is_object(), "{requested}");
    let text = requested["text"].as_str().unwrap();
    assert!(text.starts_with("Summarise my unread messages."), "{text}");
    assert!(
        text.contains(
            "<untrusted_data source=\"job_payload\">\n{\"folder\":\"inbox\"}\n</untrusted_data>"
        ),
        "{text}"
    );
    let session = requested["phone_session_id"].as_str().unwrap();
    assert_eq!(
        bg.store.get_session(session).unwrap().unwrap().runtime_kind,
        "hermes"
    );
    drop(presence);
}

/// Review of issue 28: with `[jobs] background_runtime` set, every job was handed to that
/// runtime, so another runtime's job ran with the background runtime's authority instead of
/// its creator's. Now only the user's jobs (and the background runtime's own) are sent there;
/// another runtime's job runs in the built-in loop, narrowed to its creator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_runtimes_job_is_not_handed_to_the_background_runtime() {
    let bg = Bg::start().await;
    let presence = bg.manager.connect("hermes").unwrap();
    let runner =
        openphone_agent::DispatchRunner::new(&bg.setup, "hermes").with_builtin(bg.runner.clone());
    let scheduler = bg.scheduler(Arc::new(bg.runner.clone()));
    let job = scheduler
        .create_as(
            &JobRequest::from_json(&json!({"title": "Nosy digest", "prompt": "Summarise."}))
                .unwrap(),
            None,
            &openphone_jobs::Asker::runtime("nosy"),
        )
        .unwrap();
    assert_eq!(job.created_by, "nosy");
    bg.fake.push(Script::text("Nothing new."));
    let result = runner.run(bg.ctx(&job)).await;
    assert!(
        matches!(result, RunResult::Completed { .. }),
        "run in the built-in loop: {result:?}"
    );
    assert_eq!(
        bg.fake.requests().len(),
        1,
        "the built-in loop asked the model"
    );
    let hermes_sessions = bg
        .store
        .list_sessions(&openphone_store::SessionFilter::default())
        .unwrap()
        .into_iter()
        .filter(|s| s.runtime_kind == "hermes")
        .count();
    assert_eq!(hermes_sessions, 0, "nothing was sent to hermes");

    // The user's job still goes to the background runtime.
    let mine = bg.create(json!({"title": "Mine", "prompt": "Summarise."}));
    let result = runner.run(bg.ctx(&mine)).await;
    assert!(
        matches!(result, RunResult::Dispatched { .. }),
        "the user's job is dispatched: {result:?}"
    );
    drop(presence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_that_is_not_connected_or_not_configured_is_unavailable() {
    let bg = Bg::start().await;
    let job = bg.create(json!({"title": "Digest", "prompt": "Summarise."}));
    let hermes = AgentTurnRunner::from_setup(&bg.setup, None, Some("hermes".into())).unwrap();
    let result = hermes.run(bg.ctx(&job)).await;
    assert_eq!(
        failed_with(&result),
        "runtime_background_dispatch_unavailable:hermes"
    );
    let nobody = AgentTurnRunner::from_setup(&bg.setup, None, Some("nobody".into())).unwrap();
    let result = nobody.run(bg.ctx(&job)).await;
    assert_eq!(
        failed_with(&result),
        "runtime_background_dispatch_unavailable:nobody"
    );
    assert!(
        bg.store
            .list_sessions(&openphone_store::SessionFilter::default())
            .unwrap()
            .is_empty(),
        "no session was opened"
    );
    // A runtime id that cannot be one is a configuration error.
    assert!(AgentTurnRunner::from_setup(&bg.setup, None, Some("auto".into())).is_err());
}
