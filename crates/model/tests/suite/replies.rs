//! Successful answers: streamed and JSON, text and tool calls, and what goes on the wire.

use openphone_fake_model::{FakeModel, Script, StreamMode};
use openphone_model::{
    ApiKey, ChatRequest, ContentPart, Message, StreamEvent, ToolCall, ToolChoice, ToolSpec,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{ask, call, client, streamed_text};

#[tokio::test]
async fn a_streamed_text_answer_arrives_in_pieces() {
    let fake = FakeModel::start().await;
    fake.push(Script::text("Hello from the fake model").with_chunk(4));
    let client = client(&fake, |_| {});
    let (result, events) = call(&client, &ask("hi")).await;
    let completion = result.unwrap();
    assert_eq!(completion.content, "Hello from the fake model");
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
    assert_eq!(completion.attempts, 1);
    assert!(completion.tool_calls.is_empty());
    let usage = completion.usage.expect("usage is asked for and reported");
    assert!(usage.prompt_tokens > 0 && usage.completion_tokens > 0);
    assert_eq!(streamed_text(&events), completion.content);
    assert!(events.len() >= 6, "{events:?}");

    let sent = &fake.requests()[0];
    assert_eq!(sent["model"], "fake-model");
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent["messages"], json!([{"role": "user", "content": "hi"}]));
    assert!(sent.get("tools").is_none() && sent.get("tool_choice").is_none());
    fake.shutdown().await;
}

#[tokio::test]
async fn a_json_answer_when_streaming_is_off() {
    let fake = FakeModel::start().await;
    fake.push(Script::text("plain answer"));
    let client = client(&fake, |config| config.stream = false);
    let (result, events) = call(&client, &ask("hi")).await;
    let completion = result.unwrap();
    assert_eq!(completion.content, "plain answer");
    assert_eq!(events, vec![StreamEvent::TextDelta("plain answer".into())]);
    let sent = &fake.requests()[0];
    assert_eq!(sent["stream"], false);
    assert!(sent.get("stream_options").is_none());
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_accepted() {
    let fake = FakeModel::start().await;
    fake.push(Script::text("not streamed").with_stream_mode(StreamMode::Json));
    let client = client(&fake, |_| {});
    let (result, _) = call(&client, &ask("hi")).await;
    assert_eq!(result.unwrap().content, "not streamed");
    assert_eq!(fake.requests()[0]["stream"], true);
}

#[tokio::test]
async fn several_tool_calls_in_one_turn_one_character_at_a_time() {
    let calls = vec![
        ("phone_ui_tap", json!({"x": 120, "y": 640})),
        ("phone_ui_type_text", json!({"text": "héllo, wörld"})),
        ("phone_screen_read", json!({})),
    ];
    for mode in [StreamMode::Stream, StreamMode::Json] {
        let fake = FakeModel::start().await;
        fake.push(
            Script::tool_calls(calls.clone())
                .with_content("Let me do that.")
                .with_chunk(1)
                .with_stream_mode(mode),
        );
        let client = client(&fake, |_| {});
        let (result, events) = call(&client, &ask("do three things")).await;
        let completion = result.unwrap();
        let expected: Vec<ToolCall> = calls
            .iter()
            .enumerate()
            .map(|(n, (name, arguments))| ToolCall {
                id: format!("call_{}", n + 1),
                name: (*name).to_owned(),
                arguments: arguments.to_string(),
            })
            .collect();
        assert_eq!(completion.tool_calls, expected, "{mode:?}");
        assert_eq!(completion.content, "Let me do that.");
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));

        // Reassembling the reported pieces by index gives the same calls.
        let mut rebuilt: Vec<(String, String, String)> = Vec::new();
        for event in &events {
            if let StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments_delta,
            } = event
            {
                if rebuilt.len() <= *index {
                    rebuilt.resize(*index + 1, Default::default());
                }
                let slot = &mut rebuilt[*index];
                if let Some(id) = id {
                    slot.0.clone_from(id);
                }
                if let Some(name) = name {
                    slot.1.clone_from(name);
                }
                slot.2.push_str(arguments_delta);
            }
        }
        let from_events: Vec<ToolCall> = rebuilt
            .into_iter()
            .map(|(id, name, arguments)| ToolCall {
                id,
                name,
                arguments,
            })
            .collect();
        assert_eq!(from_events, expected, "{mode:?}");
        fake.shutdown().await;
    }
}

