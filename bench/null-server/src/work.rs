//! `--work-us N`: CPU work a durable null server does per tool call besides keeping its
//! record, so the bench can ask how the durable floor falls as a server does more per call
//! (`bench/floor-work.sh`, docs/benchmarks.md). The work is a chain of dependent multiplies,
//! whose length is calibrated once at start so that it takes about N µs of one core; it runs
//! on the connection's task before the record is queued, where the daemon does its own work
//! (policy, the tool, the audit record).

use std::hint::black_box;
use std::time::Instant;

/// The most work per call `--work-us` takes (10 ms: far beyond any daemon's call).
pub(crate) const MAX_WORK_US: u32 = 10_000;

/// Iterations of [`spin`] timed per calibration trial.
const TRIAL: u64 = 200_000;

/// How many calibration trials run; the fastest counts (a trial the scheduler interrupted only
/// runs slower).
const TRIALS: usize = 15;

/// A fixed amount of CPU work, done once per call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Work {
    /// Iterations of [`spin`] per call; 0 does nothing.
    pub(crate) iterations: u64,
}

impl Work {
    /// The work that takes about `us` µs of one core on this machine (none for 0).
    #[allow(
        clippy::disallowed_methods,
        reason = "the null server shares no code with the daemon: calibration times with std's monotonic clock, not openphone_clock"
    )]
    pub(crate) fn calibrated(us: u32) -> Work {
        if us == 0 {
            return Work::default();
        }
        let per_iteration_ns = (0..TRIALS)
            .map(|_| {
                let start = Instant::now();
                black_box(spin(black_box(TRIAL)));
                start.elapsed().as_nanos() as f64 / TRIAL as f64
            })
            .fold(f64::INFINITY, f64::min);
        Work {
            iterations: iterations_for(us, per_iteration_ns),
        }
    }

    /// Does the work (nothing for [`Work::default`]).
    pub(crate) fn spend(&self) {
        if self.iterations > 0 {
            black_box(spin(black_box(self.iterations)));
        }
    }
}

/// How many iterations taking `per_iteration_ns` each fill `us` µs (at least one; a clock too
/// coarse to see a trial counts as 10 ps per iteration).
fn iterations_for(us: u32, per_iteration_ns: f64) -> u64 {
    let per_iteration_ns = if per_iteration_ns.is_finite() {
        per_iteration_ns.max(0.01)
    } else {
        0.01
    };
    ((f64::from(us) * 1000.0 / per_iteration_ns).round() as u64).max(1)
}

/// `n` rounds of a dependent multiply-rotate chain: each round needs the one before, so the
/// compiler cannot fold it and the CPU cannot run rounds in parallel.
fn spin(n: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..n {
        x = (x.rotate_left(7) ^ i).wrapping_mul(0x2545_F491_4F6C_DD1D);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_work_is_no_iterations_and_does_nothing() {
        let none = Work::calibrated(0);
        assert_eq!(none, Work::default());
        assert_eq!(none.iterations, 0);
        none.spend();
    }

    #[test]
    fn the_iterations_fill_the_asked_time() {
        assert_eq!(iterations_for(20, 2.0), 10_000);
        assert_eq!(iterations_for(1, 0.5), 2_000);
        // Never none, and a clock that saw nothing is not a division by zero.
        assert_eq!(iterations_for(1, 1e9), 1);
        assert_eq!(iterations_for(1, 0.0), 100_000);
        assert_eq!(iterations_for(1, f64::INFINITY), 100_000);
    }

    #[test]
    fn the_chain_depends_on_its_length() {
        assert_ne!(spin(1), spin(2));
        assert_eq!(spin(3), spin(3));
    }
}
