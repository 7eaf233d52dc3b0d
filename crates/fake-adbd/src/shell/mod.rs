//! The commands the fake device answers on `shell:` and `exec:` streams, with Android's own
//! output formats, each backed by the simulated phone's manifest commands.

mod am;
mod calendar_write;
mod content;
mod dumpsys;
mod input;
mod png_scale;
mod system;
pub mod uiautomator;
pub mod words;

use std::io::Write as _;
use std::sync::Mutex;

use base64::Engine as _;
use serde_json::json;

use crate::Options;
use crate::phone::Phone;

/// What a command answers.
#[derive(Debug)]
pub enum Reply {
    /// Bytes to write to the stream, then close it.
    Output(Vec<u8>),
    /// Never answer (`--hang-on`): the stream stays open until the peer closes it.
    Hang,
}

impl Reply {
    fn text(text: impl Into<String>) -> Self {
        Self::Output(text.into().into_bytes())
    }
}

/// The shell: the phone, the options and the input log.
#[derive(Debug)]
pub struct Shell {
    phone: Phone,
    options: Options,
    log: Option<Mutex<std::fs::File>>,
    /// The selected input method (`ime set`).
    ime: Mutex<String>,
    /// Files commands wrote (`uiautomator dump FILE`), by path.
    files: Mutex<std::collections::HashMap<String, String>>,
}

/// Where `uiautomator dump` writes without a path.
const DEFAULT_DUMP: &str = "/sdcard/window_dump.xml";

/// Whether a command changes the phone (and so goes to `--log`).
fn is_input(words: &[String]) -> bool {
    let first = words.first().map(String::as_str);
    let second = words.get(1).map(String::as_str);
    match first {
        Some("input" | "am" | "monkey") => true,
        Some("content") => matches!(second, Some("insert" | "update" | "delete")),
        Some("cmd") => second == Some("statusbar"),
        _ => false,
    }
}

