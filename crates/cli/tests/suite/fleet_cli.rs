//! Issue 35: the operator's side of a fleet. Two `openphone serve` daemons on one PostgreSQL
//! database; the offline commands read the shared store as a viewer: `audit verify` checks
//! both chains (and names the one broken by SQL), `audit head` prints both heads, `audit
//! export` selects a host or a phone, `openphone fleet` lists the daemons live with their
//! phones (a killed one not live), `openphone status` names the shared store. On SQLite,
//! `openphone fleet` says the store is not shared.
//!
//! The PostgreSQL tests need `OPENPHONE_TEST_PG_URL` (`bash tests/postgres/cluster.sh start`);
//! without it they print that they were skipped.

use std::time::Duration;

use openphone_store_pg::{PgConfig, testing};
use serde_json::{Value, json};

use super::fleet_support::{Host, fleet_database, host};
use super::harness::{Runtime, Serve, cli, kill, serve};

/// `openphone args… --data-dir <host>`: exit code, stdout, stderr.
fn on(host: &Host, args: &[&str]) -> (i32, String, String) {
    cli(args, &host.data)
}

fn json_of(out: &str, err: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

/// The exported records (JSON lines).
fn lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Both hosts up, each having audited a request naming its own phone.
async fn two_hosts(url: &str, tmp: &std::path::Path) -> (Host, Host, Serve, Serve) {
    let a = host(tmp, "fleet-a", url, "phone-a");
    let b = host(tmp, "fleet-b", url, "phone-b");
    let (a, b, da, db) = tokio::task::spawn_blocking(move || {
        let da = serve(&a.data, &a.config);
        let db = serve(&b.data, &b.config);
        (a, b, da, db)
    })
    .await
    .unwrap();
    for (daemon, phone) in [(&da, "phone-a"), (&db, "phone-b")] {
        let mut rt = Runtime::connect(&daemon.url).await;
        let answer = rt
            .call(
                "tools.invoke",
                json!({"request_id": format!("look-{phone}"), "tool": "openphone.device.status",
                    "params": {"reason": "fleet cli test"}, "autonomy": "trusted_actions",
                    "device_id": phone}),
            )
            .await;
        assert_eq!(answer["result"]["status"], "ok", "{answer}");
    }
    (a, b, da, db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_checks_every_chain_of_the_fleet_and_names_the_broken_one() {
    let Some(url) = tokio::task::spawn_blocking(fleet_database).await.unwrap() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, da, db) = two_hosts(&url, tmp.path()).await;
    let checked = tokio::task::spawn_blocking(move || {
        // Both daemons live: the viewer needs no lock. No --config: the data directory's
        // daemon (endpoint.json) names the shared store.
        let (code, out, err) = on(&a, &["audit", "verify", "--json"]);
        assert_eq!(code, 0, "{out}{err}");
        let report = json_of(&out, &err);
        assert_eq!(report["intact"], true, "{report}");
        let hosts: Vec<&str> = report["chains"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["host"].as_str().unwrap())
            .collect();
        assert_eq!(hosts, ["fleet-a", "fleet-b"], "{report}");
        for chain in report["chains"].as_array().unwrap() {
            assert!(chain["checked"].as_u64().unwrap() > 0, "{report}");
            assert_eq!(chain["stored_anchor"]["outcome"], "holds", "{report}");
        }
        // The same with --config, in words.
        let (code, out, err) = on(&b, &["audit", "verify", "--config", &b.config]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("chain fleet-a: intact"), "{out}");
        assert!(out.contains("chain fleet-b: intact"), "{out}");
        assert!(out.contains("audit intact: 2 chains"), "{out}");

        // Every chain's head.
        let (code, out, err) = on(&a, &["audit", "head", "--json"]);
        assert_eq!(code, 0, "{err}");
        let heads = json_of(&out, &err);
        let heads = heads["chains"].as_array().unwrap();
        assert_eq!(heads.len(), 2, "{out}");
        for head in heads {
            assert_eq!(head["anchor"], head["stored_anchor"], "{out}");
        }
        let own_head = heads[0]["anchor"].as_str().unwrap().to_owned();
        let (code, out, _) = on(&a, &["audit", "verify", "--anchor", &own_head]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("chain fleet-a: anchor"), "{out}");

        // Export: every chain, one host's, one phone's.
        let (code, out, err) = on(&a, &["audit", "export"]);
        assert_eq!(code, 0, "{err}");
        let all = lines(&out);
        for h in ["fleet-a", "fleet-b"] {
            assert!(
                all.iter().any(|r| r["host"] == h),
                "no record of {h}: {out}"
            );
        }
        let (code, out, err) = on(&a, &["audit", "export", "--host", "fleet-b"]);
        assert_eq!(code, 0, "{err}");
        let only_b = lines(&out);
        assert!(!only_b.is_empty());
        assert!(only_b.iter().all(|r| r["host"] == "fleet-b"), "{out}");
        assert_eq!(
            only_b.len(),
            all.iter().filter(|r| r["host"] == "fleet-b").count()
        );
        let (code, out, err) = on(&a, &["audit", "export", "--device", "phone-b"]);
        assert_eq!(code, 0, "{err}");
        let phone_b = lines(&out);
        assert!(!phone_b.is_empty(), "{out}");
        assert!(phone_b.iter().all(|r| r["device_id"] == "phone-b"), "{out}");
        let (code, _, err) = on(&a, &["audit", "export", "--host", "fleet-z"]);
        assert_eq!(code, 2, "an error: {err}");
        assert!(
            err.contains("fleet-z") && err.contains("fleet-a, fleet-b"),
            "{err}"
        );

        // The shared database's sizes, read beside both daemons.
        let (code, out, err) = on(&b, &["store", "stats", "--json"]);
        assert_eq!(code, 0, "{err}");
        let stats = json_of(&out, &err);
        assert!(
            stats["db_path"]
                .as_str()
                .unwrap()
                .starts_with("postgres://"),
            "{stats}"
        );
        assert!(stats["audit"]["records"].as_u64().unwrap() >= 2, "{stats}");

        // A record of chain B removed by SQL: exit 1, chain B named, chain A intact.
        let admin = PgConfig::new(url.as_str(), "fleet-admin", std::env::temp_dir());
        let mut client = testing::connect(&admin).unwrap();
        let removed = client
            .execute(
                "DELETE FROM audit_records WHERE chain = 'fleet-b' AND seq = 1",
                &[],
            )
            .unwrap();
        assert_eq!(removed, 1);
        let (code, out, err) = on(&a, &["audit", "verify", "--json"]);
        assert_eq!(code, 1, "{out}{err}");
        let report = json_of(&out, &err);
        assert_eq!(report["intact"], false);
        assert_eq!(report["broken_hosts"], json!(["fleet-b"]), "{report}");
        assert_eq!(report["chains"][0]["intact"], true, "{report}");
        let (code, out, _) = on(&a, &["audit", "verify"]);
        assert_eq!(code, 1);
        assert!(out.contains("chain fleet-b: broken at"), "{out}");
        assert!(out.contains("BROKEN in the chain of host fleet-b"), "{out}");
        (a, b)
    })
    .await
    .unwrap();
    drop((checked, da, db));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_lists_both_hosts_live_with_their_phones_and_a_killed_one_not_live() {
    let Some(url) = tokio::task::spawn_blocking(fleet_database).await.unwrap() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, da, mut db) = two_hosts(&url, tmp.path()).await;
    let done = tokio::task::spawn_blocking(move || {
        let (code, out, err) = on(&a, &["fleet", "--json"]);
        assert_eq!(code, 0, "{err}");
        let fleet = json_of(&out, &err);
        assert_eq!(fleet["shared"], true, "{fleet}");
        assert_eq!(fleet["host_id"], "fleet-a", "{fleet}");
        assert_eq!(fleet["hosts_live"], 2, "{fleet}");
        let hosts = fleet["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 2, "{fleet}");
        for (h, (id, phone)) in hosts
            .iter()
            .zip([("fleet-a", "phone-a"), ("fleet-b", "phone-b")])
        {
            assert_eq!(h["host_id"], id, "{fleet}");
            assert_eq!(h["live"], true, "{fleet}");
            assert_eq!(h["device_ids"], json!([phone]), "{fleet}");
        }
        assert!(
            !out.contains("postgres://openphone@"),
            "no user in the URL: {out}"
        );
        let (code, out, err) = on(&a, &["status", "--json"]);
        assert_eq!(code, 0, "{err}");
        let status = json_of(&out, &err);
        assert_eq!(status["store"]["kind"], "postgres", "{status}");
        assert_eq!(status["store"]["host_id"], "fleet-a", "{status}");
        assert_eq!(status["store"]["hosts_live"], 2, "{status}");
        let (code, out, _) = on(&a, &["status"]);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("store: PostgreSQL postgres://")
                && out.contains("as host fleet-a (2 hosts live)"),
            "{out}"
        );

        // B dies without a word: its session ends, its host lock with it.
        kill(&mut db);
        let mut fleet = Value::Null;
        for _ in 0..100 {
            let (code, out, err) = on(&a, &["fleet", "--json"]);
            assert_eq!(code, 0, "{err}");
            fleet = json_of(&out, &err);
            if fleet["hosts_live"] == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(fleet["hosts"][0]["live"], true, "{fleet}");
        assert_eq!(fleet["hosts"][1]["live"], false, "{fleet}");
        assert_eq!(
            fleet["hosts"][1]["device_ids"],
            json!(["phone-b"]),
            "{fleet}"
        );
        let (code, out, _) = on(&a, &["fleet"]);
        assert_eq!(code, 0);
        assert!(out.contains("fleet-b  down  last seen"), "{out}");
        assert!(out.contains("(1 of 2 hosts live)"), "{out}");
        (a, b, db)
    })
    .await
    .unwrap();
    drop((done, da));
}

#[test]
fn fleet_on_sqlite_says_the_store_is_not_shared_and_how_to_share_it() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("none.toml");
    std::fs::write(&config, "").unwrap();
    let config = config.to_str().unwrap();
    let (code, out, err) = cli(&["fleet", "--config", config], tmp.path());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("not shared"), "{out}");
    assert!(
        out.contains("docs/fleet.md") && out.contains("[store] url"),
        "{out}"
    );
    let (code, out, err) = cli(&["fleet", "--json", "--config", config], tmp.path());
    assert_eq!(code, 0, "{err}");
    let fleet = json_of(&out, &err);
    assert_eq!(fleet["shared"], false);
    assert_eq!(fleet["store"], "sqlite");
    assert_eq!(fleet["hosts"], json!([]));
    // `--host` selects a chain of a shared store only.
    drop(openphone_store::Store::open(tmp.path()).unwrap());
    let (code, _, err) = cli(
        &["audit", "export", "--host", "fleet-a", "--config", config],
        tmp.path(),
    );
    assert_eq!(code, 2, "an error: {err}");
    assert!(err.contains("--host") && err.contains("SQLite"), "{err}");
}
