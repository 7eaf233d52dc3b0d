//! `openphone-fake-adbd`: a fake Android device for the real `adb` client.
//!
//! ```text
//! openphone-fake-adbd --listen 127.0.0.1:PORT [--log FILE] [--scenario FILE] [--unauthorized]
//!     [--sdk N] [--hang-on PREFIX] [--no-adbkeyboard]
//! ```
//!
//! Prints `listening on 127.0.0.1:PORT` on the first line of stdout, then serves until killed.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use openphone_fake_adbd::{FakeAdbd, Options};

const USAGE: &str =
    "usage: openphone-fake-adbd --listen 127.0.0.1:PORT [--log FILE] [--scenario FILE]
       [--unauthorized] [--sdk N] [--hang-on PREFIX] [--no-adbkeyboard]

A fake Android device speaking the ADB device protocol over TCP, backed by the simulated
phone. Reach it with the real adb client:

    adb connect 127.0.0.1:PORT
    adb -s 127.0.0.1:PORT shell uiautomator dump /dev/tty

  --listen ADDR       where to listen (port 0 picks a free one; printed on stdout)
  --log FILE          append every input command received (input, am, monkey, content
                      insert/update/delete, cmd statusbar), one per line
  --scenario FILE     the simulated phone's scenario JSON (default: the built-in demo)
  --unauthorized      answer with an RSA key prompt that is never accepted
  --sdk N             Android API level to report and obey (default 34)
  --hang-on PREFIX    never answer a shell command starting with PREFIX
  --no-adbkeyboard    no ADB Keyboard IME (no Unicode text input)";

fn parse(args: impl Iterator<Item = String>) -> Result<Option<(SocketAddr, Options)>, String> {
    let mut options = Options::default();
    let mut listen = None;
    let mut args = args;
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or_else(|| format!("{flag} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--listen" => {
                let v = value("--listen")?;
                listen = Some(v.parse::<SocketAddr>().map_err(|e| {
                    format!("--listen {v}: not an address like 127.0.0.1:5555 ({e})")
                })?);
            }
            "--log" => options.log = Some(value("--log")?.into()),
            "--scenario" => options.scenario = Some(value("--scenario")?.into()),
            "--unauthorized" => options.unauthorized = true,
            "--sdk" => {
                let v = value("--sdk")?;
                options.sdk = v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (21..=40).contains(n))
                    .ok_or_else(|| {
                        format!("--sdk {v}: give an Android API level between 21 and 40")
                    })?;
            }
            "--hang-on" => {
                let v = value("--hang-on")?;
                if v.is_empty() {
                    return Err("--hang-on needs a non-empty command prefix".into());
                }
                options.hang_on = Some(v);
            }
            "--no-adbkeyboard" => options.adb_keyboard = false,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let listen = listen.ok_or("--listen 127.0.0.1:PORT is required")?;
    Ok(Some((listen, options)))
}

fn main() -> ExitCode {
    let (listen, options) = match parse(std::env::args().skip(1)) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("openphone-fake-adbd: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("openphone-fake-adbd: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let device = match FakeAdbd::start(listen, options).await {
            Ok(device) => device,
            Err(e) => {
                eprintln!("openphone-fake-adbd: {e}");
                return ExitCode::FAILURE;
            }
        };
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, "listening on {}", device.addr());
        let _ = stdout.flush();
        std::future::pending::<()>().await;
        ExitCode::SUCCESS
    })
}