impl Shell {
    /// A shell over `phone`; opens the `--log` file for appending.
    pub fn new(phone: Phone, options: Options) -> Result<Self, String> {
        let log = match &options.log {
            None => None,
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("cannot open the log file {}: {e}", path.display()))?,
            )),
        };
        let ime = if options.adb_keyboard {
            am::ADB_KEYBOARD_IME
        } else {
            am::LATIN_IME
        };
        Ok(Self {
            phone,
            options,
            log,
            ime: Mutex::new(ime.to_owned()),
            files: Mutex::default(),
        })
    }

    /// The phone behind the shell.
    pub fn phone(&self) -> &Phone {
        &self.phone
    }

    /// The options the device runs with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The selected input method.
    pub fn ime(&self) -> String {
        self.ime
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set_ime(&self, id: &str) {
        *self
            .ime
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = id.to_owned();
    }

    fn files(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, String>> {
        self.files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record(&self, line: &str) {
        let Some(log) = &self.log else { return };
        let mut file = log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // One command per line, as received; only a line break inside a (quoted) argument is
        // written as `\n` (`\r` as `\r`) so that it cannot split the line.
        let line = line.replace('\n', "\\n").replace('\r', "\\r");
        if let Err(e) = writeln!(file, "{line}").and_then(|()| file.flush()) {
            eprintln!("openphone-fake-adbd: cannot append to the log: {e}");
        }
    }

    /// Answers one service request (the OPEN payload, e.g. `shell:wm size`). `None` when the
    /// service is not one this device offers (the stream is refused, as adbd does).
    pub async fn service(&self, service: &str) -> Option<Reply> {
        let line = service
            .strip_prefix("shell:")
            .or_else(|| service.strip_prefix("exec:"))?;
        let words = match words::split(line) {
            Ok(words) => words,
            Err(why) => return Some(Reply::text(format!("/system/bin/sh: {why}\n"))),
        };
        if is_input(&words) {
            self.record(line);
        }
        if let Some(prefix) = &self.options.hang_on
            && line.trim_start().starts_with(prefix.as_str())
        {
            return Some(Reply::Hang);
        }
        Some(self.run(&words).await)
    }

    async fn run(&self, words: &[String]) -> Reply {
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        match args.as_slice() {
            [] => Reply::text(""),
            ["echo", rest @ ..] => Reply::text(format!("{}\n", rest.join(" "))),
            ["true"] => Reply::text(""),
            ["getprop", rest @ ..] => Reply::text(system::getprop(&self.options, rest)),
            ["wm", "size"] => match self.phone.size().await {
                Ok((w, h)) => Reply::text(format!("Physical size: {w}x{h}\n")),
                Err(e) => Reply::text(format!("Error: {e}\n")),
            },
            ["uiautomator", "dump", "/dev/tty"] => match self.phone.screen().await {
                Ok(screen) => {
                    let mut out = uiautomator::dump(&screen);
                    out.push_str(uiautomator::DUMPED_TO_TTY);
                    Reply::text(out)
                }
                Err(e) => Reply::text(format!("ERROR: could not get idle state: {e}\n")),
            },
            // Without /dev/tty uiautomator writes a file (default /sdcard/window_dump.xml) that
            // tools then `cat`.
            ["uiautomator", "dump", rest @ ..] if rest.len() <= 1 => {
                let path = rest.first().copied().unwrap_or(DEFAULT_DUMP);
                match self.phone.screen().await {
                    Ok(screen) => {
                        self.files()
                            .insert(path.to_owned(), uiautomator::dump(&screen));
                        Reply::text(format!("UI hierchary dumped to: {path}\n"))
                    }
                    Err(e) => Reply::text(format!("ERROR: could not get idle state: {e}\n")),
                }
            }
            ["uiautomator", ..] => {
                Reply::text("Error: openphone-fake-adbd answers only `uiautomator dump [FILE]`\n")
            }
            ["cat", paths @ ..] if !paths.is_empty() => {
                let files = self.files();
                let out: String = paths
                    .iter()
                    .map(|p| match files.get(*p) {
                        Some(text) => text.clone(),
                        None => format!("cat: {p}: No such file or directory\n"),
                    })
                    .collect();
                Reply::text(out)
            }
            ["rm", rest @ ..] => {
                let mut files = self.files();
                for path in rest.iter().filter(|p| !p.starts_with('-')) {
                    files.remove(*path);
                }
                Reply::text("")
            }
            ["screencap", "-p"] => self.screencap().await,
            ["screencap", ..] => {
                Reply::text("Error: openphone-fake-adbd answers only `screencap -p` (PNG)\n")
            }
            ["input", rest @ ..] => {
                Reply::text(input::input(&self.phone, &self.options, rest).await)
            }
            [command, ..] => self.more(command, &args).await,
        }
    }

    async fn screencap(&self) -> Reply {
        let shot = self
            .phone
            .call(
                "openphone.screen.get",
                json!({ "include_screenshot": true, "include_ui_tree": false }),
            )
            .await;
        let shot = match shot {
            Ok(shot) => shot,
            Err(e) => return Reply::text(format!("Error: screencap failed: {e}\n")),
        };
        let data = shot["screenshot"]["data_base64"].as_str().unwrap_or("");
        let png = match base64::engine::general_purpose::STANDARD.decode(data) {
            Ok(png) if !png.is_empty() => png,
            Ok(_) | Err(_) => {
                return Reply::text("Error: screencap: the simulator returned no PNG\n");
            }
        };
        let size = |key: &str| {
            shot["screenshot"][key]
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0)
        };
        match png_scale::to_screen_size(&png, size("screen_width"), size("screen_height")) {
            Ok(png) => Reply::Output(png),
            Err(e) => Reply::text(format!("Error: screencap: {e}\n")),
        }
    }

    async fn more(&self, command: &str, args: &[&str]) -> Reply {
        match system::run(self, args).await {
            Some(out) => Reply::text(out),
            None => Reply::text(format!(
                "/system/bin/sh: {command}: inaccessible or not found\n"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_input;

    fn words(line: &str) -> Vec<String> {
        super::words::split(line).expect("splits")
    }

    #[test]
    fn only_commands_that_change_the_phone_are_inputs() {
        for line in [
            "input tap 1 2",
            "am start -a android.intent.action.VIEW -d https://x",
            "monkey -p com.android.settings 1",
            "content insert --uri content://com.android.calendar/events",
            "cmd statusbar collapse",
        ] {
            assert!(is_input(&words(line)), "{line}");
        }
        for line in [
            "getprop",
            "wm size",
            "content query --uri x",
            "dumpsys battery",
            "cmd package list",
        ] {
            assert!(!is_input(&words(line)), "{line}");
        }
    }
}
