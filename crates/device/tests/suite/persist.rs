//! The simulated phone saving itself (`SimPhone::persist_to`): a state change answers only
//! once a save holds it; saves are shared; a failing sink does not fail the command.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_device::sim::StateSink;
use openphone_device::{Injection, PhoneDevice, SimState};
use serde_json::json;

use super::support::{phone, run};

/// Keeps every state it is handed; fails while `broken`.
#[derive(Debug, Default)]
struct Memory {
    saved: Mutex<Vec<SimState>>,
    broken: Mutex<bool>,
}

#[async_trait]
impl StateSink for Memory {
    async fn save(&self, state: SimState) -> Result<(), String> {
        if *self.broken.lock().unwrap() {
            return Err("the disk is full".into());
        }
        // A write takes a while: others change the phone meanwhile.
        tokio::task::yield_now().await;
        self.saved.lock().unwrap().push(state);
        Ok(())
    }
}

impl Memory {
    fn count(&self) -> usize {
        self.saved.lock().unwrap().len()
    }
    fn last(&self) -> SimState {
        self.saved.lock().unwrap().last().cloned().unwrap()
    }
}

#[test]
fn a_change_is_saved_before_it_answers_and_reads_save_nothing() {
    let (phone, _clock) = phone();
    let sink = Arc::new(Memory::default());
    assert!(phone.persist_to(sink.clone()));
    assert!(!phone.persist_to(Arc::new(Memory::default())), "one sink");
    assert!(!phone.is_saved(), "the state as attached is not saved yet");

    run(&phone, "openphone.clipboard.set", json!({"text": "kept"}));
    assert_eq!(sink.count(), 1);
    assert_eq!(sink.last().clipboard.as_deref(), Some("kept"));
    assert!(phone.is_saved());
    // A read changes nothing and writes nothing.
    run(&phone, "openphone.screen.get", json!({}));
    assert_eq!(sink.count(), 1);

    // An injection too answers once saved.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(phone.inject(&Injection::Message {
        address: "+1 555 0100".into(),
        text: "saved with its answer".into(),
    }))
    .unwrap();
    assert_eq!(sink.count(), 2);
    assert!(
        sink.last()
            .threads
            .iter()
            .flat_map(|t| &t.messages)
            .any(|m| m.body == "saved with its answer")
    );
}

#[test]
fn a_failing_save_never_fails_the_command_and_the_next_flush_writes_it() {
    let (phone, _clock) = phone();
    let sink = Arc::new(Memory::default());
    phone.persist_to(sink.clone());
    *sink.broken.lock().unwrap() = true;
    run(
        &phone,
        "openphone.clipboard.set",
        json!({"text": "not yet on disk"}),
    );
    assert_eq!(sink.count(), 0);
    assert!(!phone.is_saved());
    *sink.broken.lock().unwrap() = false;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(phone.flush()).unwrap();
    assert!(phone.is_saved());
    assert_eq!(sink.last().clipboard.as_deref(), Some("not yet on disk"));
    // Nothing left to write: a second flush writes nothing.
    rt.block_on(phone.flush()).unwrap();
    assert_eq!(sink.count(), 1);
}

#[test]
fn concurrent_changes_share_saves_and_the_last_save_holds_them_all() {
    let (phone, _clock) = phone();
    let phone = Arc::new(phone);
    let sink = Arc::new(Memory::default());
    phone.persist_to(sink.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..20 {
            let phone = phone.clone();
            tasks.push(tokio::spawn(async move {
                phone
                    .inject(&Injection::Message {
                        address: "+1 555 0100".into(),
                        text: format!("burst {i}"),
                    })
                    .await
                    .unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert!(phone.is_saved());
    // Changes made while a save was in flight share the next one.
    assert!(sink.count() < 20, "{} saves", sink.count());
    let last = sink.last();
    let bodies: Vec<&str> = last
        .threads
        .iter()
        .flat_map(|t| &t.messages)
        .map(|m| m.body.as_str())
        .collect();
    for i in 0..20 {
        assert!(bodies.contains(&format!("burst {i}").as_str()), "burst {i}");
    }
}
