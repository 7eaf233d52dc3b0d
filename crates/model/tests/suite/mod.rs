mod failures;
mod replies;
mod retries;

use std::time::Duration;

use openphone_fake_model::FakeModel;
use openphone_model::{
    ChatRequest, Completion, Message, ModelClient, ModelConfig, ModelError, RetryPolicy,
    StreamEvent,
};

/// Retries that are quick and predictable: 10 ms doubling, no jitter.
pub fn quick_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(100),
        jitter: false,
        ..RetryPolicy::default()
    }
}

/// A client of `fake` with quick retries, changed by `tweak`.
pub fn client(fake: &FakeModel, tweak: impl FnOnce(&mut ModelConfig)) -> ModelClient {
    let mut config = ModelConfig::new(fake.url(), "fake-model");
    config.retry = quick_retry(3);
    config.request_timeout = Duration::from_secs(10);
    tweak(&mut config);
    ModelClient::new(config).unwrap()
}

/// A request with one user message.
pub fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user(text)],
        ..ChatRequest::default()
    }
}

/// Runs one call, returning its result and every event it reported.
pub async fn call(
    client: &ModelClient,
    req: &ChatRequest,
) -> (Result<Completion, ModelError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = client.complete(req, &mut |event| events.push(event)).await;
    (result, events)
}

/// The text of the `TextDelta` events, joined.
pub fn streamed_text(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The `Retrying` events as (attempt, delay, reason).
pub fn retries(events: &[StreamEvent]) -> Vec<(u32, Duration, String)> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retrying {
                attempt,
                delay,
                reason,
                ..
            } => Some((*attempt, *delay, reason.clone())),
            _ => None,
        })
        .collect()
}
