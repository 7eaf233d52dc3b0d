//! Audit appends per second for the record a typical read writes (a keyless
//! `openphone.device.status`: UUID request id, the seven-verdict policy proof, three digests).
//!
//! - `group-committed`: 512 appends in flight at once through `append_audit_async`, as the
//!   bridge's concurrent calls do; the writer commits them in batches, one fsync each. This is
//!   the figure that bounds the bridge's reads per second.
//! - `one at a time`: `append_audit`, each waiting for its own commit (fsync latency).
//!
//! Criterion measures the mean; a timed loop afterwards prints appends/s for each.
//!
//! Run: `cargo bench -p openphone-store --bench audit_append`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use openphone_clock::Stopwatch;
use openphone_protocol::digest::sha256_hex;
use openphone_protocol::endpoint::{
    AuditCaller, AuditConfirmation, AuditEntry, AuditKind, PolicyDecision,
};
use openphone_protocol::{Autonomy, Risk, ToolStatus, canonical_json};
use openphone_store::Store;
use serde_json::{Value, json};

const IN_FLIGHT: usize = 512;

fn read_proof() -> Value {
    let verdict = |layer: &str, reason: &str| {
        json!({"layer": layer, "kind": "allow", "reason": reason, "code": null,
               "policy_detail": null, "source": {"kind": "policy", "layer": layer}})
    };
    json!([
        verdict(
            "runtime_authorisation",
            "runtime hermes is enabled, its transport websocket is allowed and it is granted the command"
        ),
        verdict("tool_policy", "no tool-policy entry refuses the command"),
        verdict(
            "platform_support",
            "the device backend supports the command"
        ),
        verdict(
            "autonomy",
            "read: runs in every mode (mode ask_before_action)"
        ),
        verdict(
            "risk_floor",
            "low risk and no `confirmation: always`: the floor does not apply"
        ),
        verdict("background_context", "interactive context"),
        verdict("standing_approvals", "read: nothing to approve"),
    ])
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    rt: tokio::runtime::Runtime,
    template: AuditEntry,
    seq: AtomicU64,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let proof = read_proof();
        let template = AuditEntry {
            kind: AuditKind::ToolRequest,
            at_ms: 1_760_000_000_000,
            runtime: "hermes".to_owned(),
            caller: AuditCaller {
                runtime: "hermes".to_owned(),
                transport: "websocket".to_owned(),
                principal: "token:hermes".to_owned(),
            },
            runtime_session_id: Some("global".to_owned()),
            tool: Some("openphone.device.status".to_owned()),
            risk: Some(Risk::Low),
            mutating: Some(false),
            autonomy: Some(Autonomy::AskBeforeAction),
            decision: Some(PolicyDecision::Allow),
            proof_digest: Some(sha256_hex(&canonical_json(&proof).unwrap())),
            policy_proof: Some(proof),
            confirmation: Some(AuditConfirmation::NotRequired),
            status: Some(ToolStatus::Ok),
            duration_ms: Some(1),
            params_hash: Some(format!("sha256:{}", sha256_hex("{}"))),
            ..AuditEntry::default()
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Fixture {
            _dir: dir,
            store,
            rt,
            template,
            seq: AtomicU64::new(0),
        }
    }

    /// The next read's record: a fresh UUID request id and result digest.
    fn entry(&self) -> AuditEntry {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let h = sha256_hex(&n.to_string());
        let request_id = format!(
            "{}-{}-4{}-a{}-{}",
            &h[0..8],
            &h[8..12],
            &h[13..16],
            &h[17..20],
            &h[20..32]
        );
        AuditEntry {
            audit_id: format!("runtime:hermes:{request_id}"),
            idempotency_key: Some(request_id.clone()),
            request_id,
            result_digest: Some(format!("sha256:{}", sha256_hex(&h))),
            ..self.template.clone()
        }
    }

    /// `IN_FLIGHT` appends at once, each from its own task.
    fn concurrent(&self) {
        let tasks: Vec<_> = (0..IN_FLIGHT)
            .map(|_| {
                let store = Arc::clone(&self.store);
                let entry = self.entry();
                self.rt
                    .spawn(async move { store.append_audit_async(entry).await })
            })
            .collect();
        self.rt.block_on(async {
            for task in tasks {
                task.await.unwrap().unwrap();
            }
        });
    }

    fn one(&self) {
        self.store.append_audit(&self.entry()).unwrap();
    }
}

fn rate(name: &str, appends: usize, f: impl Fn()) {
    let start = Stopwatch::start();
    f();
    let elapsed = start.elapsed();
    println!(
        "{name}: {:.0} appends/s ({appends} appends in {elapsed:?})",
        appends as f64 / elapsed.as_secs_f64()
    );
}

fn bench(c: &mut Criterion) {
    let fixture = Fixture::new();
    let mut group = c.benchmark_group("audit_append");
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(IN_FLIGHT as u64));
    group.bench_function("group-committed, 512 in flight", |b| {
        b.iter(|| fixture.concurrent());
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("one at a time", |b| b.iter(|| fixture.one()));
    group.finish();

    let fixture = Fixture::new();
    rate("group-committed, 512 in flight", 40 * IN_FLIGHT, || {
        for _ in 0..40 {
            fixture.concurrent();
        }
    });
    rate("one at a time", 500, || {
        for _ in 0..500 {
            fixture.one();
        }
    });
    let stats = fixture.store.stats().unwrap();
    println!(
        "audit storage: {} records, {:.0} bytes per record (tables and indexes)",
        stats.audit.records,
        stats.audit.bytes_per_record.unwrap_or(0.0)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
