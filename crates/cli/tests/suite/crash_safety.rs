//! Crash safety through the real binary (issue 11, item 1): `kill -9` between a direct
//! execution's side effect and the recording of its result, and the crash harness's short run.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::harness::{cli, serve, terminate, write_config};
use super::support::{openphone, run};

const KEY: &str = "crash-key-1";
const TEXT: &str = "the parcel code is 4711";

fn db(data: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(data.join("openphone.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn
}

fn saved(conn: &rusqlite::Connection) -> i64 {
    conn.query_row(
        "SELECT COUNT(*) FROM memories WHERE text = ?1",
        [TEXT],
        |r| r.get(0),
    )
    .unwrap()
}

/// The operator's own `tools invoke` of a memory save at `trusted_actions` (no confirmation).
fn save_memory(data: &Path) -> Child {
    openphone()
        .args(["tools", "invoke", "openphone.memory.save"])
        .arg(format!(r#"{{"text": "{TEXT}", "reason": "remember it"}}"#))
        .args([
            "--autonomy",
            "trusted_actions",
            "--idempotency-key",
            KEY,
            "--json",
        ])
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_mutation_killed_before_its_result_is_recorded_is_not_run_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = write_config(tmp.path());
    let mut first = serve(&data, &config);
    terminate(&mut first.child);
    // Make the recording of a final result take minutes (a trigger joining a 2,000-row table
    // with itself twice), so that the kill below lands after the memory is saved and before
    // its result is recorded: the window a crash hits at random.
    let conn = db(&data);
    conn.execute_batch(
        "CREATE TABLE stall (x INTEGER); \
         INSERT INTO stall (x) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n \
         WHERE i < 2000) SELECT i FROM n; \
         CREATE TRIGGER stall_final BEFORE INSERT ON final_results \
         BEGIN SELECT COUNT(*) FROM stall a, stall b, stall c; END;",
    )
    .unwrap();

    let mut daemon = serve(&data, &config);
    let mut invoke = save_memory(&data);
    // Up to 60 s, 20 ms apart: the side effect is committed.
    let mut seen = false;
    for _ in 0..3000 {
        if saved(&conn) == 1 {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(seen, "the memory was never saved");
    daemon.child.kill().unwrap(); // SIGKILL
    daemon.child.wait().unwrap();
    let _ = invoke.wait();
    conn.execute_batch("DROP TRIGGER stall_final; DROP TABLE stall;")
        .unwrap();

    // Restart; the keyed retry gets `execution_result_unknown`, not a second run.
    let mut again = serve(&data, &config);
    let retry = save_memory(&data).wait_with_output().unwrap();
    let result: Value = serde_json::from_slice(&retry.stdout).unwrap();
    assert_eq!(result["status"], "error", "{result}");
    assert_eq!(
        result["error"]["code"], "execution_result_unknown",
        "{result}"
    );
    assert_eq!(result["replayed"], true, "{result}");
    assert_eq!(saved(&conn), 1, "run exactly once");
    // The first run was audited before it ran (an attempt with no outcome yet), then settled.
    let mut stmt = conn
        .prepare(
            "SELECT json_extract(s.shape, '$.status'), json_extract(s.shape, '$.error_code') \
             FROM audit_records r JOIN audit_shapes s ON s.id = r.shape \
             WHERE r.idempotency_key = ?1 ORDER BY r.seq",
        )
        .unwrap();
    let trail: Vec<(Option<String>, Option<String>)> = stmt
        .query_map([KEY], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let unknown = (
        Some("error".to_owned()),
        Some("execution_result_unknown".to_owned()),
    );
    assert_eq!(trail, [(None, None), unknown.clone(), unknown]);
    terminate(&mut again.child);
    let (code, out, err) = cli(&["audit", "verify"], &data);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn the_crash_harness_holds_its_invariants_over_a_few_kill_cycles() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("crash");
    let (code, out, err) = run(
        &[
            "dev",
            "crash-test",
            "--cycles",
            "4",
            "--concurrency",
            "4",
            "--json",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["invariants_hold"], true, "{report}");
    let findings = &report["findings"];
    for invariant in [
        "lost_acknowledged_results",
        "double_executions",
        "unapproved_executions",
        "unaudited_executions",
        "unsettled_records",
        "lost_read_records",
    ] {
        assert_eq!(findings[invariant], 0, "{invariant}: {report}");
    }
    assert_eq!(findings["audit_chain_intact"], true, "{report}");
    assert!(report["calls"].as_u64().unwrap() > 0, "{report}");
    // Safe reads were answered before their fsync (issue 34) and checked after the kills.
    assert!(findings["reads_answered"].as_u64().unwrap() > 0, "{report}");
}
