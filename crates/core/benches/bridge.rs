//! In-process ToolBridge throughput on a real SQLite file and the simulated phone:
//! a read (`openphone.screen.get` without screenshot) and an auto-allowed mutation
//! (`openphone.clipboard.set` under `trusted_actions` from the operator), each with its audit
//! write. Criterion measures the mean; a timed loop afterwards prints calls/s, p50 and p99.
//!
//! Run: `cargo bench -p openphone-core --bench bridge`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use openphone_clock::Stopwatch;
use openphone_core::{BridgeConfig, EventBus, Invocation, ToolBridge};
use openphone_device::SimPhone;
use openphone_policy::{Caller, Transport};
use openphone_protocol::{Registry, ToolRequest, ToolStatus};
use openphone_store::Store;
use serde_json::{Value, json};

struct Fixture {
    _dir: tempfile::TempDir,
    bridge: ToolBridge,
    rt: tokio::runtime::Runtime,
    seq: AtomicU64,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::embedded().unwrap();
        let (phone, clock) = SimPhone::demo().unwrap();
        let bridge = ToolBridge::new(
            registry,
            Arc::new(Store::open(dir.path()).unwrap()),
            Arc::new(phone),
            Arc::new(clock),
            Arc::new(EventBus::new(registry, 1024)),
            BridgeConfig::default(),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Fixture {
            _dir: dir,
            bridge,
            rt,
            seq: AtomicU64::new(0),
        }
    }

    fn call(&self, caller: &Caller, tool: &str, params: &Value, autonomy: Option<&str>) {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let req = ToolRequest {
            request_id: format!("bench-{n}"),
            tool: tool.to_owned(),
            params: params.clone(),
            autonomy: autonomy.map(str::to_owned),
            ..ToolRequest::default()
        };
        let result = self
            .rt
            .block_on(self.bridge.call(Invocation::runtime(caller, req)));
        assert_eq!(result.status, ToolStatus::Ok, "{:?}", result.error);
    }
}

fn percentiles(fixture: &Fixture, name: &str, f: impl Fn(&Fixture)) {
    const N: usize = 2000;
    let mut samples = Vec::with_capacity(N);
    let start = Stopwatch::start();
    for _ in 0..N {
        let t = Stopwatch::start();
        f(fixture);
        samples.push(t.elapsed());
    }
    let total = start.elapsed();
    samples.sort_unstable();
    let at = |q: f64| samples[((N as f64 * q) as usize).min(N - 1)];
    println!(
        "{name}: {:.0} calls/s, p50 {:?}, p99 {:?} ({N} sequential calls)",
        N as f64 / total.as_secs_f64(),
        at(0.50),
        at(0.99)
    );
}

fn bench(c: &mut Criterion) {
    let runtime = Caller::remote("hermes", Transport::Websocket, "bench");
    let operator = Caller::operator("cli", Transport::Cli, "bench");
    let read = json!({"reason": "bench", "include_screenshot": false});
    let write = json!({"text": "benchmark clipboard text", "reason": "bench"});

    let fixture = Fixture::new();
    let mut group = c.benchmark_group("tool_bridge");
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("read screen.get (no screenshot) + audit", |b| {
        b.iter(|| fixture.call(&runtime, "openphone.screen.get", &read, None));
    });
    group.bench_function("auto-allowed clipboard.set + record + audit", |b| {
        b.iter(|| {
            fixture.call(
                &operator,
                "openphone.clipboard.set",
                &write,
                Some("trusted_actions"),
            )
        });
    });
    group.finish();

    let fixture = Fixture::new();
    percentiles(&fixture, "read screen.get", |f| {
        f.call(&runtime, "openphone.screen.get", &read, None)
    });
    percentiles(&fixture, "auto-allowed clipboard.set", |f| {
        f.call(
            &operator,
            "openphone.clipboard.set",
            &write,
            Some("trusted_actions"),
        );
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
