//! The README's quick start runs as written (issue 12): its `sh` blocks are parsed out of
//! README.md and every command is run through `sh` with the built `openphone` first on PATH,
//! a fresh data directory (`OPENPHONE_DATA_DIR`) and a free port (`OPENPHONE_LISTEN`), so the
//! walkthrough cannot drift from what works. `openphone serve` stays up like the terminal it
//! is started in; a command that waits for a confirmation keeps waiting while the next ones
//! run; `<id>` is the confirmation id it printed.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::harness::terminate;
use super::mcp_harness::{finish, python, repo_root};

/// The fenced blocks of the README's "Quick start" section: (info string, lines).
fn quick_start_blocks() -> Vec<(String, Vec<String>)> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("\n## Quick start\n")
        .expect("README.md has a `## Quick start` section");
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut blocks = Vec::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for line in section.lines() {
        match (line.strip_prefix("```"), open.take()) {
            (Some(info), None) => open = Some((info.trim().to_owned(), Vec::new())),
            (Some(_), Some(block)) => blocks.push(block),
            (None, Some((info, mut lines))) => {
                lines.push(line.to_owned());
                open = Some((info, lines));
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "an unclosed block in the quick start");
    blocks
}

/// A shell line without its trailing `# comment` (a `#` after a blank, outside quotes).
fn without_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && previous.is_whitespace() => return line[..i].trim_end(),
            None => {}
        }
        previous = c;
    }
    line.trim_end()
}

/// Whether `line` fits `pattern`, where `…` stands for any text.
fn fits(pattern: &str, line: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('…').collect();
    let mut rest = line;
    for (i, piece) in pieces.iter().enumerate() {
        if i == 0 {
            let Some(after) = rest.strip_prefix(piece) else {
                return false;
            };
            rest = after;
        } else if i == pieces.len() - 1 {
            return rest.ends_with(piece);
        } else {
            let Some(at) = rest.find(piece) else {
                return false;
            };
            rest = &rest[at + piece.len()..];
        }
    }
    rest.is_empty()
}

/// One README command started through `sh`.
struct Started {
    line: String,
    child: Child,
    stdout: std::thread::JoinHandle<String>,
    stderr: Vec<String>,
    lines: std::io::Lines<BufReader<std::process::ChildStderr>>,
}

impl Started {
    fn finish(mut self) -> (i32, String, String) {
        for line in self.lines.by_ref() {
            self.stderr.push(line.unwrap());
        }
        let code = self.child.wait().unwrap().code().unwrap();
        (code, self.stdout.join().unwrap(), self.stderr.join("\n"))
    }
}

/// The daemon's terminal: a test that fails half-way must not leave the daemon behind.
struct Terminal(Child);

impl Drop for Terminal {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

struct Shell {
    path: String,
    data: PathBuf,
    home: PathBuf,
}

impl Shell {
    fn command(&self, line: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", line])
            .env("PATH", &self.path)
            .env("OPENPHONE_DATA_DIR", &self.data)
            .env("OPENPHONE_LISTEN", "127.0.0.1:0")
            .env("HOME", &self.home)
            .env_remove("XDG_DATA_HOME")
            .stdin(Stdio::null());
        cmd
    }

    /// The daemon's own terminal: `exec`, so the pid is the daemon's.
    fn daemon(&self, line: &str) -> Child {
        self.command(&format!("exec {line}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn start(&self, line: &str) -> Started {
        let mut child = self
            .command(line)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            stdout.read_to_string(&mut text).unwrap();
            text
        });
        let lines = BufReader::new(child.stderr.take().unwrap()).lines();
        Started {
            line: line.to_owned(),
            child,
            stdout,
            stderr: Vec::new(),
            lines,
        }
    }
}

#[test]
fn the_readme_quick_start_runs_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_openphone")).parent().unwrap();
    let shell = Shell {
        path: format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        data: tmp.path().join("data"),
        home: tmp.path().join("home"),
    };
    std::fs::create_dir_all(&shell.home).unwrap();

    let blocks = quick_start_blocks();
    let commands: Vec<String> = blocks
        .iter()
        .filter(|(info, _)| info == "sh")
        .flat_map(|(_, lines)| lines.iter().map(|l| without_comment(l).to_owned()))
        .filter(|l| !l.is_empty())
        .collect();
    let notice: Vec<String> = blocks
        .iter()
        .find(|(info, _)| info == "text")
        .expect("the quick start shows what a waiting command says")
        .1
        .clone();
    assert_eq!(
        commands.first().map(String::as_str),
        Some("cargo install --path crates/cli"),
        "the walkthrough starts by installing the binary this test runs"
    );

