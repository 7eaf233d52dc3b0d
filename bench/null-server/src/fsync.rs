//! The `fsync` mode: how long a durable commit takes on a disk, with nothing else around it.
//!
//! The daemon's store commits in WAL mode with `synchronous = FULL`: a commit writes its
//! frames into `openphone.db-wal` with `pwrite` (24 header bytes and one 4096-byte page each)
//! and calls `fdatasync` on that file (the bundled SQLite is built with `HAVE_FDATASYNC`:
//! `.cargo/config.toml`). The probe does the same to a file of its own in `--dir`, one commit
//! after the other: `--frames` frames appended, then `fdatasync`; after 1000 frames it starts again at the start of the file,
//! as SQLite reuses its WAL after a checkpoint. With `--awake N`, N threads wake every
//! 20 µs meanwhile (see [`Probe::awake`]). It prints the commits per second, the
//! latency's percentiles, and removes the file.
//!
//! This is the disk's part of every durable call: with C callers each waiting for its answer
//! and k durable waits per call, no group commit can serve more than C ÷ (k × commit time)
//! calls per second, whatever the CPU (`bench/run.sh` prints that bound beside the rows it
//! applies to).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// SQLite's WAL frame: a 24-byte header and a 4096-byte page.
const FRAME: usize = 24 + 4096;

/// Frames written before the probe starts again at offset 0 (SQLite's default
/// `wal_autocheckpoint` is 1000 pages).
const WRAP_FRAMES: u64 = 1000;

/// The probe's settings.
#[derive(Debug, PartialEq)]
pub(crate) struct Probe {
    pub(crate) dir: PathBuf,
    pub(crate) secs: f64,
    /// Frames per commit.
    pub(crate) frames: usize,
    /// Threads that wake every few microseconds while the probe runs (0: none), keeping
    /// the cores out of their idle state as a benchmark's traffic does. On this project's
    /// virtual machine (Firecracker) an fsync on idle cores takes a timer tick (~4 ms) to
    /// complete, and ~0.3 ms when the cores are awake: the commit time a daemon under load
    /// sees is the second.
    pub(crate) awake: usize,
}

/// Threads that sleep 20 µs at a time, stopped and joined on drop.
struct Wakers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Wakers {
    fn start(n: usize) -> Wakers {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                })
            })
            .collect();
        Wakers { stop, threads }
    }
}

impl Drop for Wakers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Removes the probe's file however the probe ends.
struct Scratch {
    path: PathBuf,
    file: File,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Runs the probe; returns its report as one line of JSON.
#[allow(
    clippy::disallowed_methods,
    reason = "a stand-alone probe sharing no code with the daemon: it times with std's monotonic clock, not openphone_clock"
)]
pub(crate) fn run(probe: &Probe) -> Result<String, String> {
    let path = probe
        .dir
        .join(format!(".openphone-fsync-probe-{}", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let scratch = Scratch { path, file };
    let mut buf = vec![0u8; FRAME * probe.frames];
    let mut latencies = Vec::new();
    let mut frame_no: u64 = 0;
    let budget = Duration::from_secs_f64(probe.secs);
    let wakers = Wakers::start(probe.awake);
    let started = Instant::now();
    while started.elapsed() < budget {
        if frame_no + probe.frames as u64 > WRAP_FRAMES {
            frame_no = 0;
        }
        // Different bytes each time, as real frames are.
        let stamp = latencies.len() as u64;
        for (i, b) in buf.iter_mut().step_by(512).enumerate() {
            *b = (stamp as usize).wrapping_add(i) as u8;
        }
        let t = Instant::now();
        scratch
            .file
            .write_all_at(&buf, frame_no * FRAME as u64)
            .map_err(|e| format!("cannot write {}: {e}", scratch.path.display()))?;
        scratch
            .file
            .sync_data()
            .map_err(|e| format!("cannot fsync {}: {e}", scratch.path.display()))?;
        latencies.push(t.elapsed());
        frame_no += probe.frames as u64;
    }
    let elapsed = started.elapsed();
    drop(wakers);
    Ok(report(probe, &mut latencies, elapsed))
}

/// The nearest-rank percentile `p` (0–100) of sorted `xs`, in milliseconds.
fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

fn report(probe: &Probe, latencies: &mut [Duration], elapsed: Duration) -> String {
    latencies.sort_unstable();
    let n = latencies.len();
    let mean_ms = if n == 0 {
        0.0
    } else {
        latencies.iter().map(Duration::as_secs_f64).sum::<f64>() * 1000.0 / n as f64
    };
    serde_json::json!({
        "dir": probe.dir.display().to_string(),
        "frames_per_commit": probe.frames,
        "awake_threads": probe.awake,
        "bytes_per_commit": FRAME * probe.frames,
        "commits": n,
        "seconds": elapsed.as_secs_f64(),
        "commits_per_sec": n as f64 / elapsed.as_secs_f64().max(1e-9),
        "mean_ms": mean_ms,
        "p50_ms": percentile_ms(latencies, 50.0),
        "p90_ms": percentile_ms(latencies, 90.0),
        "p99_ms": percentile_ms(latencies, 99.0),
        "max_ms": percentile_ms(latencies, 100.0),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let xs: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&xs, 50.0), 50.0);
        assert_eq!(percentile_ms(&xs, 99.0), 99.0);
        assert_eq!(percentile_ms(&xs, 100.0), 100.0);
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
    }

    #[test]
    fn the_probe_commits_on_a_real_disk_and_leaves_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("fsync-probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let probe = Probe {
            dir: dir.clone(),
            secs: 0.2,
            frames: 2,
            awake: 1,
        };
        let report: serde_json::Value = serde_json::from_str(&run(&probe).unwrap()).unwrap();
        assert!(report["commits"].as_u64().unwrap() > 0, "{report}");
        assert_eq!(report["bytes_per_commit"], 2 * FRAME);
        assert_eq!(report["awake_threads"], 1);
        assert!(report["p50_ms"].as_f64().unwrap() <= report["p99_ms"].as_f64().unwrap());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "the scratch file stays"
        );
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_a_clear_error() {
        let probe = Probe {
            dir: "/nonexistent/openphone-fsync".into(),
            secs: 0.1,
            frames: 1,
            awake: 0,
        };
        assert!(run(&probe).unwrap_err().contains("cannot create"));
    }
}
