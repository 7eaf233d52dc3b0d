//! `openphone`: the OpenPhone runtime's one user-facing binary.
//!
//! The daemon (`openphone serve`), the client commands that talk to it over its endpoint
//! (`status`, `tools`, `confirmations`, `runtimes`, `sessions`, `ask`, `mcp serve`), and the
//! offline tools (`protocol …`, `audit …`, `info`). The client nouns follow the endpoint's
//! method names (`tools.*`, `confirmations.*`, `runtime.*`, `sessions.*`); the older spellings
//! `tool`, `confirm` and `runtime` remain as aliases. Conventions: `--json` where a machine
//! reads the output, exit code 0 for success, 1 when the thing checked is bad (or a tool result
//! is not ok), 2 for unusable input or no daemon, 3 when a tool request waits for the user's
//! confirmation.

mod approvals_cmd;
mod audit_cmd;
mod bench;
mod client;
mod client_cmd;
mod config_cmd;
mod crash_cmd;
mod dashboard_cmd;
mod data_dir;
mod devices_cmd;
mod doctor_cmd;
mod elevate_cmd;
mod fleet_cmd;
mod goals_cmd;
mod inbox_cmd;
mod jobs_check;
mod jobs_cmd;
mod mcp_cmd;
mod openclaw_cmd;
mod output;
mod policy_cmd;
mod protocol_cmd;
mod serve_cmd;
mod sim_cmd;
mod stop_cmd;
mod store_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The OpenPhone runtime: a phone as a trusted endpoint for AI agents.
#[derive(Debug, Parser)]
#[command(name = "openphone", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon: the phone endpoint for agent runtimes and the CLI.
    Serve(serve_cmd::ServeArgs),
    /// Stop the data directory's daemon gracefully (as Ctrl-C would) and wait until it has.
    Stop(stop_cmd::StopArgs),
    /// Check the set-up: config, data directory, daemon, model server, OpenClaw, phones; each
    /// problem with its fix (exit 1 when there is one).
    Doctor(doctor_cmd::DoctorArgs),
    /// The configuration file: `config path` (which file, and why), `config check`.
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// Show whether a daemon serves the data directory, and its state.
    Status {
        #[command(flatten)]
        data_dir: data_dir::DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List or invoke phone commands through the daemon (as the operator).
    #[command(subcommand, visible_alias = "tool")]
    Tools(client_cmd::ToolsCommand),
    /// Everything waiting for you — confirmations, background job reviews, goal approvals —
    /// in one list; `inbox approve|deny <id>` decides one by id, short id or unique prefix.
    Inbox(inbox_cmd::InboxArgs),
    /// List, approve or deny what waits for you (older names of `openphone inbox`).
    #[command(subcommand, visible_alias = "confirm")]
    Confirmations(client_cmd::ConfirmationsCommand),
    /// Background jobs: create, list, show, runs, stop, pause, resume, wake, approve or deny
    /// a parked call, check a stored review record.
    #[command(subcommand)]
    Jobs(jobs_cmd::JobsCommand),
    /// Goals: create one from a JSON file, plan, list, show, tick, approve, answer, pause,
    /// resume, retry, abort, explain, export; `simulate` runs one offline in simulated time.
    #[command(subcommand)]
    Goals(goals_cmd::GoalsCommand),
    /// Standing approvals and session grants: grant, list, revoke.
    #[command(subcommand)]
    Approvals(approvals_cmd::ApprovalsCommand),
    /// List runtimes, or route a surface to one.
    #[command(subcommand, visible_alias = "runtime")]
    Runtimes(client_cmd::RuntimesCommand),
    /// Phone sessions.
    #[command(subcommand)]
    Sessions(client_cmd::SessionsCommand),
    /// Elevated mode: raise a runtime's autonomy ceiling for a while (`elevate hermes --to
    /// trusted_actions --for 10m`), or end it (`elevate --revoke hermes`).
    Elevate(elevate_cmd::ElevateArgs),
    /// The phones: `devices list` shows attached Android phones (adb) and the daemon's phones,
    /// with their state and which ones the running daemon uses.
    #[command(subcommand)]
    Devices(devices_cmd::DevicesCommand),
    /// The simulated phone's world: `sim inject message|call|notification|action`, `sim reset`.
    #[command(subcommand)]
    Sim(sim_cmd::SimCommand),
    /// Ask the runtime routed for a surface (or the one named) and print its reply as it
    /// streams. Exits 1 when the session fails or no final reply comes in time.
    Ask {
        /// What to ask.
        text: String,
        /// The entry point: chat (default), volume_voice, notification, …
        #[arg(long, default_value = "chat")]
        surface: String,
        /// Ask this runtime instead of the one routed for the surface.
        #[arg(long)]
        runtime: Option<String>,
        /// Autonomy granted to the session (default ask_before_action): observe_only,
        /// ask_before_action or trusted_actions.
        #[arg(long, value_parser = client_cmd::autonomy_arg)]
        autonomy: Option<String>,
        /// Continue this phone session (its id from `openphone sessions list`), or `main`
        /// for the runtime's latest chat session; default: a new session.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_secs: u64,
        #[command(flatten)]
        data_dir: data_dir::DataDir,
    },
    /// MCP: the stdio server for hosts (`mcp serve`), the default token, host configuration.
    #[command(subcommand)]
    Mcp(mcp_cmd::McpCommand),
    /// The OpenClaw node adapter: status, pairing, unpairing, the published tools.
    #[command(subcommand)]
    Openclaw(openclaw_cmd::OpenclawCommand),
    /// Load tools: a daemon's or any server's endpoint and MCP, and the in-process bridge.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Tool profiles and `policy explain`: why a call is allowed, asks or is denied.
    #[command(subcommand)]
    Policy(policy_cmd::PolicyCommand),
    /// Print a shell completion script.
    Completions { shell: clap_complete::Shell },
    /// Inspect and check the protocol manifests, hash params, validate tool params (offline).
    #[command(subcommand)]
    Protocol(protocol_cmd::ProtocolCommand),
    /// Verify, export or anchor the hash-chained audit log of a data directory (offline).
    #[command(subcommand)]
    Audit(audit_cmd::AuditCommand),
    /// Database sizes: rows and bytes per table, audit bytes per record, stored results
    /// (offline, read-only: works next to a running daemon).
    #[command(subcommand)]
    Store(store_cmd::StoreCommand),
    /// The daemons sharing this host's store (a fleet on PostgreSQL, docs/fleet.md): each
    /// host's id, whether it runs, when it was last seen, its phones (offline, read-only).
    Fleet {
        #[command(flatten)]
        data_dir: data_dir::DataDir,
        #[command(flatten)]
        config: fleet_cmd::ConfigFile,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Developer tools: the crash-safety test (`dev crash-test`).
    #[command(subcommand)]
    Dev(DevCommand),
    /// Open the web dashboard in the browser with a one-time login link (60 s, works once).
    Dashboard(dashboard_cmd::DashboardArgs),
    /// Print version information, including the supported runtime-protocol range.
    Info {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum DevCommand {
    /// Kill the daemon with SIGKILL at random moments under load (direct mutations,
    /// confirmations, approvals), restart it, retry every unanswered call with its key, and
    /// check: no acknowledged result lost, nothing run twice, nothing run unapproved or
    /// unaudited, the audit chain intact. Exits 1 when an invariant fails.
    CrashTest(crash_cmd::CrashTestArgs),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Concurrent WebSocket connections calling `tools.invoke` on the data directory's daemon
    /// or any server (`--url`); prints calls/s, p50, p90, p99, max, errors by kind and the
    /// server's RSS.
    Invoke(bench::InvokeBench),
    /// Concurrent MCP clients calling a tool over Streamable HTTP, in the 2025-11-25 or the
    /// 2026-07-28 era, on the data directory's daemon or any server (`--url`); the same
    /// figures.
    Mcp(bench::McpBench),
    /// The ToolBridge in this process (fresh SQLite file, simulated phone), N concurrent tasks
    /// doing trivial reads or auto-allowed mutations; calls/s and percentiles.
    Bridge(bench::BridgeBench),
    /// Starts a daemon and prints its resident memory at idle (by mapping), its idle wake-ups
    /// per second, and its memory after 100 k calls and after 10 k jobs.
    Memory(bench::MemoryBench),
}

/// The exit code of a command whose reader went away (`openphone … | head`): the code a shell
/// reports for a process stopped by SIGPIPE, as other tools are.
const BROKEN_PIPE_EXIT: u8 = 141;

/// A reader that closes stdout early (`openphone protocol commands | head`) ends the command
/// quietly instead of with a panic: `println!` (and clap_complete) panic when stdout is a
/// closed pipe, and Rust ignores SIGPIPE, which would otherwise have stopped the process.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.contains("Broken pipe") || message.contains("BrokenPipe") {
            std::process::exit(i32::from(BROKEN_PIPE_EXIT));
        }
        default(info);
    }));
}

