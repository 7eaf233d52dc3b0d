//! `openphone-fake-model`: serve a scripted fake OpenAI-compatible model until killed.
//!
//! ```text
//! openphone-fake-model [--listen 127.0.0.1:0] [--script FILE]
//! ```
//!
//! The first line on stdout is the API root to configure (`http://127.0.0.1:<port>/v1`).
//! The script file format is described in the crate's README.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use openphone_fake_model::{FakeModel, ScriptFile};

const USAGE: &str = "usage: openphone-fake-model [--listen 127.0.0.1:0] [--script FILE]

Serves a scripted fake OpenAI-compatible chat-completion API on a loopback address and prints
its URL (http://127.0.0.1:<port>/v1) on the first line of stdout. FILE is a JSON array of
scripts answered in order (then the fallback, a 500 unless the file sets one); see the
crate's README.md.";

#[derive(Debug)]
struct Options {
    listen: SocketAddr,
    script: Option<String>,
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<Options>, String> {
    let mut options = Options {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        script: None,
    };
    let mut args = args;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--listen" => {
                let value = args.next().ok_or("--listen needs an address")?;
                let addr: SocketAddr = value
                    .parse()
                    .map_err(|e| format!("--listen {value:?} is not an address: {e}"))?;
                if !addr.ip().is_loopback() {
                    return Err(format!(
                        "--listen {addr} is not a loopback address; the fake only serves this machine"
                    ));
                }
                options.listen = addr;
            }
            "--script" => {
                options.script = Some(args.next().ok_or("--script needs a file")?);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(options))
}

fn main() -> ExitCode {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(Some(options)) => options,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("openphone-fake-model: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let script = match &options.script {
        None => None,
        Some(path) => {
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) => {
                    eprintln!("openphone-fake-model: cannot read {path}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match ScriptFile::parse(&text) {
                Ok(file) => Some(file),
                Err(e) => {
                    eprintln!("openphone-fake-model: {path}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("openphone-fake-model: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(options.listen, script))
}

async fn serve(listen: SocketAddr, script: Option<ScriptFile>) -> ExitCode {
    let fake = match FakeModel::start_on(listen).await {
        Ok(fake) => fake,
        Err(e) => {
            eprintln!("openphone-fake-model: cannot listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(file) = script {
        for reply in file.replies {
            fake.push(reply);
        }
        if let Some(fallback) = file.fallback {
            fake.set_fallback(fallback);
        }
    }
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{}", fake.url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        eprintln!("openphone-fake-model: cannot write the URL to stdout");
        return ExitCode::FAILURE;
    }
    // Serve until the process is killed.
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Option<Options>, String> {
        parse_args(list.iter().map(|arg| (*arg).to_owned()))
    }

    #[test]
    fn arguments() {
        let options = args(&["--listen", "127.0.0.1:9999", "--script", "s.json"])
            .unwrap()
            .unwrap();
        assert_eq!(options.listen.port(), 9999);
        assert_eq!(options.script.as_deref(), Some("s.json"));
        assert!(args(&["--help"]).unwrap().is_none());
        assert!(
            args(&["--listen", "0.0.0.0:1"])
                .unwrap_err()
                .contains("loopback")
        );
        assert!(args(&["--listen"]).is_err());
        assert!(args(&["--bogus"]).is_err());
    }
}
