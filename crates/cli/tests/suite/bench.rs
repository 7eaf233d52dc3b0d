//! `openphone bench` against any server (`--url`, `--token`/`--token-file`), both MCP eras,
//! the `--duration` mode, the in-process bridge, and refusals of bad input. Real daemons,
//! small counts; the figures themselves are never asserted on (that is the benchmarks' job).

use std::path::Path;

use serde_json::Value;

use super::harness::{TOKEN, serve, write_config};
use super::mcp_harness::daemon;
use super::support::run;

/// A config whose runtime `hermes` (token [`TOKEN`]) may read everything, with the rate
/// limiter out of the way.
fn bench_config(dir: &Path) -> String {
    let path = write_config(dir);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\n[limits]\nrate_per_sec = 100000.0\nrate_burst = 100000.0\n");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `openphone args…`; a successful run's stdout parsed as the JSON report.
fn report(args: &[&str]) -> Value {
    let (code, out, err) = run(args, "");
    assert_eq!(code, 0, "openphone {args:?}\nstdout: {out}\nstderr: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Every call of a count run was made and succeeded.
fn assert_all_ok(r: &Value, calls: u64) {
    assert_eq!(r["calls"], calls, "{r}");
    assert_eq!(r["ok"], calls, "{r}");
    assert_eq!(r["other"], 0, "{r}");
    assert_eq!(r["errors"], serde_json::json!({}), "{r}");
    for key in ["p50_ms", "p90_ms", "p99_ms", "max_ms"] {
        assert!(r[key].as_f64().unwrap() > 0.0, "{key} in {r}");
    }
    let ordered = ["p50_ms", "p90_ms", "p99_ms", "max_ms"].map(|k| r[k].as_f64().unwrap());
    assert!(ordered.windows(2).all(|w| w[0] <= w[1]), "{r}");
}

#[test]
fn bench_invoke_targets_a_url_with_a_runtime_token() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = bench_config(tmp.path());
    let daemon = serve(&data, &config);
    let base = [
        "bench",
        "invoke",
        "--url",
        &daemon.url,
        "--tool",
        "openphone.device.status",
        "--params",
        r#"{"reason": "bench test"}"#,
        "--connections",
        "2",
        "--json",
    ];

    let mut args = base.to_vec();
    args.extend(["--token", TOKEN, "--calls", "5"]);
    let r = report(&args);
    assert_all_ok(&r, 10);
    assert_eq!(r["mode"], "invoke");
    assert_eq!(r["target"], daemon.url.as_str());
    assert_eq!(r["connections"], 2);
    // No data directory named and no --pid: no process to measure.
    assert!(r.get("server_pid").is_none(), "{r}");

    // The token from a file, and the server's pid for its memory.
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let pid = daemon.child.id().to_string();
    let mut args = base.to_vec();
    args.extend([
        "--token-file",
        token_file.to_str().unwrap(),
        "--calls",
        "3",
        "--pid",
        &pid,
    ]);
    let r = report(&args);
    assert_all_ok(&r, 6);
    assert_eq!(r["server_pid"], daemon.child.id());
    if cfg!(target_os = "linux") {
        assert!(r["daemon_peak_rss_kib"].as_u64().unwrap() > 1000, "{r}");
    }

    // A time instead of a count: the window and the warm-up are what was asked.
    let mut args = base.to_vec();
    args.extend(["--token", TOKEN, "--duration", "0.5", "--warmup", "0.2"]);
    let r = report(&args);
    assert_eq!(
        (r["seconds"].as_f64(), r["warmup_seconds"].as_f64()),
        (Some(0.5), Some(0.2))
    );
    assert!(r["calls"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["calls"], r["ok"], "{r}");

    // A wrong token and no token are refused with a clear message (exit 2).
    let mut args = base.to_vec();
    args.extend(["--token", "not-the-token-0123456789", "--calls", "1"]);
    let (code, _, err) = run(&args, "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("401"), "{err}");
    let mut args = base.to_vec();
    args.extend(["--calls", "1"]);
    let (code, _, err) = run(&args, "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no token given"), "{err}");
}

#[test]
fn bench_mcp_speaks_both_eras_to_a_url() {
    let d = daemon("[limits]\nrate_per_sec = 100000.0\nrate_burst = 100000.0\n");
    for era in ["2025-11-25", "2026-07-28"] {
        let r = report(&[
            "bench",
            "mcp",
            "--url",
            &d.mcp_url,
            "--token",
            &d.token,
            "--era",
            era,
            "--tool",
            "openphone_device_status",
            "--args",
            r#"{"reason": "bench test"}"#,
            "--connections",
            "3",
            "--calls",
            "4",
            "--json",
        ]);
        assert_all_ok(&r, 12);
        assert_eq!(r["era"], era, "{r}");
        assert_eq!(r["mode"], "mcp");
    }

    // The handshake era in the duration mode, the token from a file.
    let token_file = d.data.join("mcp.token");
    let r = report(&[
        "bench",
        "mcp",
        "--url",
        &d.mcp_url,
        "--token-file",
        token_file.to_str().unwrap(),
        "--era",
        "2025-11-25",
        "--connections",
        "2",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--json",
    ]);
    assert!(r["calls"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["calls"], r["ok"], "{r}");
    assert_eq!(r["seconds"].as_f64(), Some(0.5));

    // Failures are counted by kind, and fail the run (exit 1): an unknown tool is a
    // JSON-RPC error in the handshake era.
    let (code, out, err) = run(
        &[
            "bench",
            "mcp",
            "--url",
            &d.mcp_url,
            "--token",
            &d.token,
            "--era",
            "2025-11-25",
            "--tool",
            "no_such_tool",
            "--connections",
            "1",
            "--calls",
            "2",
            "--json",
        ],
        "",
    );
    assert_eq!(code, 1, "{out}{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["ok"], 0, "{r}");
    assert_eq!(r["other"], 2, "{r}");
    let counted: u64 = r["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(counted, 2, "{r}");

    // Without the token the daemon's /mcp refuses initialize: a clear message, exit 2.
    let (code, _, err) = run(
        &[
            "bench",
            "mcp",
            "--url",
            &d.mcp_url,
            "--era",
            "2025-11-25",
            "--calls",
            "1",
        ],
        "",
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("HTTP 401") && err.contains("no token given"),
        "{err}"
    );
}

#[test]
fn bench_bridge_reads_and_mutates_in_process_and_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    for op in ["read", "mutation"] {
        let r = report(&[
            "bench",
            "bridge",
            "--op",
            op,
            "--concurrency",
            "4",
            "--calls",
            "3",
            "--threads",
            "2",
            "--dir",
            tmp.path().to_str().unwrap(),
            "--json",
        ]);
        assert_all_ok(&r, 12);
        assert_eq!(
            (r["mode"].as_str(), r["op"].as_str()),
            (Some("bridge"), Some(op))
        );
        assert_eq!(r["concurrency"], 4);
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(
        left.is_empty(),
        "the temporary data directories are removed: {left:?}"
    );

    let missing = tmp.path().join("missing");
    let (code, _, err) = run(
        &[
            "bench",
            "bridge",
            "--calls",
            "1",
            "--dir",
            missing.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("creating the data directory"), "{err}");
}

#[test]
fn bench_refuses_bad_input_with_a_clear_error() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["mcp", "--era", "2024-01-01"],
            "possible values: 2025-11-25, 2026-07-28",
        ),
        (
            &["invoke", "--duration", "0"],
            "must be more than 0 seconds",
        ),
        (&["mcp", "--duration", "0"], "must be more than 0 seconds"),
        (
            &["bridge", "--duration", "0"],
            "must be more than 0 seconds",
        ),
        (&["invoke", "--duration=-3"], "not a number of seconds"),
        (&["invoke", "--duration", "soon"], "not a number of seconds"),
        (
            &["invoke", "--duration", "1", "--calls", "5"],
            "cannot be used with",
        ),
        (&["invoke", "--warmup", "1"], "--duration"),
        (&["invoke", "--timeout", "0"], "must be more than 0 seconds"),
        (
            &["invoke", "--url", "http://127.0.0.1:9/mcp", "--token", "t"],
            "--url must be a ws:// URL",
        ),
        (
            &[
                "invoke",
                "--url",
                "wss://127.0.0.1:9/v1/runtime",
                "--token",
                "t",
            ],
            "no TLS",
        ),
        (
            &["mcp", "--url", "ws://127.0.0.1:9/v1/runtime"],
            "--url must be an http:// URL",
        ),
        (&["mcp", "--url", "https://127.0.0.1:9/mcp"], "no TLS"),
        (
            &["mcp", "--url", "127.0.0.1:9/mcp"],
            "--url must be an http:// URL",
        ),
        (
            &[
                "invoke",
                "--url",
                "ws://127.0.0.1:9/v1/runtime",
                "--token",
                " ",
            ],
            "--token is empty",
        ),
        (&["bridge", "--concurrency", "0"], "at least 1"),
        (&["bridge", "--calls", "0"], "at least 1"),
        (&["mcp", "--connections", "0"], "at least 1"),
        (
            &["bridge", "--threads", "0"],
            "--threads must be at least 1",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        let (code, out, err) = run(&all, "");
        assert_eq!(code, 2, "openphone {all:?}\n{out}{err}");
        assert!(err.contains(expected), "openphone {all:?}: {err}");
    }

    // A token file that is empty is refused before anything is sent.
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let (code, _, err) = run(
        &[
            "bench",
            "invoke",
            "--url",
            "ws://127.0.0.1:9/v1/runtime",
            "--token-file",
            empty.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is empty"), "{err}");
}
