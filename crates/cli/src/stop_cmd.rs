//! `openphone stop`: stops the daemon of a data directory gracefully — the SIGTERM `serve`
//! handles like Ctrl-C (in-flight calls finish, connections close, `endpoint.json` and the
//! sockets are removed) — and waits until it has let go of the data directory.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;

use crate::data_dir::DataDir;

#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    data_dir: DataDir,
    /// How long to wait for the daemon to finish its shutdown, in seconds.
    #[arg(long, default_value_t = 30)]
    timeout_secs: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

const POLL: Duration = Duration::from_millis(50);

/// The pid of the process that holds the data directory's lock, or `None` when none does.
pub fn lock_holder(dir: &Path) -> Result<Option<u32>> {
    let path = dir.join(openphone_store::LOCK_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    match file.try_lock_shared() {
        // Nobody holds it (the shared lock goes with `file`).
        Ok(()) => Ok(None),
        Err(std::fs::TryLockError::WouldBlock) => {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            // "pid 1234 since … ms"
            let pid = text
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok());
            match pid {
                Some(pid) => Ok(Some(pid)),
                None => bail!(
                    "{} is locked by a process that did not write its pid",
                    path.display()
                ),
            }
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", path.display()))
        }
    }
}

pub fn run(args: StopArgs) -> Result<ExitCode> {
    let dir = args.data_dir.resolve()?;
    let Some(pid) = lock_holder(&dir)? else {
        if args.json {
            crate::output::print_json(&json!({"data_dir": dir, "was_running": false}))?;
        } else {
            println!(
                "no daemon runs for {} (nothing to stop; start one with `openphone serve \
                 --data-dir {}`)",
                dir.display(),
                dir.display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    let raw = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    let Some(target) = raw else {
        bail!("the data directory's lock names pid {pid}, which is not a process id");
    };
    rustix::process::kill_process(target, rustix::process::Signal::TERM).with_context(|| {
        format!(
            "sending SIGTERM to the daemon of {} (pid {pid})",
            dir.display()
        )
    })?;
    if !args.json {
        eprintln!("stopping the daemon of {} (pid {pid})…", dir.display());
    }
    let polls = args.timeout_secs.saturating_mul(1000) / POLL.as_millis() as u64;
    for _ in 0..polls.max(1) {
        if lock_holder(&dir)? != Some(pid) {
            if args.json {
                crate::output::print_json(
                    &json!({"data_dir": dir, "was_running": true, "pid": pid, "stopped": true}),
                )?;
            } else {
                println!("stopped the daemon of {} (pid {pid})", dir.display());
            }
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(POLL);
    }
    bail!(
        "the daemon of {} (pid {pid}) did not stop within {} s; its log says why (or stop it \
         with `kill -KILL {pid}`: the next start repairs what it left)",
        dir.display(),
        args.timeout_secs
    )
}
