//! The committed seeds stay what their names say: every seed runs through its target without
//! a finding, and the seeds named `ok-*` are accepted by the parser (so the fuzzers start
//! from inputs that reach past the first check), the `bad-*` ones refused.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test crate: a panic is a failed test

use std::path::{Path, PathBuf};

use openphone_device::sim::SimState;
use openphone_fuzz::{TARGETS, manifest_load};
use openphone_protocol::Registry;

fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    files
        .into_iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&f).unwrap())
        })
        .collect()
}

#[test]
fn every_seed_runs_through_its_target() {
    for (target, run) in TARGETS {
        for (name, bytes) in seeds(target) {
            eprintln!("{target}/{name}");
            run(&bytes);
        }
    }
}

#[test]
fn manifest_seeds_load_or_fail_as_named() {
    for (name, bytes) in seeds("manifest_load") {
        let sources = manifest_load::sources(&bytes).unwrap();
        let loaded = Registry::load(&sources);
        if name.starts_with("ok-") {
            assert!(loaded.is_ok(), "{name}: {}", loaded.unwrap_err());
        } else {
            assert!(name.starts_with("bad-"), "{name}: name it ok-* or bad-*");
            assert!(loaded.is_err(), "{name} loads");
        }
    }
}

#[test]
fn scenario_seeds_load_or_fail_as_named() {
    for (name, bytes) in seeds("scenario_load") {
        let loaded = SimState::from_json(std::str::from_utf8(&bytes).unwrap());
        if name.starts_with("ok-") {
            assert!(loaded.is_ok(), "{name}: {}", loaded.unwrap_err());
        } else {
            assert!(name.starts_with("bad-"), "{name}: name it ok-* or bad-*");
            assert!(loaded.is_err(), "{name} loads");
        }
    }
}
