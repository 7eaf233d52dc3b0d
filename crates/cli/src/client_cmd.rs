//! Client commands: `status`, `tool list|invoke`, `confirm list|approve|deny`, `sessions list`.
//! Each finds its daemon through the data directory and acts with the operator credential.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use serde_json::{Value, json};

use crate::client::DaemonClient;
use crate::data_dir::DataDir;

#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// The commands the operator may use.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        #[arg(long)]
        json: bool,
    },
    /// Invoke a command; exits 0 for ok, 3 for needs_confirmation, 1 otherwise.
    Invoke {
        /// Command name or alias, e.g. `openphone.screen.get`.
        command: String,
        /// Params as a JSON object.
        #[arg(default_value = "{}")]
        params: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Autonomy for this request (the operator may name any mode).
        #[arg(long)]
        autonomy: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
        #[arg(long)]
        timeout_ms: Option<i64>,
        /// Why (recorded in the audit); defaults to a CLI note.
        #[arg(long)]
        reason: Option<String>,
        /// Answer at once with `needs_confirmation` instead of waiting for the user.
        #[arg(long)]
        no_wait: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfirmCommand {
    /// Pending confirmations.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending confirmation (the stored request then runs once).
    Approve {
        confirmation_id: String,
        #[command(flatten)]
        data_dir: DataDir,
        #[arg(long)]
        json: bool,
    },
    /// Deny a pending confirmation.
    Deny {
        confirmation_id: String,
        #[command(flatten)]
        data_dir: DataDir,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Phone sessions, newest first.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long)]
        json: bool,
    },
}

fn block_on<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(f)
}