    let mut daemon: Option<Terminal> = None;
    let mut waiting: Vec<Started> = Vec::new();
    let mut id: Option<String> = None;
    let mut outputs: Vec<(String, String)> = Vec::new();
    for line in &commands[1..] {
        assert!(
            line.starts_with("openphone "),
            "not an openphone command: {line}"
        );
        if line == "openphone serve" {
            // The daemon's terminal: it stays up; the others wait for it to be ready.
            let child = shell.daemon(line);
            let pid = child.id();
            daemon = Some(Terminal(child));
            let ready = (0..1500).any(|_| {
                let info = std::fs::read_to_string(shell.data.join("endpoint.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok());
                let ok = info.is_some_and(|i| i["pid"] == pid);
                if !ok {
                    std::thread::sleep(Duration::from_millis(20));
                }
                ok
            });
            assert!(ready, "`openphone serve` did not become ready");
            continue;
        }
        let line = match &id {
            Some(id) => line.replace("<id>", id),
            None => {
                assert!(!line.contains("<id>"), "no confirmation id yet for: {line}");
                line.clone()
            }
        };
        let mut started = shell.start(&line);
        // Read stderr until the command ends, or says that it waits for a confirmation: then
        // it stays waiting, like its terminal, and the next commands run beside it.
        let mut waits = false;
        while let Some(err) = started.lines.next() {
            let err = err.unwrap();
            started.stderr.push(err.clone());
            if err.starts_with("waiting for your confirmation") {
                for _ in 1..notice.len() {
                    let more = started.lines.next().unwrap().unwrap();
                    started.stderr.push(more);
                }
                waits = true;
                break;
            }
        }
        if waits {
            for (pattern, said) in notice.iter().zip(&started.stderr) {
                assert!(
                    fits(pattern, said),
                    "README says {pattern:?}, stderr {said:?}"
                );
            }
            let id_line = &started.stderr[1];
            let printed = id_line
                .trim()
                .strip_prefix("id: ")
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("no id in {id_line:?}"));
            id = Some(printed.to_owned());
            waiting.push(started);
            continue;
        }
        let (code, out, err) = started.finish();
        assert_eq!(code, 0, "{line}\nstdout: {out}\nstderr: {err}");
        outputs.push((line, out));
    }
    assert!(
        id.is_some(),
        "the walkthrough makes a call that waits for a confirmation"
    );
    for started in waiting {
        let line = started.line.clone();
        let (code, out, err) = started.finish();
        assert_eq!(code, 0, "{line}\nstdout: {out}\nstderr: {err}");
        assert!(
            out.contains("status: ok") && out.contains(r#""effect": "opened Messages""#),
            "the README's promise about {line}: {out}"
        );
    }

    let output = |prefix: &str| -> &str {
        &outputs
            .iter()
            .find(|(line, _)| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("the quick start no longer runs {prefix}"))
            .1
    };
    // The host configuration works: the Python `mcp` client, launched the way the printed
    // snippet says, reads the phone through it.
    let config: Value = serde_json::from_str(output("openphone mcp config claude-desktop"))
        .expect("mcp config prints JSON");
    let server = &config["mcpServers"]["openphone"];
    let mut launch = vec![server["command"].as_str().unwrap().to_owned()];
    launch.extend(
        server["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned()),
    );
    let host = Command::new(python())
        .arg(repo_root().join("tests/clients/py/mcp_drive.py"))
        .args(["--transport", "stdio", "--server", &launch.join(" ")])
        .args(["--mode", "legacy", "--call", "openphone_screen_get"])
        .args(["--args", r#"{"reason":"the host looks"}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let answer = finish(host);
    assert_eq!(answer["is_error"], false, "{answer}");
    // The effect on the phone and in the audit.
    assert!(
        output("openphone tools invoke openphone.screen.get").contains("com.android.messaging"),
        "Messages is in the foreground"
    );
    assert!(
        output("openphone audit export").contains(r#""confirmation":"approved""#),
        "the approval is in the audit log"
    );
    assert!(output("openphone audit verify").contains("intact"));

    let mut daemon = daemon.expect("the walkthrough starts the daemon");
    terminate(&mut daemon.0);
}
