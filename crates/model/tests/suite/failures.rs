//! Broken answers: cut streams, malformed bodies, error objects, cancellation.

use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use pretty_assertions::assert_eq;

use super::{ask, call, client, retries, streamed_text};

#[tokio::test]
async fn a_stream_cut_after_its_first_chunk_is_not_replayed() {
    let fake = FakeModel::start().await;
    fake.push(Script::HangAfterFirstChunk);
    fake.set_fallback(Script::text("must not be used"));
    let client = client(&fake, |config| {
        config.request_timeout = Duration::from_millis(300);
    });
    let (result, events) = call(&client, &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_unreachable");
    assert!(error.to_string().contains("stream interrupted"), "{error}");
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(streamed_text(&events), "partial");
    assert!(retries(&events).is_empty());
    fake.shutdown().await;
}

#[tokio::test]
async fn a_stream_that_ends_before_done_is_a_bad_response() {
    let fake = FakeModel::start().await;
    fake.push(Script::raw(
        "text/event-stream",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"}}]}\n\n",
    ));
    let client = client(&fake, |_| {});
    let (result, events) = call(&client, &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_bad_response");
    assert!(error.to_string().contains("stream interrupted"), "{error}");
    assert_eq!(streamed_text(&events), "half");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn malformed_bodies_are_bad_responses() {
    let fake = FakeModel::start().await;
    let client = client(&fake, |config| config.stream = false);
    for (content_type, body, needle) in [
        ("application/json", "{\"choices\": [", "not JSON"),
        (
            "application/json",
            "{\"id\": \"x\", \"object\": \"chat.completion\"}",
            "no \"choices\"",
        ),
        ("text/html", "<html>502 Bad Gateway</html>", "not JSON"),
        ("text/event-stream", "data: {oops\n\n", "not JSON"),
    ] {
        fake.push(Script::raw(content_type, body));
        let (result, _) = call(&client, &ask("hi")).await;
        let error = result.unwrap_err();
        assert_eq!(error.reason(), "model_bad_response", "{body}");
        assert!(error.to_string().contains(needle), "{error}");
    }
    assert_eq!(fake.requests().len(), 4, "bad responses are not retried");
}

#[tokio::test]
async fn error_objects_are_provider_errors() {
    let fake = FakeModel::start().await;
    fake.push(Script::raw(
        "application/json",
        r#"{"error":{"message":"model 'llama9' not found","type":"not_found_error"}}"#,
    ));
    fake.push(Script::raw(
        "text/event-stream",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
         data: {\"error\":{\"message\":\"the model crashed\",\"code\":500}}\n\n",
    ));
    let client = client(&fake, |_| {});

    let (result, _) = call(&client, &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_provider_error");
    assert_eq!(
        error.to_string(),
        "model_provider_error: model 'llama9' not found (type not_found_error)"
    );

    let (result, events) = call(&client, &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_provider_error");
    assert!(error.to_string().contains("the model crashed"), "{error}");
    assert_eq!(streamed_text(&events), "Hi");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn long_error_bodies_are_cut_to_one_short_line() {
    let fake = FakeModel::start().await;
    fake.push(Script::Status {
        code: 400,
        retry_after: None,
        body: format!("line one\nline two {}", "x".repeat(5000)),
    });
    let client = client(&fake, |_| {});
    let error = call(&client, &ask("hi")).await.0.unwrap_err();
    let text = error.to_string();
    assert!(!text.contains('\n'), "{text}");
    assert!(text.contains("line one\\nline two"), "{text}");
    assert!(text.chars().count() < 300, "{}", text.chars().count());
}

#[tokio::test]
async fn dropping_a_call_cancels_it_cleanly() {
    let fake = FakeModel::start().await;
    fake.push(Script::Hang);
    fake.push(Script::text("next"));
    let client = client(&fake, |_| {});
    let req = ask("hi");
    let mut sink = |_event| {};
    let call_future = client.complete(&req, &mut sink);
    let outcome = tokio::time::timeout(Duration::from_millis(200), call_future).await;
    assert!(
        outcome.is_err(),
        "the hanging call is still running when dropped"
    );
    // The client stays usable and the next request gets the next script.
    let (result, _) = call(&client, &ask("again")).await;
    assert_eq!(result.unwrap().content, "next");
    assert_eq!(fake.requests().len(), 2);
    fake.shutdown().await;
}

#[tokio::test]
async fn a_delayed_reply_still_arrives_within_the_timeout() {
    let fake = FakeModel::start().await;
    fake.push(Script::delay(
        Duration::from_millis(50),
        Script::text("late"),
    ));
    let client = client(&fake, |_| {});
    let (result, _) = call(&client, &ask("hi")).await;
    assert_eq!(result.unwrap().content, "late");
}

#[tokio::test]
async fn an_empty_queue_answers_with_a_clear_500() {
    let fake = FakeModel::start().await;
    let client = client(&fake, |config| config.retry = super::quick_retry(1));
    let error = call(&client, &ask("hi")).await.0.unwrap_err();
    assert_eq!(error.reason(), "model_http_500");
    assert!(
        error.to_string().contains("fake model: no scripted reply"),
        "{error}"
    );
}
