//! Issue 32 item 2: the built-in model was never offered the job and goal tools (its tool
//! list was built before the job and goal services were installed), so `openphone ask
//! "remind me every morning …"` could not create a job. A real `openphone serve` on a scripted
//! fake model, `openphone ask`, `confirmations approve` and `jobs list` as separate processes.

use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use serde_json::{Value, json};

use super::harness::{cli_async, fake_model_config, jobs_json, pending_ids, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_model_is_offered_the_job_tools_and_ask_creates_a_job() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call(
        "background_job_create",
        json!({"title": "Water the plants", "prompt": "Remind me to water the plants.",
               "interval_ms": 86_400_000, "notification_text": "Water the plants",
               "reason": "the user asked for a reminder every morning"}),
    ));
    fake.push(Script::text("Done: I will remind you every morning."));
    let config = fake_model_config(tmp.path(), &fake);
    let _daemon = serve(&data, &config);

    let ask_dir = data.clone();
    let ask = tokio::spawn(async move {
        cli_async(
            vec![
                "ask".into(),
                "remind me every morning to water the plants".into(),
            ],
            &ask_dir,
        )
        .await
    });
    // Creating a job changes state: the user confirms it (up to 30 s of polls).
    let mut pending = Vec::new();
    for _ in 0..300 {
        pending = pending_ids(&data).await;
        if !pending.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(pending.len(), 1, "no confirmation for the job: {pending:?}");
    let (code, _, err) = cli_async(
        vec!["confirmations".into(), "approve".into(), pending[0].clone()],
        &data,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ask.await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("remind you every morning"), "{out}");

    // The model was offered the assistant-facing job and goal tools.
    let first = &fake.requests()[0];
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools offered: {first}"))
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for tool in [
        "background_job_create",
        "background_job_list",
        "background_job_stop",
        "goal_create",
        "goal_list",
    ] {
        assert!(
            offered.contains(&tool),
            "{tool} was not offered: {offered:?}"
        );
    }

    // The job exists, made by the built-in runtime, recurring daily.
    let (code, listed, err) = jobs_json(&["list"], &data).await;
    assert_eq!(code, 0, "{err}");
    let job: &Value = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"]["title"] == "Water the plants")
        .unwrap_or_else(|| panic!("no job: {listed}"));
    assert_eq!(job["created_by"], "builtin", "{job}");
    assert_eq!(
        job["job"]["schedule_json"]["interval_ms"], 86_400_000,
        "{job}"
    );
}