fn print_json(v: &Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Exit code of a tool result: 0 ok, 3 needs_confirmation, 1 anything else.
fn result_exit(result: &Value) -> ExitCode {
    match result["status"].as_str() {
        Some("ok") => ExitCode::SUCCESS,
        Some("needs_confirmation") => ExitCode::from(3),
        _ => ExitCode::from(1),
    }
}

fn print_result(result: &Value, json: bool) -> Result<ExitCode> {
    if json {
        print_json(result)?;
    } else {
        let status = result["status"].as_str().unwrap_or("?");
        println!("status: {status}");
        if let Some(err) = result.get("error").filter(|e| !e.is_null()) {
            println!(
                "error: {} — {}",
                err["code"].as_str().unwrap_or(""),
                err["message"].as_str().unwrap_or("")
            );
        }
        if status == "needs_confirmation" {
            let r = &result["result"];
            println!(
                "confirmation: {}  ({})",
                r["confirmation_id"].as_str().unwrap_or(""),
                r["summary"].as_str().unwrap_or("")
            );
            println!(
                "approve with `openphone confirm approve {}`",
                r["confirmation_id"].as_str().unwrap_or("")
            );
        } else if let Some(r) = result
            .get("result")
            .filter(|r| r.as_object().is_some_and(|o| !o.is_empty()))
        {
            println!("{}", serde_json::to_string_pretty(r)?);
        }
    }
    Ok(result_exit(result))
}

pub fn status(data_dir: &DataDir, json: bool) -> Result<ExitCode> {
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let pending = client.call("confirmations.list", json!({})).await?;
        let count = pending["confirmations"].as_array().map_or(0, Vec::len);
        let hello = client.hello.clone();
        let endpoint = client.endpoint.clone();
        client.close().await;
        let status = json!({
            "url": endpoint.url,
            "pid": endpoint.pid,
            "started_at_ms": endpoint.started_at_ms,
            "data_dir": dir,
            "protocol_version": hello["protocol_version"],
            "phone": {"platform": hello["phone"]["platform"], "model": hello["phone"]["model"]},
            "commands_version": hello["manifests"]["commands_version"],
            "pending_confirmations": count,
        });
        if json {
            print_json(&status)?;
        } else {
            println!("daemon: running at {} (pid {})", endpoint.url, endpoint.pid);
            println!("data dir: {}", dir.display());
            println!(
                "phone: {} {}",
                hello["phone"]["platform"].as_str().unwrap_or("?"),
                hello["phone"]["model"].as_str().unwrap_or("")
            );
            println!("protocol version: {}", hello["protocol_version"]);
            println!("pending confirmations: {count}");
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn tool(cmd: ToolCommand) -> Result<ExitCode> {
    match cmd {
        ToolCommand::List { data_dir, json } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let list = client.call("tools.list", json!({})).await?;
                client.close().await;
                if json {
                    print_json(&list)?;
                } else {
                    for t in list["tools"].as_array().into_iter().flatten() {
                        println!(
                            "{:<36} {:<7} {:<18} {}",
                            t["name"].as_str().unwrap_or(""),
                            t["risk"].as_str().unwrap_or(""),
                            t["confirmation"].as_str().unwrap_or(""),
                            t["default_exposure"].as_str().unwrap_or("")
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        ToolCommand::Invoke {
            command,
            params,
            data_dir,
            autonomy,
            idempotency_key,
            timeout_ms,
            reason,
            no_wait,
            json,
        } => {
            let dir = data_dir.resolve()?;
            let params: Value = serde_json::from_str(&params).context("params must be JSON")?;
            let millis = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            let request_id = format!("cli-{millis}-{}", std::process::id());
            let mut req = json!({
                "request_id": request_id,
                "tool": command,
                "params": params,
                "wait": !no_wait,
            });
            let has_reason = params.get("reason").is_some();
            if let Some(r) = reason {
                req["reason"] = json!(r);
            } else if !has_reason {
                req["reason"] = json!("requested by the user from the openphone CLI");
            }
            if let Some(a) = autonomy {
                req["autonomy"] = json!(a);
            }
            if let Some(k) = idempotency_key {
                req["idempotency_key"] = json!(k);
            }
            if let Some(t) = timeout_ms {
                req["timeout_ms"] = json!(t);
            }
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let result = client.call("tools.invoke", req).await?;
                client.close().await;
                print_result(&result, json)
            })
        }
    }
}

pub fn confirm(cmd: ConfirmCommand) -> Result<ExitCode> {
    let (data_dir, json, action) = match cmd {
        ConfirmCommand::List { data_dir, json } => (data_dir, json, None),
        ConfirmCommand::Approve {
            confirmation_id,
            data_dir,
            json,
        } => (data_dir, json, Some((confirmation_id, "approve"))),
        ConfirmCommand::Deny {
            confirmation_id,
            data_dir,
            json,
        } => (data_dir, json, Some((confirmation_id, "deny"))),
    };
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let code = match action {
            None => {
                let list = client.call("confirmations.list", json!({})).await?;
                if json {
                    print_json(&list)?;
                } else {
                    let items = list["confirmations"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    if items.is_empty() {
                        println!("no pending confirmations");
                    }
                    for c in items {
                        println!(
                            "{}  {}  {}  {}",
                            c["confirmation_id"].as_str().unwrap_or(""),
                            c["runtime"].as_str().unwrap_or(""),
                            c["tool"].as_str().unwrap_or(""),
                            c["summary"].as_str().unwrap_or("")
                        );
                    }
                }
                ExitCode::SUCCESS
            }
            Some((id, decision)) => {
                let result = client
                    .call(
                        "confirmations.resolve",
                        json!({"confirmation_id": id, "decision": decision}),
                    )
                    .await?;
                if json {
                    print_json(&result)?;
                } else {
                    println!(
                        "{decision}d {id}: the request finished with status {}",
                        result["status"].as_str().unwrap_or("?")
                    );
                }
                ExitCode::SUCCESS
            }
        };
        client.close().await;
        Ok(code)
    })
}

pub fn sessions(cmd: SessionsCommand) -> Result<ExitCode> {
    let SessionsCommand::List {
        data_dir,
        limit,
        json,
    } = cmd;
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let mut params = json!({});
        if let Some(l) = limit {
            params["limit"] = json!(l);
        }
        let list = client.call("sessions.list", params).await?;
        client.close().await;
        if json {
            print_json(&list)?;
        } else {
            let items = list["sessions"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                println!("no phone sessions");
            }
            for s in items {
                println!(
                    "{}  {}  {}  {}  {}",
                    s["phone_session_id"].as_str().unwrap_or(""),
                    s["runtime_kind"].as_str().unwrap_or(""),
                    s["source"].as_str().unwrap_or(""),
                    s["status"].as_str().unwrap_or(""),
                    s["summary"].as_str().unwrap_or("")
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `openphone ask`: asks the runtime routed for a surface (or the one named) and prints its
/// reply as it streams.
pub fn ask(
    data_dir: &DataDir,
    text: &str,
    surface: &str,
    runtime: Option<&str>,
    autonomy: Option<&str>,
    timeout_secs: u64,
) -> Result<ExitCode> {
    use std::io::Write;
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        client
            .call(
                "events.subscribe",
                json!({"events": ["runtime.message.delta", "runtime.message.final", "runtime.session.updated"]}),
            )
            .await?;
        let mut params = json!({"surface": surface, "text": text});
        if let Some(r) = runtime {
            params["runtime"] = json!(r);
        }
        if let Some(a) = autonomy {
            params["autonomy"] = json!(a);
        }
        let accepted = client.call("attention.request", params).await?;
        let session = accepted["phone_session_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        eprintln!(
            "asked {} (session {session})",
            accepted["runtime"].as_str().unwrap_or("the runtime")
        );
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(timeout_secs);
        let mut streamed = false;
        let mut stdout = std::io::stdout();
        loop {
            let event = match tokio::time::timeout_at(deadline, client.next_event()).await {
                Ok(e) => e?,
                Err(_) => {
                    eprintln!("no final reply within {timeout_secs} s (session {session})");
                    return Ok(ExitCode::from(1));
                }
            };
            let payload = &event["payload"];
            if payload["phone_session_id"] != json!(session) {
                continue;
            }
            match event["event"].as_str().unwrap_or_default() {
                "runtime.message.delta" => {
                    write!(stdout, "{}", payload["text"].as_str().unwrap_or_default())?;
                    stdout.flush()?;
                    streamed = true;
                }
                "runtime.message.final" => {
                    if !streamed {
                        write!(stdout, "{}", payload["text"].as_str().unwrap_or_default())?;
                    }
                    writeln!(stdout)?;
                    client.close().await;
                    if let Some(error) = payload["error"].as_str() {
                        eprintln!("the runtime reported an error: {error}");
                        return Ok(ExitCode::from(1));
                    }
                    return Ok(ExitCode::SUCCESS);
                }
                "runtime.session.updated" if payload["status"] == "failed" => {
                    eprintln!(
                        "the session failed: {}",
                        payload["reason"].as_str().unwrap_or("no reason given")
                    );
                    return Ok(ExitCode::from(1));
                }
                _ => {}
            }
        }
    })
}

#[derive(Debug, Subcommand)]
pub enum RuntimeCommand {
    /// Runtimes with their status and the surfaces routed to them.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        #[arg(long)]
        json: bool,
    },
    /// Routes a surface (chat, volume, background) to a runtime.
    Select {
        /// chat, volume or background.
        surface: String,
        /// A configured runtime id.
        runtime: String,
        #[command(flatten)]
        data_dir: DataDir,
    },
}

pub fn runtime(cmd: RuntimeCommand) -> Result<ExitCode> {
    match cmd {
        RuntimeCommand::List { data_dir, json } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let list = client.call("runtime.list", json!({})).await?;
                client.close().await;
                if json {
                    print_json(&list)?;
                } else {
                    println!("runtimes: {}", list["status"].as_str().unwrap_or(""));
                    for r in list["runtimes"].as_array().cloned().unwrap_or_default() {
                        let surfaces: Vec<&str> = r["surfaces"]
                            .as_array()
                            .map(|a| a.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default();
                        println!(
                            "{:<16} {:<10} {:<14} {}",
                            r["id"].as_str().unwrap_or(""),
                            r["kind"].as_str().unwrap_or(""),
                            r["status"].as_str().unwrap_or(""),
                            surfaces.join(",")
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        RuntimeCommand::Select {
            surface,
            runtime,
            data_dir,
        } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let r = client
                    .call(
                        "runtime.select",
                        json!({"surface": surface, "runtime": runtime}),
                    )
                    .await?;
                client.close().await;
                println!(
                    "{} → {}",
                    r["surface"].as_str().unwrap_or(""),
                    r["runtime"].as_str().unwrap_or("")
                );
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}
