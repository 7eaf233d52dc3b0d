//! Delivery of stored reports against a loopback stand-in of the Telegram Bot API and a
//! webhook: the request's shape, a failed try left pending with its error, the retry from the
//! stored report, and the end state `sent`.

use std::sync::{Arc, Mutex};

use openphone_goals::delivery::{Deliverer, DeliveryConfig, TelegramConfig};
use openphone_store::ReportDelivery;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::support::{Harness, dentist_spec};
use openphone_clock::Clock;

/// A loopback HTTP server answering each request with the next scripted (status, body), and
/// recording (path, JSON body) of every request.
struct StandIn {
    url: String,
    seen: Arc<Mutex<Vec<(String, Value)>>>,
}

async fn stand_in(answers: Vec<(u16, &'static str)>) -> StandIn {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        for (status, body) in answers {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head_end, length) = loop {
                let n = sock.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map(|v| v.trim().parse::<usize>().unwrap())
                        .unwrap_or(0);
                    break (i + 4, len);
                }
            };
            while buf.len() < head_end + length {
                let n = sock.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let path = head.split_whitespace().nth(1).unwrap().to_owned();
            let json: Value = serde_json::from_slice(&buf[head_end..head_end + length]).unwrap();
            log.lock().unwrap().push((path, json));
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(reply.as_bytes()).await.unwrap();
            sock.shutdown().await.unwrap();
        }
    });
    StandIn { url, seen }
}

#[tokio::test]
async fn telegram_reports_are_sent_as_markdown_v2_and_retried_from_the_stored_report() {
    let h = Harness::new();
    let goal = h.ticked_dentist().await;
    let pending = h.store.pending_goal_reports(10).unwrap();
    assert_eq!(pending.len(), 1);

    let api = stand_in(vec![
        (502, "{}"),
        (200, r#"{"ok":true,"result":{"message_id":1}}"#),
    ])
    .await;
    let config = DeliveryConfig {
        webhook_url: None,
        telegram: Some(TelegramConfig {
            api_base: api.url.clone(),
            bot_token: "123:SECRET".to_owned(),
            chat_id: "42".to_owned(),
        }),
    };
    let deliverer = Deliverer::new(h.store.clone(), config, None);
    let first = deliverer.deliver_pending(10).await.unwrap();
    assert_eq!(first[0].state, ReportDelivery::Pending);
    assert_eq!(first[0].error, "HTTP 502");
    assert!(!first[0].error.contains("SECRET"));
    let second = deliverer.deliver_pending(10).await.unwrap();
    assert_eq!(second[0].state, ReportDelivery::Sent);
    assert!(h.store.pending_goal_reports(10).unwrap().is_empty());
    let stored = &h.store.goal_reports(&goal.id).unwrap()[0];
    assert_eq!(
        (stored.attempts, stored.delivery),
        (2, ReportDelivery::Sent)
    );

    let seen = api.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0], seen[1],
        "the retry sent the stored report again, unchanged"
    );
    let (path, body) = &seen[1];
    assert_eq!(path, "/bot123:SECRET/sendMessage");
    assert_eq!(body["chat_id"], "42");
    assert_eq!(body["parse_mode"], "MarkdownV2");
    let text = body["text"].as_str().unwrap();
    assert!(text.starts_with("*Goal blocked — by 18:00 move my dentist appointment to Friday and tell Alice \\(1/3 done\\)"), "{text}");
    assert!(
        text.contains("openphone confirmations approve runtime\\-confirm\\-"),
        "{text}"
    );
}

#[tokio::test]
async fn a_webhook_gets_the_report_and_its_plain_text() {
    let h = Harness::new();
    let mut spec = dentist_spec(h.clock.now_ms());
    spec.delivery = Some(openphone_goals::DeliveryChannel::Webhook);
    let goal = h.engine.create(&spec, Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let hook = stand_in(vec![(204, "")]).await;
    let config = DeliveryConfig {
        webhook_url: Some(format!("{}/hook", hook.url)),
        telegram: None,
    };
    let out = Deliverer::new(h.store.clone(), config, None)
        .deliver_pending(10)
        .await
        .unwrap();
    assert_eq!(out[0].state, ReportDelivery::Sent);
    let seen = hook.seen.lock().unwrap().clone();
    assert_eq!(seen[0].0, "/hook");
    assert_eq!(seen[0].1["goal_id"], goal.id.as_str());
    assert!(
        seen[0].1["text"]
            .as_str()
            .unwrap()
            .starts_with("Goal blocked")
    );
    assert_eq!(seen[0].1["report"]["reason"], "blocked");
}

#[tokio::test]
async fn a_channel_without_settings_fails_after_the_last_try_never_silently() {
    let h = Harness::new();
    h.ticked_dentist().await;
    let deliverer = Deliverer::new(h.store.clone(), DeliveryConfig::default(), None);
    for _ in 0..4 {
        let out = deliverer.deliver_pending(10).await.unwrap();
        assert_eq!(out[0].state, ReportDelivery::Pending);
        assert_eq!(out[0].error, "no Telegram bot is configured");
    }
    let out = deliverer.deliver_pending(10).await.unwrap();
    assert_eq!(out[0].state, ReportDelivery::Failed);
    assert!(h.store.pending_goal_reports(10).unwrap().is_empty());
}
