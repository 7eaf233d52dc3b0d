//! Which failures are retried, how long the client waits, and when it gives up.

use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use openphone_model::{ApiKey, ModelClient, ModelConfig, StreamEvent};
use pretty_assertions::assert_eq;

use super::{ask, call, client, quick_retry, retries};

#[tokio::test]
async fn retry_after_is_honoured_when_longer_than_the_backoff() {
    let fake = FakeModel::start().await;
    fake.push(Script::status_with_retry_after(429, "1"));
    fake.push(Script::text("after the wait"));
    let client = client(&fake, |_| {});
    let (result, events) = call(&client, &ask("hi")).await;
    let completion = result.unwrap();
    assert_eq!(completion.content, "after the wait");
    assert_eq!(completion.attempts, 2);
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(
        retries(&events),
        vec![(2, Duration::from_secs(1), "model_http_429".to_owned())]
    );
}

#[tokio::test]
async fn server_errors_are_retried_with_doubling_waits() {
    let fake = FakeModel::start().await;
    fake.push(Script::status(500));
    fake.push(Script::status(503));
    fake.push(Script::text("third time"));
    let client = client(&fake, |_| {});
    let (result, events) = call(&client, &ask("hi")).await;
    let completion = result.unwrap();
    assert_eq!(completion.content, "third time");
    assert_eq!(completion.attempts, 3);
    assert_eq!(
        retries(&events),
        vec![
            (2, Duration::from_millis(10), "model_http_500".to_owned()),
            (3, Duration::from_millis(20), "model_http_503".to_owned()),
        ]
    );
    // The Retrying event precedes any text of the successful attempt.
    assert!(matches!(events[0], StreamEvent::Retrying { .. }));
}

#[tokio::test]
async fn retries_stop_after_max_attempts() {
    let fake = FakeModel::start().await;
    fake.set_fallback(Script::status(502));
    let client = client(&fake, |config| config.retry = quick_retry(4));
    let (result, events) = call(&client, &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_http_502");
    assert!(error.to_string().contains("after 4 attempt(s)"), "{error}");
    assert_eq!(fake.requests().len(), 4);
    assert_eq!(retries(&events).len(), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_show_the_key() {
    let fake = FakeModel::start().await;
    fake.push(Script::Status {
        code: 401,
        retry_after: None,
        body: r#"{"error":{"message":"Incorrect API key provided: sk-leaky-key","type":"invalid_request_error","code":"invalid_api_key"}}"#.into(),
    });
    let client = client(&fake, |config| {
        config.api_key = Some(ApiKey::new("sk-leaky-key"));
    });
    let (result, events) = call(&client, &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_http_401");
    assert_eq!(error.status(), Some(401));
    assert_eq!(fake.requests().len(), 1);
    assert!(events.is_empty());
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("sk-leaky-key"), "{shown}");
    assert!(shown.contains("Incorrect API key provided: ***"), "{shown}");
    assert!(shown.contains("invalid_api_key"), "{shown}");

    for code in [400, 403, 404, 422] {
        fake.push(Script::status(code));
        let (result, _) = call(&client, &ask("hi")).await;
        assert_eq!(result.unwrap_err().reason(), format!("model_http_{code}"));
    }
    assert_eq!(fake.requests().len(), 5);
}

#[tokio::test]
async fn a_hanging_provider_times_out_after_every_attempt() {
    let fake = FakeModel::start().await;
    fake.set_fallback(Script::Hang);
    let client = client(&fake, |config| {
        config.request_timeout = Duration::from_millis(300);
        config.retry = quick_retry(2);
    });
    let (result, events) = call(&client, &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_timeout");
    assert_eq!(
        error.to_string(),
        "model_timeout: no answer within 300ms (after 2 attempt(s))"
    );
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(
        retries(&events),
        vec![(2, Duration::from_millis(10), "model_timeout".to_owned())]
    );
    fake.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_provider_is_retried_then_reported() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut config = ModelConfig::new(format!("http://{addr}/v1"), "m");
    config.retry = quick_retry(3);
    let client = ModelClient::new(config).unwrap();
    let (result, events) = call(&client, &ask("hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_unreachable");
    let text = error.to_string();
    assert!(text.contains(&addr.to_string()), "{text}");
    assert!(text.contains("after 3 attempt(s)"), "{text}");
    assert!(!text.contains('\n'));
    assert_eq!(retries(&events).len(), 2);
}

#[tokio::test]
async fn a_deadline_stops_the_retries_before_a_wait_that_would_pass_it() {
    let fake = FakeModel::start().await;
    fake.set_fallback(Script::status_with_retry_after(503, "5"));
    let client = client(&fake, |_| {});
    let deadline = tokio::time::sleep(Duration::from_secs(2)).deadline();
    let mut events = Vec::new();
    let result = client
        .complete_until(&ask("hi"), deadline, &mut |event| events.push(event))
        .await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_http_503");
    assert!(error.to_string().contains("after 1 attempt(s)"), "{error}");
    assert_eq!(fake.requests().len(), 1);
    assert!(events.is_empty(), "{events:?}");

    // With room before the deadline, the same call retries as usual.
    fake.set_fallback(Script::status(503));
    let deadline = tokio::time::sleep(Duration::from_secs(60)).deadline();
    let result = client
        .complete_until(&ask("hi"), deadline, &mut |event| events.push(event))
        .await;
    assert!(
        result
            .unwrap_err()
            .to_string()
            .contains("after 3 attempt(s)")
    );
    assert_eq!(retries(&events).len(), 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_limit_ends_the_retries() {
    let fake = FakeModel::start().await;
    fake.push(Script::status_with_retry_after(429, "3600"));
    let client = client(&fake, |_| {});
    let (result, events) = call(&client, &ask("hi")).await;
    assert_eq!(result.unwrap_err().reason(), "model_http_429");
    assert_eq!(fake.requests().len(), 1);
    assert!(events.is_empty());
}
