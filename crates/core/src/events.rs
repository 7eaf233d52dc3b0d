//! The event bus: manifest events fanned out to transports.
//!
//! Every event has a manifest name, a payload and an audience (the runtime it concerns, and
//! whether operators see it). Transports subscribe and filter by audience; the bus never blocks
//! a publisher (a subscriber that falls behind loses the oldest events and is told how many).

use openphone_protocol::Registry;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

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

/// Publishing an event whose name is not in the events manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an event of the events manifest")]
pub struct UnknownEvent(pub String);

/// A broadcast bus of manifest events.
#[derive(Debug)]
pub struct EventBus {
    registry: &'static Registry,
    sender: broadcast::Sender<Event>,
    seq: std::sync::atomic::AtomicU64,
}

impl EventBus {
    /// A bus keeping up to `capacity` undelivered events per subscriber.
    pub fn new(registry: &'static Registry, capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.max(1));
        Self {
            registry,
            sender,
            seq: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Publishes an event; the name must be a manifest event. Returns its sequence number.
    pub fn publish(
        &self,
        name: &str,
        payload: Value,
        audience: Audience,
    ) -> Result<u64, UnknownEvent> {
        if self.registry.event(name).is_none() {
            return Err(UnknownEvent(name.to_owned()));
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

    /// A new subscription, receiving events published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn delivers_manifest_events_in_order_and_refuses_unknown_names() {
        let bus = EventBus::new(Registry::embedded().unwrap(), 16);
        let mut rx = bus.subscribe();
        let audience = Audience {
            runtime: Some("hermes".into()),
            operators: true,
        };
        bus.publish("runtime.tool.result", json!({"a": 1}), audience.clone())
            .unwrap();
        bus.publish("runtime.session.updated", json!({"b": 2}), audience.clone())
            .unwrap();
        assert_eq!(
            bus.publish("runtime.made.up", json!({}), audience),
            Err(UnknownEvent("runtime.made.up".into()))
        );
        let first = rx.recv().await.unwrap();
        let second = rx.recv().await.unwrap();
        assert_eq!((first.name.as_str(), first.seq), ("runtime.tool.result", 1));
        assert_eq!(
            (second.name.as_str(), second.seq),
            ("runtime.session.updated", 2)
        );
    }
}
