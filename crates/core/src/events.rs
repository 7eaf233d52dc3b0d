//! The event bus: manifest events fanned out to transports.
//!
//! Every event has a manifest name, a payload and an audience (the runtime it concerns, and
//! whether operators see it). Publishers hand in a typed [`endpoint::Event`], so each payload
//! has the one wire shape `openphone_protocol::endpoint` defines; subscribers receive the name
//! and the payload as JSON, ready for the wire. Transports subscribe and filter by audience;
//! the bus never blocks a publisher (a subscriber that falls behind loses the oldest events and
//! is told how many).

use openphone_protocol::Registry;
use openphone_protocol::endpoint;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::broadcast;

/// The manifest name of `endpoint::Event::ToolResult`.
const TOOL_RESULT: &str = "runtime.tool.result";

/// Who should receive an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Audience {
    /// The runtime the event concerns (`None`: every runtime subscribed to it).
    pub runtime: Option<String>,
    /// Whether operator surfaces receive it.
    pub operators: bool,
}

/// One published event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Bus-wide sequence number, increasing.
    pub seq: u64,
    /// A manifest event name, e.g. `runtime.confirmation.required`.
    pub name: String,
    pub payload: Value,
    pub audience: Audience,
}

/// Why an event was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Its name is not in the events manifest.
    #[error("{0:?} is not an event of the events manifest")]
    UnknownEvent(String),
    /// Its payload could not be turned into JSON.
    #[error("the payload of {name} could not be serialised: {source}")]
    Payload {
        name: &'static str,
        source: serde_json::Error,
    },
}

/// A broadcast bus of manifest events.
#[derive(Debug)]
pub struct EventBus {
    registry: &'static Registry,
    sender: broadcast::Sender<Event>,
    seq: std::sync::atomic::AtomicU64,
    /// How many subscriptions never read `runtime.tool.result` ([`EventBus::subscribe_quiet`]).
    quiet: Arc<AtomicUsize>,
}

/// A subscription whose reader ignores `runtime.tool.result` events: the bus does not build
/// the tool result of every call for such subscribers alone. It reads like a
/// `broadcast::Receiver` (it derefs to one) and may still receive tool results when another
/// subscriber wants them.
#[derive(Debug)]
pub struct QuietSubscription {
    rx: broadcast::Receiver<Event>,
    quiet: Arc<AtomicUsize>,
}

impl std::ops::Deref for QuietSubscription {
    type Target = broadcast::Receiver<Event>;
    fn deref(&self) -> &Self::Target {
        &self.rx
    }
}

impl std::ops::DerefMut for QuietSubscription {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.rx
    }
}

impl Drop for QuietSubscription {
    fn drop(&mut self) {
        // Counted out before its receiver goes (the fields drop after this): meanwhile the bus
        // may build a tool result no one needs, never skip one someone needs.
        self.quiet.fetch_sub(1, Ordering::SeqCst);
    }
}

