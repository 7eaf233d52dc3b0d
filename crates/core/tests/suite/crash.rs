//! A daemon killed (SIGKILL) while holding a pending confirmation (issue 4 acceptance).
//!
//! The test re-runs its own test binary as the child: with `OPENPHONE_CRASH_CHILD_DIR` set,
//! the child opens the data directory, parks a mutating request and reports its
//! `needs_confirmation` answer, then waits to be killed. The parent kills it with SIGKILL, restarts the core on the same
//! directory, and checks what survived.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use openphone_core::{BridgeError, ConfirmDecision, Waited};
use openphone_device::SimPhone;
use openphone_protocol::{ToolResult, ToolStatus};
use openphone_store::ConfirmationState;

use super::support::*;

const CHILD_DIR: &str = "OPENPHONE_CRASH_CHILD_DIR";
const TIMEOUT_MS: i64 = 60_000;

/// Starts the child, returns the `needs_confirmation` answer it got after killing it.
fn park_in_a_child_and_kill_it(dir: &std::path::Path) -> ToolResult {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::crash::pending_confirmation_survives_sigkill",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut parked = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        // libtest prints "test <name> ... " on the same line before the child's output.
        if let Some((_, rest)) = line.split_once("PARKED ") {
            parked = Some(serde_json::from_str(rest.trim()).unwrap());
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL on unix
    child.wait().unwrap();
    parked.expect("the child reported a parked confirmation")
}

async fn child(dir: &std::path::Path) -> ! {
    let (phone, clock) = SimPhone::demo().unwrap();
    let phone = Arc::new(phone);
    let bridge = bridge_on(dir, &phone, &clock);
    let req = with(open_notes("crash-1"), |r| {
        r.timeout_ms = Some(TIMEOUT_MS);
        r.idempotency_key = Some("crash-key".into());
    });
    let parked = bridge
        .invoke(&hermes(), req, openphone_policy::Context::Interactive)
        .await;
    assert_eq!(parked.status, ToolStatus::NeedsConfirmation);
    println!("PARKED {}", serde_json::to_string(&parked).unwrap());
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

#[tokio::test]
async fn pending_confirmation_survives_sigkill() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        child(std::path::Path::new(&dir)).await;
    }
    // Within its timeout: still pending after the restart, resolvable, executes once.
    let h = Harness::new();
    let dir = h.dir.path().to_owned();
    drop(h.bridge);
    let id = confirmation_id(&park_in_a_child_and_kill_it(&dir));
    let (phone, clock) = SimPhone::demo().unwrap();
    let phone = Arc::new(phone);
    let bridge = bridge_on(&dir, &phone, &clock);
    let report = bridge.recover().await.unwrap();
    assert_eq!(report.still_pending, std::slice::from_ref(&id));
    let record = bridge.store().get_confirmation(&id).unwrap().unwrap();
    assert_eq!(record.state, ConfirmationState::Pending);
    assert!(record.final_result.is_none(), "nothing executed");
    // The killed process recorded no approval, execution or result for it.
    let trail = bridge.store().find_audit("runtime:hermes:crash-1").unwrap();
    let states: Vec<_> = trail.iter().map(|r| r.entry.confirmation).collect();
    assert_eq!(states, [Some(openphone_store::AuditConfirmation::Pending)]);
    let fin = bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await
        .unwrap();
    assert_eq!(fin.status, ToolStatus::Ok);
    assert_eq!(phone.action_log().len(), 1);
    // The runtime reconnects and retries with the same idempotency key: the final result.
    let retry = with(open_notes("crash-2"), |r| {
        r.timeout_ms = Some(TIMEOUT_MS);
        r.idempotency_key = Some("crash-key".into());
    });
    let replay = bridge
        .invoke(&hermes(), retry, openphone_policy::Context::Interactive)
        .await;
    assert_eq!((replay.status, replay.replayed), (ToolStatus::Ok, true));
    assert_eq!(phone.action_log().len(), 1);
}

#[tokio::test]
async fn expired_confirmation_times_out_after_sigkill_and_never_runs() {
    if std::env::var_os(CHILD_DIR).is_some() {
        return; // only the test named by the parent acts as the child
    }
    let dir = tempfile::tempdir().unwrap();
    let parked = park_in_a_child_and_kill_it(dir.path());
    let id = confirmation_id(&parked);
    let (phone, clock) = SimPhone::demo().unwrap();
    clock.advance(TIMEOUT_MS); // the daemon stayed down past the expiry
    let phone = Arc::new(phone);
    let bridge = bridge_on(dir.path(), &phone, &clock);
    let report = bridge.recover().await.unwrap();
    assert_eq!(report.timed_out, std::slice::from_ref(&id));
    let record = bridge.store().get_confirmation(&id).unwrap().unwrap();
    assert_eq!(record.state, ConfirmationState::Timeout);
    let late = bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await;
    assert!(matches!(
        late,
        Err(BridgeError::PendingConfirmationNotFound(_))
    ));
    assert_eq!(phone.action_log().len(), 0);
    let Waited::Final(fin) = bridge.wait_for_final(&parked, std::future::pending()).await else {
        panic!("the expired confirmation has a final result");
    };
    assert_eq!(fin.status, ToolStatus::Timeout);
    let trail = bridge.store().find_audit("runtime:hermes:crash-1").unwrap();
    let states: Vec<_> = trail.iter().map(|r| r.entry.confirmation).collect();
    assert_eq!(
        states,
        [
            Some(openphone_store::AuditConfirmation::Pending),
            Some(openphone_store::AuditConfirmation::Timeout)
        ],
        "never approved or executed"
    );
}
