//! Issue 35: a fleet. Three `openphone serve` daemons (three hosts, each with its own data
//! directory and simulated phone) share one PostgreSQL database; 300 reviewed jobs fall due at
//! overlapping times; daemons are killed with SIGKILL during runs and during review
//! approvals and started again. Afterwards, from every daemon's audit chain: no send ran twice,
//! none ran unreviewed, an unknown outcome was never replayed, every completed job sent
//! exactly once, and every chain verifies with its anchor.
//!
//! Needs a PostgreSQL server: `OPENPHONE_TEST_PG_URL` (`bash tests/postgres/cluster.sh start`,
//! as `.ci/run` does); without it each test prints that it was skipped. Each test makes a
//! database of its own. Run with `--nocapture` to see the counts.

use std::collections::BTreeMap;
use std::time::Duration;

use openphone_clock::{Clock, Stopwatch, SystemClock};
use openphone_store::{AuditRecord, JobFilter, Store};
use openphone_store_pg::{PgConfig, PgStore};
use serde_json::{Value, json};

use super::fleet_support::{Host, fleet_database, host};
use super::harness::{Delays, Runtime, Serve, cli, kill, serve};

const HOSTS: [&str; 3] = ["fleet-a", "fleet-b", "fleet-c"];

/// `openphone jobs args… --json` on `host`: the exit code and the parsed output.
fn jobs(args: &[&str], host: &Host) -> (i32, Value) {
    let mut all: Vec<&str> = vec!["jobs"];
    all.extend(args);
    all.push("--json");
    let (code, out, err) = cli(&all, &host.data);
    let value = serde_json::from_str(&out).unwrap_or_else(|_| json!({"stderr": err}));
    (code, value)
}

/// Every job of the fleet, by id, as the shared store holds them (the operator's
/// `jobs list` on any host shows the same rows, 200 at most).
fn all_jobs(store: &Store) -> BTreeMap<i64, Value> {
    let filter = JobFilter {
        limit: Some(10_000),
        ..JobFilter::default()
    };
    store
        .list_jobs(&filter)
        .unwrap()
        .into_iter()
        .map(|j| {
            let mut job = serde_json::to_value(&j.job).unwrap();
            // The daemon whose phone the job's calls act on: the one that runs (ran) it.
            let runs_on = j
                .host
                .as_ref()
                .map(|h| h.lease_owner.clone().unwrap_or_else(|| h.host_id.clone()));
            job["runs_on"] = json!(runs_on);
            (j.job.id, job)
        })
        .collect()
}

/// The sends of each job in a chain's records: begun (the durable record written before the
/// call runs), finished ok, and begun without a background review as the proof's source.
#[derive(Debug, Default, Clone, Copy)]
struct Sends {
    begun: usize,
    ok: usize,
    unreviewed: usize,
}

fn count_sends(records: &[AuditRecord], into: &mut BTreeMap<i64, Sends>) {
    for record in records {
        let record = serde_json::to_value(record).unwrap();
        if record["kind"] != "tool_request"
            || record["tool"] != "openphone.messages.send"
            || record["decision"] != "allow"
        {
            continue;
        }
        let Some(id) = record["runtime_session_id"]
            .as_str()
            .and_then(|s| s.strip_prefix("background-job:"))
            .and_then(|s| s.parse::<i64>().ok())
        else {
            continue;
        };
        let sends = into.entry(id).or_default();
        if record["status"].is_null() {
            sends.begun += 1;
            if !record["policy_proof"]
                .to_string()
                .contains("background_review")
            {
                sends.unreviewed += 1;
            }
        } else if record["status"] == "ok" {
            sends.ok += 1;
        }
    }
}

