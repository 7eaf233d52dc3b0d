//! The data-directory lock: in-process and cross-process.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use openphone_store::{
    ConfirmationState, Holder, MAX_PENDING_PER_RUNTIME, PendingInsert, Store, StoreError,
};

use super::support::{T0, data_dir, identity, new_confirmation, temp};

const CHILD_DIR_ENV: &str = "OPENPHONE_STORE_TEST_CHILD_DIR";

#[test]
fn second_open_in_process_is_locked_and_names_the_holder() {
    let dir = temp();
    let holder = Holder::new(T0, Some("inst-1".to_owned()));
    let first = Store::open_as(data_dir(&dir), &holder).unwrap();
    let err = Store::open(data_dir(&dir)).unwrap_err();
    match &err {
        StoreError::Locked { holder: text, path } => {
            assert_eq!(text, &holder.describe());
            assert!(text.contains(&format!("pid {}", std::process::id())));
            assert_eq!(path, &data_dir(&dir).join("openphone.lock"));
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("locked by another OpenPhone process"),
        "{message}"
    );
    assert!(message.contains("instance inst-1"), "{message}");
    assert_eq!(
        first.lock_path(),
        Some(data_dir(&dir).join("openphone.lock").as_path())
    );
    drop(first);
    // Released on drop.
    Store::open(data_dir(&dir)).unwrap();
}

#[cfg(unix)]
#[test]
fn open_creates_the_data_directory_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp();
    let store = Store::open(dir.path().join("a/b/data")).unwrap();
    let mode = std::fs::metadata(store.data_dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(store.db_path().unwrap().exists());
    assert!(!store.is_read_only());
}

#[test]
fn read_only_open_works_beside_the_lock_holder() {
    let dir = temp();
    let store = Store::open(data_dir(&dir)).unwrap();
    store.set_setting("k", &serde_json::json!(1), T0).unwrap();
    let reader = Store::open_read_only(data_dir(&dir)).unwrap();
    assert!(reader.is_read_only());
    assert_eq!(reader.lock_path(), None);
    assert_eq!(reader.get_setting("k").unwrap(), Some(serde_json::json!(1)));
    // Writes are refused: a read-only store has no writer.
    let err = reader
        .set_setting("k", &serde_json::json!(2), T0)
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Commit { detail, .. } if detail.contains("read-only")),
        "{err:?}"
    );
    // Missing database.
    let missing = Store::open_read_only(dir.path().join("nothing")).unwrap_err();
    assert!(
        matches!(
            missing,
            StoreError::NotFound {
                table: "database",
                ..
            }
        ),
        "{missing:?}"
    );
}

/// Re-entry point for the cross-process tests: when the parent sets the environment variable,
/// this test body becomes the child. It opens the store, parks one confirmation, reports
/// `READY`, and then blocks on stdin until it is killed. Without the variable it does nothing.
#[test]
fn child_process_holds_lock() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let store = Store::open(&dir).unwrap();
    let id = identity("openphone.url.open", "{\"url\":\"x\"}", "key-crash");
    let insert = store
        .insert_pending(
            &new_confirmation("runtime-confirm-crash", &id, T0, 30_000),
            MAX_PENDING_PER_RUNTIME,
        )
        .unwrap();
    assert!(matches!(insert, PendingInsert::Created(_)));
    println!("READY");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

#[test]
fn another_process_is_locked_out_and_a_killed_holder_releases_the_lock() {
    let dir = temp();
    let data = data_dir(&dir);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::lock::child_process_holds_lock",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_ENV, &data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // Wait for READY on a reader thread, with a deadline, so a broken child cannot hang us.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest may print "test <name> ... " on the same line before the output.
            if line.contains("READY") {
                let _ = tx.send(());
                break;
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(60)).is_ok();
    if !ready {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(ready, "child never reported READY");

    let err = Store::open(&data).unwrap_err();
    match err {
        StoreError::Locked { holder, .. } => {
            assert!(
                holder.starts_with(&format!("pid {} since ", child.id())),
                "{holder}"
            );
        }
        other => panic!("expected Locked, got {other:?}"),
    }

    // SIGKILL: no destructor runs; the kernel drops the lock and the committed row survives.
    child.kill().unwrap();
    child.wait().unwrap();
    let store = Store::open(&data).unwrap();
    let record = store
        .get_confirmation("runtime-confirm-crash")
        .unwrap()
        .unwrap();
    assert_eq!(record.state, ConfirmationState::Pending);
    let recovery = store.recover_after_restart(T0 + 10_000).unwrap();
    assert_eq!(recovery.still_pending.len(), 1);
    assert!(recovery.timed_out.is_empty() && recovery.result_unknown.is_empty());
}
