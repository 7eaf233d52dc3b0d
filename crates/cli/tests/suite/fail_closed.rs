//! Fail closed through the real binary (issue 11, item 3): no answer without its audit record,
//! and `serve` refuses an unwritable or damaged database instead of starting over.
//!
//! Root ignores file modes, so a test run as root starts `serve` through `setpriv` with the
//! capabilities that override them (`dac_override`, `dac_read_search`, `fowner`) dropped.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::harness::{Runtime, serve, terminate, write_config};

/// A data directory with a database in it, written by a daemon that then stopped.
fn used_data_dir(tmp: &Path) -> (std::path::PathBuf, String) {
    let data = tmp.join("data");
    let config = write_config(tmp);
    let mut daemon = serve(&data, &config);
    terminate(&mut daemon.child);
    (data, config)
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::NamedTempFile::new().unwrap();
    probe.as_file().metadata().unwrap().uid() == 0
}

/// `openphone serve` on `data`, as a user whom file modes bind.
fn serve_command(data: &Path, config: &str) -> Command {
    let exe = env!("CARGO_BIN_EXE_openphone");
    let mut cmd = if running_as_root() {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--bounding-set=-dac_override,-dac_read_search,-fowner",
            "--",
            exe,
        ]);
        cmd
    } else {
        Command::new(exe)
    };
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--config", config])
        .arg("--data-dir")
        .arg(data);
    cmd
}

/// Runs `cmd` (a `serve`) and expects it to refuse: its exit code and stderr. A daemon that
/// starts instead (writes `endpoint.json`) fails the test.
fn refused(mut cmd: Command, data: &Path) -> (i32, String) {
    let _ = std::fs::remove_file(data.join("endpoint.json"));
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning serve (as root this needs setpriv from util-linux)");
    // Up to 30 s, 20 ms apart.
    for _ in 0..1500 {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            return (
                out.status.code().unwrap_or(-1),
                String::from_utf8(out.stderr).unwrap(),
            );
        }
        if data.join("endpoint.json").exists() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve started on a database it must refuse");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("serve neither started nor refused within 30 s");
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn serve_refuses_a_truncated_database() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, config) = used_data_dir(tmp.path());
    let db = data.join("openphone.db");
    std::fs::File::create(&db).unwrap(); // truncated to zero bytes
    let (code, err) = refused(serve_command(&data, &config), &data);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&db.display().to_string()), "{err}");
    assert!(err.contains("empty"), "{err}");
    assert!(err.contains("restore it from a backup"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "not replaced");
}

#[test]
fn serve_refuses_a_corrupt_database() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, config) = used_data_dir(tmp.path());
    let db = data.join("openphone.db");
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[..16].copy_from_slice(b"not a database!\0");
    std::fs::write(&db, &bytes).unwrap();
    let (code, err) = refused(serve_command(&data, &config), &data);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&db.display().to_string()) && err.contains("damaged"),
        "{err}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "not replaced");
}

#[test]
fn serve_refuses_an_unwritable_database() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, config) = used_data_dir(tmp.path());
    let db = data.join("openphone.db");
    chmod(&db, 0o444);
    let (code, err) = refused(serve_command(&data, &config), &data);
    chmod(&db, 0o600);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&db.display().to_string()) && err.contains("not writable"),
        "{err}"
    );
    assert!(err.contains("give this user write access"), "{err}");
}

#[test]
fn serve_refuses_a_read_only_data_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, config) = used_data_dir(tmp.path());
    chmod(&data, 0o555);
    let (code, err) = refused(serve_command(&data, &config), &data);
    chmod(&data, 0o700);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&data.display().to_string()) && err.contains("not writable"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_fail_with_audit_unavailable_when_the_store_cannot_be_written() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut daemon = serve(&data, &config);
    let mut rt = Runtime::connect(&daemon.url).await;
    let search = |id: &str| {
        json!({"request_id": id, "tool": "openphone.contacts.search",
               "params": {"query": "a"}, "reason": "find a contact"})
    };
    // Another process holds the database's write lock: every write of the daemon, its audit
    // records included, fails (after the 5 s busy timeout), as on a full or broken disk.
    let blocker = rusqlite::Connection::open(data.join("openphone.db")).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let refused = rt.call("tools.invoke", search("read-1")).await;
    blocker.execute_batch("ROLLBACK").unwrap();
    let result = &refused["result"];
    assert_eq!(result["status"], "error", "{refused}");
    assert_eq!(result["error"]["code"], "audit_unavailable", "{refused}");
    assert_eq!(
        result["result"],
        json!({}),
        "no private data without its record"
    );
    // Writable again: the read answers, and its audit record is there.
    let answered = rt.call("tools.invoke", search("read-2")).await;
    assert_eq!(answered["result"]["status"], "ok", "{answered}");
    let records: i64 = blocker
        .query_row(
            "SELECT COUNT(*) FROM audit_records WHERE request_id = 'read-2'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(records, 1);
    terminate(&mut daemon.child);
}
