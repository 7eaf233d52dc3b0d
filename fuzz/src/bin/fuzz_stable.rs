//! The stable-Rust driver of the fuzz targets (`docs/fuzzing.md`).
//!
//! ```text
//! fuzz-stable TARGET SECONDS [SEED_DIR...]   mutate the seeds for SECONDS
//! fuzz-stable replay TARGET PATH...          run saved inputs (files or directories) once
//! ```
//!
//! `FUZZ_SEED` seeds the generator (default 1). A panic is a finding: the input is written to
//! `artifacts/TARGET/crash-<hash>` and the exit code is 1. Exit code 2 is bad usage.
#![forbid(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use openphone_clock::Stopwatch;
use openphone_fuzz::stable::{Rng, mutate};
use openphone_fuzz::{TARGETS, target};

/// Inputs grow to at most this many bytes beyond the largest seed.
const GROWTH: usize = 4096;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("replay") if args.len() >= 3 => replay(&args[1], &args[2..]),
        Some(name) if args.len() >= 2 => match args[1].parse::<u64>() {
            Ok(seconds) => fuzz(name, seconds, &args[2..]),
            Err(_) => Err(format!("SECONDS must be a whole number, got {:?}", args[1])),
        },
        _ => Err(String::new()),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(message) => {
            if !message.is_empty() {
                eprintln!("fuzz-stable: {message}");
            }
            let names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
            eprintln!(
                "usage: fuzz-stable TARGET SECONDS [SEED_DIR...] | fuzz-stable replay TARGET PATH...\n\
                 targets: {}",
                names.join(", ")
            );
            ExitCode::from(2)
        }
    }
}

fn lookup(name: &str) -> Result<fn(&[u8]), String> {
    target(name).ok_or_else(|| format!("no target {name:?}"))
}

/// Every file under `paths` (directories one level deep), sorted.
fn inputs(paths: &[String]) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
    let mut files = Vec::new();
    for path in paths {
        let path = Path::new(path);
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("{}: {e}", path.display()))?;
                if entry.path().is_file() {
                    files.push(entry.path());
                }
            }
        } else {
            files.push(path.to_path_buf());
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|f| {
            std::fs::read(&f)
                .map(|bytes| (f.clone(), bytes))
                .map_err(|e| format!("{}: {e}", f.display()))
        })
        .collect()
}

/// Runs one input; on a panic saves it and returns false.
fn execute(name: &str, run: fn(&[u8]), input: &[u8]) -> bool {
    if catch_unwind(AssertUnwindSafe(|| run(input))).is_ok() {
        return true;
    }
    let dir = Path::new("artifacts").join(name);
    let file = dir.join(format!("crash-{:016x}", fnv1a(input)));
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, input)) {
        Ok(()) => eprintln!(
            "fuzz-stable: {name} crashed; input saved to {}",
            file.display()
        ),
        Err(e) => eprintln!("fuzz-stable: {name} crashed; could not save the input: {e}"),
    }
    false
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn replay(name: &str, paths: &[String]) -> Result<bool, String> {
    let run = lookup(name)?;
    let files = inputs(paths)?;
    let mut ok = true;
    for (path, bytes) in &files {
        if !execute(name, run, bytes) {
            eprintln!("fuzz-stable: {name}: {} crashes", path.display());
            ok = false;
        }
    }
    println!("{name}: replayed {} input(s), {}", files.len(), verdict(ok));
    Ok(ok)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "0 crashes" } else { "CRASHED" }
}

fn fuzz(name: &str, seconds: u64, seed_dirs: &[String]) -> Result<bool, String> {
    let run = lookup(name)?;
    let default_dir = format!("seeds/{name}");
    let dirs = if seed_dirs.is_empty() {
        vec![default_dir]
    } else {
        seed_dirs.to_vec()
    };
    let mut pool: Vec<Vec<u8>> = inputs(&dirs)?.into_iter().map(|(_, b)| b).collect();
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    let max_len = pool.iter().map(Vec::len).max().unwrap_or(0) + GROWTH;
    let seed = match std::env::var("FUZZ_SEED") {
        Ok(text) => text
            .parse::<u64>()
            .map_err(|_| format!("FUZZ_SEED must be a whole number, got {text:?}"))?,
        Err(_) => 1,
    };
    // The panic messages of expected crashes would drown the summary; keep the first only.
    let mut rng = Rng::new(seed);
    let budget = Duration::from_secs(seconds);
    let watch = Stopwatch::start();
    let mut executions: u64 = 0;
    for input in &pool {
        executions += 1;
        if !execute(name, run, input) {
            return Ok(false);
        }
    }
    while watch.elapsed() < budget {
        for _ in 0..64 {
            let mut input = pool[rng.below(pool.len())].clone();
            mutate(&mut input, &pool, &mut rng, max_len);
            executions += 1;
            if !execute(name, run, &input) {
                return Ok(false);
            }
        }
    }
    let secs = watch.elapsed().as_secs_f64().max(f64::EPSILON);
    // Rounding to whole executions per second is what the summary wants.
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let rate = (executions as f64 / secs) as u64;
    println!(
        "{name}: {executions} executions in {secs:.1} s ({rate} exec/s, seed {seed}), 0 crashes"
    );
    Ok(true)
}
