//! `openphone sim inject …`: make something happen on the simulated phone — a message
//! arrives, a call comes in, an app posts a notification, the user presses a notification's
//! button (endpoint `sim.inject`, operator only; the daemon audits it before it is applied).
//! `openphone sim reset`: start the simulated phone over from its scenario (the daemon keeps
//! the phone's state in `sim-state.json` across restarts).

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use openphone_protocol::endpoint::{Event, SimInject, SimInjectParams, SimInjectResult};

use crate::client::DaemonClient;
use crate::client_cmd::{block_on, print_json};
use crate::data_dir::DataDir;

/// `openphone sim` subcommands.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Make something happen on the simulated phone (audited as an operator action).
    #[command(subcommand)]
    Inject(InjectCommand),
    /// Start the simulated phone over: the next `openphone serve` seeds it from its scenario
    /// (or the built-in demo) instead of continuing from the state it saved. The saved state
    /// is kept as `sim-state.json.bak`. Stop the daemon first.
    Reset {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// What to inject.
#[derive(Debug, Subcommand)]
pub enum InjectCommand {
    /// A message arrives (it lands in the sender's thread, with the Messages notification).
    Message {
        /// The sender: a number, a contact's name, or a sender name such as a short code.
        #[arg(long)]
        from: String,
        /// The text.
        #[arg(long)]
        text: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A call comes in (the call log; a missed one also posts a notification).
    Call {
        /// The caller's number (or a contact's name).
        #[arg(long)]
        from: String,
        /// What became of it.
        #[arg(long, value_parser = ["missed", "answered", "rejected"])]
        outcome: Option<String>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// An installed app posts a notification.
    Notification {
        /// The app: its package or its name (`Calendar`).
        #[arg(long)]
        app: String,
        /// The title.
        #[arg(long)]
        title: String,
        /// The text.
        #[arg(long, default_value = "")]
        text: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The user presses one of a notification's action buttons (e.g. a review's approve).
    Action {
        /// The notification's key (`notifications.list` shows it).
        #[arg(long)]
        key: String,
        /// The action's id.
        #[arg(long)]
        action: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// One line about an event.
fn describe(event: &Event) -> String {
    match event {
        Event::PhoneMessageReceived(m) => format!(
            "message from {}{} in thread {}: {}",
            m.name
                .as_deref()
                .map(|n| format!("{n} "))
                .unwrap_or_default(),
            m.address,
            m.thread_id,
            m.text
        ),
        Event::PhoneCallReceived(c) => format!(
            "{} {} call from {}{}",
            c.outcome,
            c.direction,
            c.name
                .as_deref()
                .map(|n| format!("{n} "))
                .unwrap_or_default(),
            c.number
        ),
        Event::PhoneNotificationPosted(n) => {
            format!("notification {} from {}: {}", n.key, n.app, n.title)
        }
        Event::PhoneNotificationAction(a) => {
            format!("action {} pressed on notification {}", a.action, a.key)
        }
        other => other.name().to_owned(),
    }
}

fn print(result: &SimInjectResult) {
    for event in &result.events {
        println!("{}", describe(event));
    }
    println!("audited as record {}", result.audit_seq);
}

/// Runs a `sim` subcommand.
pub fn run(cmd: SimCommand) -> Result<ExitCode> {
    let inject = match cmd {
        SimCommand::Inject(inject) => inject,
        SimCommand::Reset { data_dir, json } => return reset(&data_dir.resolve()?, json),
    };
    let (params, data_dir, json) = match inject {
        InjectCommand::Message {
            from,
            text,
            data_dir,
            json,
        } => (
            SimInjectParams::Message {
                address: from,
                text,
            },
            data_dir,
            json,
        ),
        InjectCommand::Call {
            from,
            outcome,
            data_dir,
            json,
        } => (
            SimInjectParams::Call {
                number: from,
                outcome,
            },
            data_dir,
            json,
        ),
        InjectCommand::Notification {
            app,
            title,
            text,
            data_dir,
            json,
        } => (
            SimInjectParams::Notification { app, title, text },
            data_dir,
            json,
        ),
        InjectCommand::Action {
            key,
            action,
            data_dir,
            json,
        } => (
            SimInjectParams::NotificationAction { key, action },
            data_dir,
            json,
        ),
    };
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let result = client.call::<SimInject>(params).await?;
        client.close().await;
        if json {
            print_json(&result)?;
        } else {
            print(&result);
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `openphone sim reset`.
fn reset(dir: &std::path::Path, json: bool) -> Result<ExitCode> {
    let report = openphone_server::sim_state::reset(dir)?;
    if json {
        print_json(&report)?;
    } else if report.moved.is_empty() {
        println!(
            "no saved simulated phone in {}: the next start seeds it from its scenario",
            dir.display()
        );
    } else {
        for moved in &report.moved {
            println!("moved {} to {}", moved.from.display(), moved.to.display());
        }
        println!("the next `openphone serve` starts the simulated phone from its scenario");
    }
    Ok(ExitCode::SUCCESS)
}