impl EventBus {
    /// A bus keeping up to `capacity` undelivered events per subscriber.
    pub fn new(registry: &'static Registry, capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.max(1));
        Self {
            registry,
            sender,
            seq: std::sync::atomic::AtomicU64::new(0),
            quiet: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Publishes an event to `audience`; its name must be a manifest event. Returns its
    /// sequence number.
    pub fn publish(
        &self,
        event: &endpoint::Event,
        audience: Audience,
    ) -> Result<u64, PublishError> {
        let name = event.name();
        let payload = event
            .payload()
            .map_err(|source| PublishError::Payload { name, source })?;
        self.publish_json(name, payload, audience)
    }

    /// Publishes `result` as a `runtime.tool.result` event, written to JSON straight from the
    /// borrowed result: the same payload as `publish(&endpoint::Event::ToolResult(result.clone()))`
    /// without the copy of the result that building the event would take (every call publishes
    /// one).
    pub fn publish_tool_result(
        &self,
        result: &openphone_protocol::ToolResult,
        audience: Audience,
    ) -> Result<u64, PublishError> {
        let name = TOOL_RESULT;
        let payload = serde_json::to_value(result)
            .map_err(|source| PublishError::Payload { name, source })?;
        self.publish_json(name, payload, audience)
    }

    /// Publishes a payload already in JSON under a name checked against the manifest.
    fn publish_json(
        &self,
        name: &str,
        payload: Value,
        audience: Audience,
    ) -> Result<u64, PublishError> {
        if self.registry.event(name).is_none() {
            return Err(PublishError::UnknownEvent(name.to_owned()));
        }
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        // No subscriber is not an error: events are notifications, the durable state is in the
        // store.
        let _ = self.sender.send(Event {
            seq,
            name: name.to_owned(),
            payload,
            audience,
        });
        Ok(seq)
    }

    /// Whether anyone subscribes now (a publisher may skip building an event no one receives).
    pub fn has_subscribers(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Whether a subscriber may read `runtime.tool.result` events now (every call publishes
    /// one; it is not built when every subscriber is quiet).
    pub fn wants_tool_results(&self) -> bool {
        // The receiver is counted before its quiet mark and after its quiet mark is gone (see
        // `subscribe_quiet` and `QuietSubscription::drop`): this errs towards building.
        self.sender.receiver_count() > self.quiet.load(Ordering::SeqCst)
    }

    /// A new subscription, receiving events published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender.subscribe()
    }

    /// A new subscription, receiving events published from now on, for a reader that ignores
    /// `runtime.tool.result` (see [`QuietSubscription`]).
    pub fn subscribe_quiet(&self) -> QuietSubscription {
        let rx = self.sender.subscribe();
        self.quiet.fetch_add(1, Ordering::SeqCst);
        QuietSubscription {
            rx,
            quiet: Arc::clone(&self.quiet),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openphone_protocol::ToolResult;
    use openphone_protocol::endpoint::{SessionStatus, SessionUpdated};
    use serde_json::json;

    fn audience_of(runtime: &str) -> Audience {
        Audience {
            runtime: Some(runtime.into()),
            operators: true,
        }
    }

    #[test]
    fn tool_results_are_wanted_while_a_subscriber_is_not_quiet() {
        let bus = EventBus::new(Registry::embedded().unwrap(), 16);
        assert!(!bus.wants_tool_results());
        let quiet = bus.subscribe_quiet();
        let second_quiet = bus.subscribe_quiet();
        assert!(bus.has_subscribers());
        assert!(!bus.wants_tool_results());
        let loud = bus.subscribe();
        assert!(bus.wants_tool_results());
        drop(loud);
        assert!(!bus.wants_tool_results());
        drop(quiet);
        let loud = bus.subscribe();
        assert!(bus.wants_tool_results());
        drop((loud, second_quiet));
        assert!(!bus.has_subscribers());
        assert!(!bus.wants_tool_results());
    }

    #[tokio::test]
    async fn a_quiet_subscription_still_reads_every_event() {
        let bus = EventBus::new(Registry::embedded().unwrap(), 16);
        let mut quiet = bus.subscribe_quiet();
        let result = ToolResult::ok("hermes", "r1", serde_json::Map::new());
        bus.publish_tool_result(&result, audience_of("hermes"))
            .unwrap();
        assert_eq!(quiet.recv().await.unwrap().name, "runtime.tool.result");
    }

    #[tokio::test]
    async fn delivers_manifest_events_in_order_and_refuses_unknown_names() {
        let bus = EventBus::new(Registry::embedded().unwrap(), 16);
        let mut rx = bus.subscribe();
        let audience = Audience {
            runtime: Some("hermes".into()),
            operators: true,
        };
        let result = ToolResult::ok("hermes", "r1", serde_json::Map::new());
        bus.publish(
            &endpoint::Event::ToolResult(result.clone()),
            audience.clone(),
        )
        .unwrap();
        let update = SessionUpdated {
            phone_session_id: "phone-sess-1".into(),
            runtime_session_id: "rs".into(),
            status: SessionStatus::Running,
            updated_at_ms: 7,
            reason: None,
        };
        bus.publish(&endpoint::Event::SessionUpdated(update), audience.clone())
            .unwrap();
        assert!(matches!(
            bus.publish_json("runtime.made.up", json!({}), audience),
            Err(PublishError::UnknownEvent(name)) if name == "runtime.made.up"
        ));
        bus.publish_tool_result(&result, audience_of("hermes"))
            .unwrap();
        let first = rx.recv().await.unwrap();
        let second = rx.recv().await.unwrap();
        let borrowed = rx.recv().await.unwrap();
        // Published from the borrowed result: the same name, payload and audience as the typed
        // event.
        assert_eq!(
            (
                borrowed.name.as_str(),
                &borrowed.payload,
                &borrowed.audience
            ),
            (
                endpoint::Event::ToolResult(result.clone()).name(),
                &first.payload,
                &first.audience
            )
        );
        assert_eq!((first.name.as_str(), first.seq), ("runtime.tool.result", 1));
        assert_eq!(first.payload, serde_json::to_value(&result).unwrap());
        assert_eq!(
            (second.name.as_str(), second.seq),
            ("runtime.session.updated", 2)
        );
        assert_eq!(
            second.payload,
            json!({
                "phone_session_id": "phone-sess-1",
                "runtime_session_id": "rs",
                "status": "running",
                "updated_at_ms": 7,
            })
        );
    }
}
