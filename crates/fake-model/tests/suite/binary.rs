use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Kills the fake when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn post(addr: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn serves_a_script_file_and_prints_its_url_first() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"replies": [{"text": "scripted hello"}, {"status": {"code": 429, "retry_after": "2"}}],
            "fallback": {"tool_call": {"name": "phone_ui_tap", "arguments": {"x": 1}}}}"#,
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_openphone-fake-model"))
        .args(["--listen", "127.0.0.1:0", "--script"])
        .arg(&script)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Running(child);
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim();
    let addr = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .unwrap_or_else(|| panic!("unexpected first line {url:?}"));

    let request = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let first = post(addr, request);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.contains("scripted hello"), "{first}");
    let second = post(addr, request);
    assert!(second.starts_with("HTTP/1.1 429"), "{second}");
    assert!(
        second.to_ascii_lowercase().contains("retry-after: 2"),
        "{second}"
    );
    let third = post(addr, request);
    assert!(third.contains("phone_ui_tap"), "{third}");
    assert!(
        third.contains("\"finish_reason\":\"tool_calls\""),
        "{third}"
    );
}

#[test]
fn refuses_a_bad_script_file_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.json");
    std::fs::write(&script, r#"[{"text": "ok"}, {"sing": "la"}]"#).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_openphone-fake-model"))
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("reply 2"), "{stderr}");
    assert!(stderr.contains("sing"), "{stderr}");
}