/// The daemon's allocator. glibc's malloc was about a tenth of a call's CPU time in the
/// profiles (its free lists, `malloc_consolidate`, `unlink_chunk`); mimalloc's per-thread
/// free lists took a fifth off an MCP call's CPU (docs/benchmarks.md, ninth round). Built
/// without transparent huge pages (`no_thp`): with them every thread's first pages were a
/// 2 MiB page each, 16 MiB more resident at idle, which a phone cannot spare.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Protocol(cmd) => protocol_cmd::run(cmd),
        Command::Policy(cmd) => policy_cmd::run(cmd),
        Command::Audit(cmd) => audit_cmd::run(cmd),
        Command::Store(cmd) => store_cmd::run(cmd),
        Command::Fleet {
            data_dir,
            config,
            json,
        } => fleet_cmd::run(&data_dir, &config, json),
        Command::Info { json } => info(json),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Stop(args) => stop_cmd::run(args),
        Command::Doctor(args) => doctor_cmd::run(args),
        Command::Config(cmd) => config_cmd::run(cmd),
        Command::Status { data_dir, json } => client_cmd::status(&data_dir, json),
        Command::Tools(cmd) => client_cmd::tools(cmd),
        Command::Inbox(args) => inbox_cmd::run(args),
        Command::Confirmations(cmd) => client_cmd::confirmations(cmd),
        Command::Ask {
            text,
            surface,
            runtime,
            autonomy,
            session,
            timeout_secs,
            data_dir,
        } => client_cmd::ask(
            &data_dir,
            &text,
            client_cmd::AskOptions {
                surface: &surface,
                runtime: runtime.as_deref(),
                autonomy: autonomy.as_deref(),
                session: session.as_deref(),
                timeout_secs,
            },
        ),
        Command::Runtimes(cmd) => client_cmd::runtimes(cmd),
        Command::Approvals(cmd) => approvals_cmd::run(cmd),
        Command::Jobs(cmd) => jobs_cmd::run(cmd),
        Command::Goals(cmd) => goals_cmd::run(cmd),
        Command::Dev(DevCommand::CrashTest(args)) => crash_cmd::run(args),
        Command::Bench(BenchCommand::Invoke(opts)) => bench::invoke(opts),
        Command::Bench(BenchCommand::Mcp(opts)) => bench::mcp(opts),
        Command::Bench(BenchCommand::Bridge(opts)) => bench::bridge(opts),
        Command::Bench(BenchCommand::Memory(opts)) => bench::memory(opts),
        Command::Mcp(cmd) => mcp_cmd::run(cmd),
        Command::Openclaw(cmd) => openclaw_cmd::run(cmd),
        Command::Sessions(cmd) => client_cmd::sessions(cmd),
        Command::Elevate(args) => elevate_cmd::run(args),
        Command::Sim(cmd) => sim_cmd::run(cmd),
        Command::Devices(cmd) => devices_cmd::run(cmd),
        Command::Dashboard(args) => dashboard_cmd::run(args),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "openphone", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    };
    match outcome {
        Ok(code) => code,
        Err(err)
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::from(BROKEN_PIPE_EXIT)
        }
        Err(err) => {
            eprintln!("openphone: {}", report(&err));
            // A refusal from the daemon is a bad outcome (1); no daemon or bad input is 2.
            if err.downcast_ref::<client::RpcFailure>().is_some() {
                ExitCode::from(1)
            } else {
                ExitCode::from(2)
            }
        }
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose text the message
/// before it already shows (an error that prints its source would otherwise say it twice:
/// `Address already in use (os error 98): Address already in use (os error 98)`).
fn report(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let line = cause.to_string();
        if text.contains(&line) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&line);
    }
    text
}

fn info(json: bool) -> anyhow::Result<ExitCode> {
    let advert = openphone_protocol::VersionAdvertisement::current();
    if json {
        let value = serde_json::json!({
            "name": "openphone",
            "version": env!("CARGO_PKG_VERSION"),
            "runtime_protocol": advert,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("openphone {}", env!("CARGO_PKG_VERSION"));
        println!(
            "runtime protocol: {} versions {}..={}",
            advert.name, advert.min_version, advert.max_version
        );
    }
    Ok(ExitCode::SUCCESS)
}