#[tokio::test]
async fn tools_choice_and_history_go_on_the_wire() {
    let fake = FakeModel::start().await;
    fake.push(Script::text("ok"));
    let client = client(&fake, |config| config.max_tokens = Some(256));
    let req = ChatRequest {
        messages: vec![
            Message::system("You operate a phone."),
            Message::user("tap it"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "call_9".into(),
                    name: "phone_ui_tap".into(),
                    arguments: "{\"x\":1}".into(),
                }],
            },
            Message::tool("call_9", "{\"ok\":true}"),
        ],
        tools: vec![ToolSpec {
            name: "phone_ui_tap".into(),
            description: "Tap the screen.".into(),
            parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
        }],
        tool_choice: Some(ToolChoice::Required),
        max_tokens: None,
    };
    let (result, _) = call(&client, &req).await;
    result.unwrap();
    let sent = &fake.requests()[0];
    assert_eq!(sent, &client.request_body(&req).unwrap());
    assert_eq!(sent["max_tokens"], 256);
    assert_eq!(sent["tool_choice"], "required");
    assert_eq!(
        sent["tools"],
        json!([{"type": "function", "function": {
            "name": "phone_ui_tap", "description": "Tap the screen.",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}])
    );
    assert_eq!(
        sent["messages"][2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "phone_ui_tap", "arguments": "{\"x\":1}"}}]})
    );
    assert_eq!(
        sent["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_9", "content": "{\"ok\":true}"})
    );
}

#[tokio::test]
async fn image_parts_are_sent_as_data_urls() {
    let fake = FakeModel::start().await;
    fake.push(Script::text("a cat"));
    let client = client(&fake, |config| config.vision = true);
    let req = ChatRequest {
        messages: vec![Message::user_parts(vec![
            ContentPart::text("What is on screen?"),
            ContentPart::image_data("image/png", &[0x89, b'P', b'N', b'G']),
        ])],
        ..ChatRequest::default()
    };
    let (result, _) = call(&client, &req).await;
    assert_eq!(result.unwrap().content, "a cat");
    assert_eq!(
        fake.requests()[0]["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What is on screen?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}
        ])
    );

    // Without vision the request is refused before anything is sent.
    let blind = super::client(&fake, |config| config.vision = false);
    let (result, _) = call(&blind, &req).await;
    let error = result.unwrap_err();
    assert_eq!(error.reason(), "model_unconfigured");
    assert!(error.to_string().contains("vision"), "{error}");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn the_key_is_sent_as_a_bearer_token_only() {
    let fake = FakeModel::start().await;
    fake.push(Script::text("ok"));
    fake.push(Script::text("ok"));
    let keyed = client(&fake, |config| {
        config.api_key = Some(ApiKey::new("sk-test-123"));
    });
    call(&keyed, &ask("hi")).await.0.unwrap();
    let anonymous = client(&fake, |_| {});
    call(&anonymous, &ask("hi")).await.0.unwrap();

    let recorded = fake.recorded();
    assert_eq!(
        recorded[0].header("authorization"),
        Some("Bearer sk-test-123")
    );
    assert!(!recorded[0].body.to_string().contains("sk-test-123"));
    assert_eq!(recorded[1].header("authorization"), None);
    assert_eq!(recorded[0].header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn the_fake_lists_its_model_and_refuses_non_json() {
    let fake = FakeModel::start().await;
    let http = reqwest::Client::new();
    let models: serde_json::Value = http
        .get(format!("{}/models", fake.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "fake-model");
    fake.push(Script::text("kept"));
    let response = http
        .post(format!("{}/chat/completions", fake.url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(fake.pending(), 1);
    assert_eq!(fake.requests(), vec![json!("not json")]);
}

#[test]
fn a_call_can_run_on_another_task() {
    fn assert_send<T: Send>(_: &T) {}
    let client = openphone_model::ModelClient::new(openphone_model::ModelConfig::new(
        "http://127.0.0.1:9/v1",
        "m",
    ))
    .unwrap();
    let req = ask("x");
    let mut sink = |_event: StreamEvent| {};
    let future = client.complete(&req, &mut sink);
    assert_send(&future);
}
