//! `openphone.screen.get` on the simulated phone, with and without a screenshot, on a
//! conversation screen of the demo scenario.
//!
//! `cargo bench -p openphone-device --bench screen_get`

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmark setup

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use openphone_device::SimPhone;
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

criterion_group!(benches, screen_get);
criterion_main!(benches);
