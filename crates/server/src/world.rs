//! The phone's own world in the daemon: every [`DeviceEvent`] forwarded to the event bus as
//! its manifest event (`phone.message.received`, `phone.call.received`,
//! `phone.notification.posted`, `phone.notification.action`; to operators only — they carry
//! what arrived on the phone), and the live watchers (`openphone-watchers`). The simulated
//! phone's scenario timeline is the daemon's construction's (it alone holds the device).

use std::sync::Arc;

use openphone_core::events::Audience;
use openphone_core::{RuntimeManager, ToolBridge};
use openphone_device::DeviceEvent;
use openphone_jobs::Scheduler;
use openphone_protocol::Registry;
use openphone_protocol::endpoint::{
    Event, PhoneCallReceived, PhoneMessageReceived, PhoneNotificationAction,
    PhoneNotificationPosted,
};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::shutdown::stopped;

/// A device event as the manifest event operators receive.
pub fn phone_event(event: &DeviceEvent, device: Option<&str>) -> Event {
    let device_id = device.map(str::to_owned);
    match event.clone() {
        DeviceEvent::MessageReceived {
            thread_id,
            address,
            name,
            text,
            at_ms,
        } => Event::PhoneMessageReceived(PhoneMessageReceived {
            thread_id,
            address,
            name,
            text,
            at_ms,
            device_id,
        }),
        DeviceEvent::CallReceived {
            number,
            name,
            direction,
            outcome,
            at_ms,
        } => Event::PhoneCallReceived(PhoneCallReceived {
            number,
            name,
            direction,
            outcome,
            at_ms,
            device_id,
        }),
        DeviceEvent::NotificationPosted {
            key,
            app,
            package,
            title,
            text,
            at_ms,
        } => Event::PhoneNotificationPosted(PhoneNotificationPosted {
            key,
            app,
            package,
            title,
            text,
            at_ms,
            device_id,
        }),
        DeviceEvent::NotificationAction { key, action, at_ms } => {
            Event::PhoneNotificationAction(PhoneNotificationAction {
                key,
                action,
                at_ms,
                device_id,
            })
        }
    }
}

/// The world's tasks (stopped with the daemon's shutdown signal).
#[derive(Debug)]
pub struct World {
    tasks: Vec<JoinHandle<()>>,
}

impl World {
    /// Waits for the tasks to end (after the shutdown signal), so nothing holds the store.
    pub async fn stopped(self) {
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// What [`start`] needs.
pub struct WorldSetup {
    pub bridge: Arc<ToolBridge>,
    /// The store, handed to the watchers for their own tables.
    pub store: Arc<openphone_store::Store>,
    pub manager: Arc<RuntimeManager>,
    pub registry: &'static Registry,
    /// The job scheduler, for watcher reactions that create jobs (its `system_event` runner
    /// should come from `openphone_watchers::runners`).
    pub scheduler: Option<Scheduler>,
    /// The model that judges `semantic_match` watchers (when a model is configured).
    pub judge: Option<Arc<dyn openphone_watchers::Judge>>,
    pub shutdown: watch::Receiver<bool>,
}

/// Installs the live watchers on the bridge and spawns the world's tasks: the forwarding of
/// device events to the bus and the watcher engine.
pub fn start(setup: WorldSetup) -> World {
    let WorldSetup {
        bridge,
        store,
        manager,
        registry,
        scheduler,
        judge,
        shutdown,
    } = setup;
    let mut tasks = Vec::new();
    // Every phone's events, each named by its phone among several.
    for (device, mut rx) in bridge.every_device_events() {
        let bus = Arc::clone(bridge.events());
        let mut stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = stopped(&mut stop) => break,
                    event = rx.recv() => event,
                };
                match event {
                    Ok(event) => {
                        let audience = Audience {
                            runtime: None,
                            operators: true,
                        };
                        let event = phone_event(&event, device.as_deref());
                        if let Err(e) = bus.publish(&event, audience) {
                            tracing::error!(error = %e, "publishing a device event");
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, device = ?device,
                            "device events were lost (too many at once)");
                    }
                    Err(RecvError::Closed) => break,
                }
            }
        }));
    }
    let watchers = openphone_watchers::install(openphone_watchers::WatchersSetup {
        bridge,
        store,
        manager,
        registry,
        scheduler,
        judge,
    });
    let mut stop = shutdown;
    tasks.push(tokio::spawn(async move {
        watchers.run(async move { stopped(&mut stop).await }).await;
    }));
    World { tasks }
}
