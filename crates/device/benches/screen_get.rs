//! `openphone.screen.get` on the simulated phone, with and without a screenshot, on a
//! conversation screen of the demo scenario; and a cached one read as JSON text, through
//! `execute` and then written (what a text reader did before) and through `execute_for_text`.
//!
//! `cargo bench -p openphone-device --bench screen_get`

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmark setup

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use openphone_device::{CallOrigin, DeviceAnswer, DeviceCall, PhoneDevice, SimPhone};
use openphone_protocol::Registry;
use serde_json::json;

fn phone_on_a_thread() -> SimPhone {
    let (phone, _clock) = SimPhone::demo().expect("demo scenario");
    let reason = "benchmark";
    phone
        .execute_sync(
            "openphone.app.open",
            &json!({ "package_or_label": "Messages", "reason": reason }),
        )
        .expect("open Messages");
    phone
        .execute_sync(
            "openphone.ui.tap_element",
            &json!({ "element_id": "thread_200", "reason": reason }),
        )
        .expect("open thread");
    phone
}

fn screen_get(c: &mut Criterion) {
    let phone = phone_on_a_thread();
    let tree_only = json!({ "reason": "benchmark" });
    let with_shot = json!({ "reason": "benchmark", "include_screenshot": true });
    c.bench_function("screen.get (tree, no screenshot)", |b| {
        b.iter(|| {
            black_box(
                phone
                    .execute_sync("openphone.screen.get", black_box(&tree_only))
                    .unwrap(),
            )
        });
    });
    c.bench_function("screen.get (tree + screenshot)", |b| {
        b.iter(|| {
            black_box(
                phone
                    .execute_sync("openphone.screen.get", black_box(&with_shot))
                    .unwrap(),
            )
        });
    });
}

fn screen_get_as_text(c: &mut Criterion) {
    let phone = phone_on_a_thread();
    let registry = Registry::embedded().unwrap();
    let command = registry.resolve("openphone.screen.get").unwrap();
    let params = json!({ "reason": "benchmark" });
    let origin = CallOrigin::default();
    let call = DeviceCall {
        command,
        params: &params,
        origin: &origin,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    c.bench_function("screen.get cached, value then written", |b| {
        b.iter(|| {
            let value = runtime.block_on(phone.execute(black_box(call))).unwrap();
            black_box(serde_json::to_string(&value).unwrap())
        });
    });
    c.bench_function("screen.get cached, execute_for_text", |b| {
        b.iter(|| {
            let answer = runtime
                .block_on(phone.execute_for_text(black_box(call)))
                .unwrap();
            assert!(matches!(answer, DeviceAnswer::Text(_)));
            black_box(answer)
        });
    });
}

criterion_group!(benches, screen_get, screen_get_as_text);
criterion_main!(benches);