/// Starts `host`'s daemon; a daemon just killed may still hold its host lock for a moment, so
/// a refused start is tried again.
fn start(host: &Host) -> Serve {
    for attempt in 0..5 {
        let started = std::panic::catch_unwind(|| serve(&host.data, &host.config));
        match started {
            Ok(daemon) => return daemon,
            Err(e) if attempt == 4 => std::panic::resume_unwind(e),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
    unreachable!()
}

#[test]
fn three_daemons_on_one_postgres_run_every_reviewed_job_once_through_twenty_kills() {
    const JOBS: usize = 300;
    const KILLS: u32 = 20;
    let Some(url) = fleet_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let hosts: Vec<Host> = HOSTS
        .iter()
        .map(|id| host(tmp.path(), id, &url, &format!("phone-{id}")))
        .collect();
    let mut daemons: Vec<Serve> = hosts.iter().map(start).collect();
    // The test's own view of the shared store (a host of the fleet that runs no scheduler).
    let auditor = PgStore::open(&PgConfig::new(url.as_str(), "fleet-auditor", tmp.path())).unwrap();
    let chains_of = |auditor: &PgStore| -> Vec<String> {
        auditor
            .audit_chains()
            .unwrap()
            .into_iter()
            .map(|c| c.chain)
            .collect()
    };
    let view: Store = PgStore::open(&PgConfig::new(
        url.as_str(),
        "fleet-viewer",
        tmp.path().join("viewer"),
    ))
    .unwrap()
    .into_store();
    let seed = u64::from(std::process::id()) ^ 0xf1ee7;
    let mut delays = Delays(seed);

    // 300 jobs, made on the three hosts in turn, due over ten seconds (overlapping).
    let now_ms = SystemClock.now_ms();
    for i in 0..JOBS {
        let body = format!("fleet-{i}");
        let payload = json!({"tool_call": {"tool": "messages_send", "arguments": {
            "to": "+49 151 2345 6789", "body": body, "reason": "fleet test"}}});
        let at = (now_ms + 2_000 + (i as i64 % 20) * 500).to_string();
        let (code, made) = jobs(
            &[
                "create",
                "--title",
                &body,
                "--type",
                "system_event",
                "--payload",
                &payload.to_string(),
                "--at",
                &at,
            ],
            &hosts[i % 3],
        );
        assert_eq!(code, 0, "{made}");
    }

    // Drive the fleet: wakes on random hosts, approvals of every review on random hosts, and
    // SIGKILLs during both, until every job is settled — a run cut off by a kill is retried
    // after its backoff (a minute or two) — or fifteen minutes pass.
    let mut kills = BTreeMap::<&str, u32>::new();
    let mut killed = 0;
    let mut refused_elsewhere = 0;
    let waited = Stopwatch::start();
    loop {
        let listed = all_jobs(&view);
        // Each review with the host whose phone its call runs on: only that daemon decides it.
        let reviews: Vec<(String, usize)> = listed
            .values()
            .filter(|j| j["status"] == "awaiting_review")
            .filter_map(|j| {
                let cid = j["pending_confirmation_id"].as_str()?.to_owned();
                let host = HOSTS.iter().position(|h| j["runs_on"] == *h)?;
                Some((cid, host))
            })
            .collect();
        let open = listed
            .values()
            .filter(|j| {
                !matches!(
                    j["status"].as_str(),
                    Some("completed" | "failed" | "stopped")
                )
            })
            .count();
        if (open == 0 && killed >= KILLS) || waited.elapsed() > Duration::from_secs(900) {
            break;
        }
        // Wake one host, killing it during the tick now and then.
        let h = delays.next(2) as usize;
        let waker = {
            let data = hosts[h].data.clone();
            std::thread::spawn(move || cli(&["jobs", "wake"], &data))
        };
        if killed < KILLS && delays.next(9) == 0 {
            std::thread::sleep(Duration::from_millis(delays.next(80)));
            kill(&mut daemons[h]);
            killed += 1;
            *kills.entry("during a tick").or_default() += 1;
            let _ = waker.join();
            daemons[h] = start(&hosts[h]);
        } else {
            let _ = waker.join();
        }
        // Approve the reviews, each on a random host, killing that host now and then between
        // the approval and the approved call.
        for (cid, a) in reviews.iter().take(12) {
            let a = *a;
            // Now and then first on another host, which refuses it naming the right one.
            if delays.next(9) == 0 {
                let other = (a + 1 + delays.next(1) as usize) % HOSTS.len();
                let (code, out, err) = cli(&["jobs", "approve", cid], &hosts[other].data);
                let said = format!("{out}{err}");
                assert_ne!(code, 0, "{said}");
                assert!(said.contains(HOSTS[a]), "{said}");
                refused_elsewhere += 1;
            }
            let approver = {
                let data = hosts[a].data.clone();
                let cid = cid.clone();
                std::thread::spawn(move || cli(&["jobs", "approve", &cid], &data))
            };
            if killed < KILLS && delays.next(14) == 0 {
                std::thread::sleep(Duration::from_millis(delays.next(40)));
                kill(&mut daemons[a]);
                killed += 1;
                *kills.entry("during an approval").or_default() += 1;
                let _ = approver.join();
                daemons[a] = start(&hosts[a]);
            } else {
                let _ = approver.join();
            }
        }
        if reviews.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // Any kills not yet made happen now, then every daemon starts again.
    while killed < KILLS {
        let h = delays.next(2) as usize;
        kill(&mut daemons[h]);
        daemons[h] = start(&hosts[h]);
        killed += 1;
        *kills.entry("at the end").or_default() += 1;
    }
    for host in &hosts {
        cli(&["jobs", "wake"], &host.data);
    }

    // What every chain says.
    let mut sends = BTreeMap::<i64, Sends>::new();
    let mut records_per_chain = BTreeMap::new();
    for chain in chains_of(&auditor) {
        let mut after = 0;
        let mut n = 0;
        loop {
            let page: Vec<AuditRecord> = auditor
                .export_audit_chain(&chain, after, 1_000)
                .unwrap()
                .into_iter()
                .map(|(_, record)| record)
                .collect();
            if page.is_empty() {
                break;
            }
            after = page.last().unwrap().seq;
            n += page.len();
            count_sends(&page, &mut sends);
        }
        records_per_chain.insert(chain, n);
    }
    let store: Store = auditor.into_store();
    let verify = store.verify_audit().unwrap();

    let listed = all_jobs(&view);
    assert_eq!(listed.len(), JOBS, "every job is in the shared store");
    let mut outcomes = BTreeMap::<String, u32>::new();
    let (mut doubles, mut unreviewed, mut sent) = (0, 0, 0);
    for (id, job) in &listed {
        let n = sends.get(id).copied().unwrap_or_default();
        sent += n.ok;
        let state = format!(
            "{}/{}",
            job["status"].as_str().unwrap_or("?"),
            job["phase"].as_str().unwrap_or("?")
        );
        *outcomes.entry(state.clone()).or_default() += 1;
        if n.begun > 1 || n.ok > 1 {
            doubles += 1;
        }
        unreviewed += n.unreviewed;
        match state.as_str() {
            // Every due run happened exactly once: the approved send ran once.
            "completed/completed" => assert_eq!((n.begun, n.ok), (1, 1), "job {id}: {job}"),
            // Killed between the approval and the outcome: at most once, never replayed.
            "failed/review_resolution_unknown" => assert!(n.begun <= 1, "job {id}: {job}"),
            other => panic!("job {id} did not settle ({other}): {job}"),
        }
        assert_ne!(job["status"], "running", "left running: {job}");
    }
    println!(
        "fleet test (seed {seed}): {JOBS} jobs on {} hosts, kills {kills:?}; outcomes \
         {outcomes:?}; sends run {sent}; run twice {doubles}, run unreviewed {unreviewed}; approvals refused \
         on the wrong host {refused_elsewhere}; \
         chains {records_per_chain:?}; verify intact {} ({} records)",
        HOSTS.len(),
        verify.is_intact(),
        verify.checked
    );
    assert_eq!(doubles, 0);
    assert_eq!(unreviewed, 0);
    assert!(verify.is_intact(), "{verify:?}");
    assert!(
        outcomes.get("completed/completed").copied().unwrap_or(0) > 0,
        "{outcomes:?}"
    );
    drop(store);
    drop(view);
    drop(daemons);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_a_phone_on_another_host_is_refused_naming_that_host() {
    // The postgres client blocks: never on a runtime worker.
    let Some(url) = tokio::task::spawn_blocking(fleet_database).await.unwrap() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let a = host(tmp.path(), "fleet-a", &url, "phone-a");
    let b = host(tmp.path(), "fleet-b", &url, "phone-b");
    let (a, b, da, db) = tokio::task::spawn_blocking(move || {
        let da = start(&a);
        let db = start(&b);
        (a, b, da, db)
    })
    .await
    .unwrap();
    let mut rt = Runtime::connect(&da.url).await;
    let invoke = |device: &str| {
        json!({"request_id": format!("fleet-{device}"), "tool": "openphone.device.status",
            "params": {"reason": "fleet test"}, "autonomy": "trusted_actions",
            "device_id": device})
    };
    // Its own phone answers; the other host's is refused with that host's name.
    let own = rt.call("tools.invoke", invoke("phone-a")).await;
    assert_eq!(own["result"]["status"], "ok", "{own}");
    let other = rt.call("tools.invoke", invoke("phone-b")).await;
    assert_eq!(other["result"]["status"], "error", "{other}");
    assert_eq!(
        other["result"]["error"]["code"], "device_not_found",
        "{other}"
    );
    let message = other["result"]["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("fleet-b"), "{other}");
    // A phone nobody serves is still the plain refusal listing this host's phones.
    let nobody = rt.call("tools.invoke", invoke("phone-z")).await;
    assert_eq!(
        nobody["result"]["error"]["code"], "invalid_params",
        "{nobody}"
    );
    drop((a, b, da, db));
}

#[test]
fn a_confirmation_is_decided_only_on_the_daemon_whose_phone_it_acts_on() {
    let Some(url) = fleet_database() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = host(tmp.path(), "fleet-a", &url, "phone-a");
    let b = host(tmp.path(), "fleet-b", &url, "phone-b");
    let _da = start(&a);
    let _db = start(&b);
    // A tap asked for on b: it waits in the fleet's inbox.
    let (code, out, err) = cli(
        &[
            "tools",
            "invoke",
            "openphone.ui.tap",
            r#"{"x":1,"y":1,"reason":"open the app"}"#,
            "--no-wait",
            "--timeout-secs",
            "120",
            "--json",
        ],
        &b.data,
    );
    assert_eq!(code, 3, "{out}{err}");
    let asked: Value = serde_json::from_str(&out).unwrap();
    let cid = asked["result"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // a sees it, but approving it there would tap a's phone: refused, naming b.
    let (code, out, err) = cli(&["inbox", "--json"], &a.data);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&cid), "{out}");
    let (code, out, err) = cli(&["inbox", "approve", &cid], &a.data);
    let said = format!("{out}{err}");
    assert_ne!(code, 0, "{said}");
    assert!(said.contains("fleet-b"), "{said}");
    // Still pending: b decides it.
    let (code, out, err) = cli(&["inbox", "approve", &cid], &b.data);
    assert_eq!(code, 0, "{out}{err}");
}
