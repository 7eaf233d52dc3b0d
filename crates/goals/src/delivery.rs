//! Delivery of stored delta reports (§7): to the phone's notification shade (through the
//! bridge), a webhook, or the Telegram Bot API `sendMessage` (MarkdownV2, split into messages
//! of at most 4096 characters). Each report has its own delivery state in the store; a failed
//! try leaves it `pending` with the error until `max_attempts`, then `failed`. A retry renders
//! the **stored** report again — it never runs the goal again.

use std::sync::Arc;

use async_trait::async_trait;
use openphone_core::ToolBridge;
use openphone_device::SystemNotification;
use openphone_store::{GoalReport, ReportDelivery, Store};
use serde_json::{Value, json};

use crate::error::GoalsError;
use crate::report::{DeltaReport, render_plain, telegram_messages};

/// The Telegram Bot API's address.
pub const TELEGRAM_API: &str = "https://api.telegram.org";
/// Tries per report before it is `failed`.
pub const MAX_ATTEMPTS: i64 = 5;

/// Telegram settings: the bot token and the chat the reports go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramConfig {
    /// `https://api.telegram.org`, or a stand-in's address in tests.
    pub api_base: String,
    pub bot_token: String,
    pub chat_id: String,
}

/// Where reports go, per channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryConfig {
    /// The webhook's URL (`POST`, JSON).
    pub webhook_url: Option<String>,
    pub telegram: Option<TelegramConfig>,
}

/// The phone's notification outbox.
#[async_trait]
pub trait Outbox: Send + Sync {
    /// Posts (or updates, by key) a notification.
    async fn post(&self, key: &str, title: &str, body: &str) -> Result<(), String>;
}

/// The outbox of the phone behind a bridge.
pub struct BridgeOutbox(pub Arc<ToolBridge>);

#[async_trait]
impl Outbox for BridgeOutbox {
    async fn post(&self, key: &str, title: &str, body: &str) -> Result<(), String> {
        // What the phone shows a person: the one escape of confirmations (bidi, zero-width
        // and control characters as `\u{XXXX}`).
        let notification = SystemNotification {
            key: key.to_owned(),
            title: openphone_protocol::display_text(title).into_owned(),
            body: openphone_protocol::display_text(body).into_owned(),
            actions: Vec::new(),
        };
        self.0
            .post_notification(&notification)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// What one delivery try did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub goal_id: String,
    pub seq: i64,
    pub state: ReportDelivery,
    /// The error of a failed try, or empty.
    pub error: String,
}

/// Sends pending reports.
pub struct Deliverer {
    store: Arc<Store>,
    config: DeliveryConfig,
    outbox: Option<Arc<dyn Outbox>>,
    http: reqwest::Client,
}

impl Deliverer {
    /// A deliverer over the store, with the channels' settings and the phone's outbox.
    pub fn new(
        store: Arc<Store>,
        config: DeliveryConfig,
        outbox: Option<Arc<dyn Outbox>>,
    ) -> Deliverer {
        Deliverer {
            store,
            config,
            outbox,
            http: reqwest::Client::new(),
        }
    }

    /// Tries every pending report once (at most `limit`), oldest first.
    pub async fn deliver_pending(&self, limit: usize) -> Result<Vec<Delivered>, GoalsError> {
        let mut out = Vec::new();
        for report in self.store.pending_goal_reports(limit)? {
            let outcome = self.send(&report).await;
            let (state, error) = match outcome {
                Ok(()) => (ReportDelivery::Sent, String::new()),
                Err(e) if report.attempts + 1 >= MAX_ATTEMPTS => (ReportDelivery::Failed, e),
                Err(e) => (ReportDelivery::Pending, e),
            };
            self.store
                .set_goal_report_delivery(&report.goal_id, report.seq, state, &error)?;
            out.push(Delivered {
                goal_id: report.goal_id.clone(),
                seq: report.seq,
                state,
                error,
            });
        }
        Ok(out)
    }

    async fn send(&self, stored: &GoalReport) -> Result<(), String> {
        let report: DeltaReport = serde_json::from_value(stored.report.clone())
            .map_err(|e| format!("the stored report cannot be read: {e}"))?;
        match stored.channel.as_str() {
            "notification" => {
                let outbox = self
                    .outbox
                    .as_ref()
                    .ok_or("no notification outbox is attached")?;
                let body = render_plain(&report);
                outbox
                    .post(
                        &format!("goal-{}", report.goal_id),
                        &format!("Goal {}", report.state),
                        &body,
                    )
                    .await
            }
            "webhook" => {
                let url = self
                    .config
                    .webhook_url
                    .as_deref()
                    .ok_or("no webhook URL is configured")?;
                let body = json!({
                    "goal_id": stored.goal_id,
                    "seq": stored.seq,
                    "text": render_plain(&report),
                    "report": stored.report,
                });
                self.post(url, &body).await.map(|_| ())
            }
            "telegram" => {
                let tg = self
                    .config
                    .telegram
                    .as_ref()
                    .ok_or("no Telegram bot is configured")?;
                let url = format!(
                    "{}/bot{}/sendMessage",
                    tg.api_base.trim_end_matches('/'),
                    tg.bot_token
                );
                for text in telegram_messages(&report) {
                    let body =
                        json!({"chat_id": tg.chat_id, "text": text, "parse_mode": "MarkdownV2"});
                    let answer = self.post(&url, &body).await?;
                    if answer.get("ok").and_then(Value::as_bool) != Some(true) {
                        let why = answer
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or("no ok in the answer");
                        return Err(format!("telegram refused the message: {why}"));
                    }
                }
                Ok(())
            }
            other => Err(format!("unknown delivery channel {other:?}")),
        }
    }

    /// POSTs `body` as JSON; the answer's JSON (or `{}`), or why it failed. The bot token
    /// is never part of an error.
    async fn post(&self, url: &str, body: &Value) -> Result<Value, String> {
        let response = self
            .http
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(|e| format!("the request failed: {}", e.without_url()))?;
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or_else(|_| json!({}));
        if status.is_success() {
            Ok(answer)
        } else {
            Err(format!("HTTP {}", status.as_u16()))
        }
    }
}
