//! Issue 31, the user's side of the set-up, driven as a user would with real processes: the
//! config file found at the XDG default and through `OPENPHONE_CONFIG` (HOME and
//! XDG_CONFIG_HOME pointed at temp dirs), `mcp serve --autostart` starting the daemon with
//! that config, `config check`, `doctor`, `stop`, and `ask` against a model server that is
//! down.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use openphone_fake_model::FakeModel;
use serde_json::Value;

use super::harness::TOKEN;
use super::support::openphone;

/// A user's home: HOME, XDG_CONFIG_HOME (and nothing of the real user's environment that
/// names a config) in a temp dir.
struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    xdg: PathBuf,
    data: PathBuf,
}

impl Home {
    fn new() -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let xdg = tmp.path().join("xdg-config");
        let data = tmp.path().join("data");
        std::fs::create_dir_all(&home).unwrap();
        Home {
            home,
            xdg,
            data,
            _tmp: tmp,
        }
    }

    /// `openphone args…` as this user (no `--data-dir` added).
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = openphone();
        cmd.args(args)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.xdg)
            .env("OPENPHONE_DATA_DIR", &self.data)
            .env_remove("OPENPHONE_CONFIG")
            .env_remove("OPENPHONE_LISTEN")
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let mut cmd = self.cmd(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    fn default_config(&self) -> PathBuf {
        self.xdg.join("openphone/config.toml")
    }

    /// Starts `serve` (no `--config`) on a free port with `env`, and waits until it is ready.
    fn serve(&self, env: &[(&str, &str)]) -> Daemon {
        let mut cmd = self.cmd(&["serve", "--listen", "127.0.0.1:0"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let daemon = Daemon {
            child: Some(child),
            data: self.data.clone(),
        };
        wait_ready(&self.data);
        daemon
    }
}

/// A daemon this test started (directly or through `--autostart`): SIGTERM when dropped.
struct Daemon {
    child: Option<std::process::Child>,
    data: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = endpoint(&self.data).and_then(|e| e["pid"].as_u64()) {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}

fn endpoint(data: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(data.join("endpoint.json")).ok()?;
    serde_json::from_str(&text).ok()
}

fn wait_ready(data: &Path) {
    // Up to 30 s: 1500 polls 20 ms apart (counted, so no clock is read).
    for _ in 0..1500 {
        if endpoint(data).is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the daemon did not become ready");
}

fn runtime_config() -> String {
    format!("[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\ngrants = [\"safe_read\"]\n")
}

/// The runtime ids the running daemon lists.
fn runtimes(home: &Home) -> Vec<String> {
    let (code, out, err) = home.run(&["runtimes", "list", "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Issue 31 (2): there was no default location and no environment variable, so a daemon
/// started without `--config` had no model. `config path` says which file and why, and
/// `serve` without `--config` reads it.
#[test]
fn the_config_file_is_found_at_the_xdg_default_and_through_openphone_config() {
    let home = Home::new();
    let path_json = |env: &[(&str, &str)]| -> Value {
        let (code, out, err) = home.run(&["config", "path", "--json"], env);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    let none = path_json(&[]);
    assert_eq!(none["source"], "none", "{none}");
    assert_eq!(
        none["default_path"],
        home.default_config().display().to_string()
    );
    let (_, text, _) = home.run(&["config", "path"], &[]);
    assert!(
        text.contains("none") && text.contains("config.toml"),
        "{text}"
    );

    std::fs::create_dir_all(home.default_config().parent().unwrap()).unwrap();
    std::fs::write(home.default_config(), runtime_config()).unwrap();
    let found = path_json(&[]);
    assert_eq!(found["source"], "default", "{found}");
    assert_eq!(found["path"], home.default_config().display().to_string());
    {
        let _daemon = home.serve(&[]);
        assert!(runtimes(&home).contains(&"hermes".to_owned()));
    }

    // Without XDG_CONFIG_HOME: ~/.config/openphone/config.toml.
    let (_, out, _) = home.run(&["config", "path", "--json"], &[("XDG_CONFIG_HOME", "")]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["default_path"],
        home.home
            .join(".config/openphone/config.toml")
            .display()
            .to_string()
    );

    // OPENPHONE_CONFIG wins over the default; --config over both.
    let other = home.home.join("other.toml");
    std::fs::write(
        &other,
        runtime_config().replace("\"hermes\"", "\"from-env\""),
    )
    .unwrap();
    let env = [("OPENPHONE_CONFIG", other.to_str().unwrap())];
    let by_env = path_json(&env);
    assert_eq!(by_env["source"], "env", "{by_env}");
    {
        let _daemon = home.serve(&env);
        let ids = runtimes(&home);
        assert!(ids.contains(&"from-env".to_owned()), "{ids:?}");
        assert!(!ids.contains(&"hermes".to_owned()), "{ids:?}");
    }
    let (_, out, _) = home.run(&["config", "path", "--json", "--config", "/x/y.toml"], &env);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["source"], "flag");

    // A file OPENPHONE_CONFIG names that does not exist stops `serve`, naming it and who
    // named it.
    let (code, _, err) = home.run(
        &["serve", "--listen", "127.0.0.1:0"],
        &[("OPENPHONE_CONFIG", "/nonexistent/openphone.toml")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("/nonexistent/openphone.toml") && err.contains("OPENPHONE_CONFIG"),
        "{err}"
    );
}

/// Issue 31 (2): `mcp serve --autostart` started `serve` without `--config`, so that daemon
/// had no model and no runtimes. It now passes the config it resolved (and `--listen`).
#[test]
fn mcp_serve_autostart_starts_the_daemon_with_the_resolved_config() {
    let home = Home::new();
    std::fs::create_dir_all(home.default_config().parent().unwrap()).unwrap();
    std::fs::write(home.default_config(), runtime_config()).unwrap();
    let _daemon = Daemon {
        child: None,
        data: home.data.clone(),
    };
    // stdin at its end at once: it starts the daemon, connects, and leaves.
    let (code, _, err) = home.run(
        &["mcp", "serve", "--autostart", "--listen", "127.0.0.1:0"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    wait_ready(&home.data);
    assert!(runtimes(&home).contains(&"hermes".to_owned()));
    let log = std::fs::read_to_string(home.data.join("daemon.log")).unwrap_or_default();
    assert!(!log.contains("7788"), "it listens where it was told: {log}");
}

/// Issue 31 (6): `config check` validates, prints the effective settings with secrets masked,
/// and names the file and line of a problem (exit 1).
#[test]
fn config_check_masks_secrets_and_names_the_bad_line() {
    let home = Home::new();
    let file = home.home.join("openphone.toml");
    std::fs::write(&file, runtime_config()).unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = home.run(&["config", "check", "--config", path], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(path), "{out}");
    assert!(out.contains("runtimes[0].id = \"hermes\""), "{out}");
    assert!(out.contains("***") && !out.contains(TOKEN), "{out}");
    let (code, out, _) = home.run(&["config", "check", "--config", path, "--json"], &[]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["effective"]["runtimes"][0]["token"], "***", "{v}");

    // A misspelt key on line 4.
    std::fs::write(
        &file,
        format!(
            "{}\n[builtin]\nbase_ur = \"http://127.0.0.1:1/v1\"\n",
            runtime_config()
        ),
    )
    .unwrap();
    let (code, _, err) = home.run(&["config", "check", "--config", path], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("{path}:7")), "{err}");
    assert!(err.contains("base_ur"), "{err}");
    // A token too short for a runtime: a check after parsing, still given its line.
    std::fs::write(
        &file,
        "# my runtimes\n\n[[runtimes]]\nid = \"weak\"\ntoken = \"short\"\n",
    )
    .unwrap();
    let (code, out, _) = home.run(&["config", "check", "--config", path, "--json"], &[]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["line"], 4, "{v}");
    assert!(!out.contains("\"short\""), "{out}");
}

fn model_config(home: &Home, base_url: &str) -> PathBuf {
    let file = home.home.join("model.toml");
    std::fs::write(
        &file,
        format!("[builtin]\nbase_url = \"{base_url}\"\nmodel = \"fake-model\"\n"),
    )
    .unwrap();
    file
}

/// A loopback URL where nothing listens (a port that was just free).
fn down_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/v1")
}

/// Issue 31 (6): `doctor` is healthy (exit 0) with the daemon and the model up, and exit 1
/// naming the model's URL and the fix when the model server is down; `stop` stops the daemon
/// and says so when none runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_the_down_model_with_its_fix_and_stop_stops_the_daemon() {
    let home = Home::new();
    let fake = FakeModel::start().await;
    let file = model_config(&home, &fake.url());
    let env = [("OPENPHONE_CONFIG", file.to_str().unwrap())];
    let daemon = home.serve(&env);
    let (code, out, err) = home.run(&["doctor"], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("healthy"), "{out}");
    let (code, out, _) = home.run(&["doctor", "--json"], &env);
    assert_eq!(code, 0, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["healthy"], true);
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in ["config", "data_dir", "daemon", "model", "device"] {
        assert!(names.contains(&name), "{names:?}");
    }

    let down = down_url();
    let file = model_config(&home, &down);
    let env = [("OPENPHONE_CONFIG", file.to_str().unwrap())];
    let (code, out, _) = home.run(&["doctor"], &env);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("PROBLEM") && out.contains(&down), "{out}");
    assert!(out.contains("fix: start it"), "{out}");

    let (code, out, err) = home.run(&["stop"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("stopped the daemon"), "{out}");
    assert!(endpoint(&home.data).is_none(), "it cleaned up as on Ctrl-C");
    drop(daemon);
    let (code, out, _) = home.run(&["stop", "--json"], &[]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["was_running"], false);
    // And doctor says the daemon is down, with the command that starts it.
    let (code, out, _) = home.run(&["doctor"], &env);
    assert_eq!(code, 1);
    assert!(out.contains("openphone serve --data-dir"), "{out}");
}

/// Issue 31 (5): with the model server down, `ask` was silent for 20 s (five attempts with
/// backoff) and then did not say where it had tried. It now gives up after two attempts and
/// names the URL and what to start.
#[test]
fn ask_with_the_model_server_down_names_the_url_after_two_attempts() {
    let home = Home::new();
    let down = down_url();
    let file = model_config(&home, &down);
    let env = [("OPENPHONE_CONFIG", file.to_str().unwrap())];
    let _daemon = home.serve(&env);
    let (code, out, err) = home.run(&["ask", "hello", "--timeout-secs", "120"], &[]);
    assert_eq!(code, 1, "{out}{err}");
    // The run's failure is the reply (stdout); the reason code is on stderr.
    assert!(err.contains("model_unreachable"), "{err}");
    assert!(out.contains(&format!("{down}/chat/completions")), "{out}");
    assert!(out.contains("start the model server"), "{out}");
    assert!(out.contains("after 2 attempt(s)"), "{out}");
}

/// Issue 31 (2): "no model configured" did not say which file or flag; it now names the file
/// the daemon read (or that it found none, and where one belongs).
#[test]
fn without_a_model_ask_names_the_config_file_the_daemon_read() {
    let home = Home::new();
    {
        let _daemon = home.serve(&[]);
        let (code, _, err) = home.run(&["ask", "hello?"], &[]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("no config file"), "{err}");
        assert!(
            err.contains(&home.default_config().display().to_string()),
            "{err}"
        );
    }
    std::fs::create_dir_all(home.default_config().parent().unwrap()).unwrap();
    std::fs::write(home.default_config(), "# nothing yet\n").unwrap();
    let _daemon = home.serve(&[]);
    let (code, _, err) = home.run(&["ask", "hello?"], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "config file {} (found at the default location)",
            home.default_config().display()
        )),
        "{err}"
    );
}

/// Issue 31 (2): `devices list` (with no daemon) and `openclaw tools|doctor` read only the
/// file `--config` named, so without the flag they fell back to the defaults while `serve`
/// read `OPENPHONE_CONFIG`. They now resolve the file as `serve` does.
#[test]
fn devices_list_and_openclaw_tools_find_the_config_through_openphone_config() {
    let home = Home::new();
    let file = home.home.join("phones.toml");
    std::fs::write(
        &file,
        "[[devices]]\nid = \"work\"\nkind = \"sim\"\n\n[[devices]]\nid = \"home\"\nkind = \"sim\"\n",
    )
    .unwrap();
    // No adb on PATH and no adb server: the listing says so and still lists the config's phones.
    let no_adb = home.home.join("no-adb-bin");
    std::fs::create_dir_all(&no_adb).unwrap();
    let env = [
        ("OPENPHONE_CONFIG", file.to_str().unwrap()),
        ("PATH", no_adb.to_str().unwrap()),
        ("ANDROID_HOME", ""),
        ("ANDROID_ADB_SERVER_PORT", "1"),
    ];
    let (code, out, err) = home.run(&["devices", "list", "--json"], &env);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["daemon"], "not_running", "{v}");
    let ids: Vec<&str> = v["configured"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["work", "home"], "{v}");
    // Without the variable (and nothing at the default location): the default phone.
    let (code, out, err) = home.run(&["devices", "list", "--json"], &env[1..]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["configured"][0]["id"], "default", "{v}");

    // `openclaw tools` reads the same file, and names it and who named it.
    let (code, _, err) = home.run(&["openclaw", "tools"], &env);
    assert_ne!(code, 0);
    assert!(
        err.contains(file.to_str().unwrap())
            && err.contains("OPENPHONE_CONFIG")
            && err.contains("[openclaw]"),
        "{err}"
    );
}

/// Issue 31 (2): `status` did not say which config file the daemon read, so a daemon started
/// without it (by `--autostart` or a unit) looked fine. `status` names it, and `doctor` says
/// when it is not the file this shell resolves.
#[test]
fn status_names_the_daemons_config_and_doctor_says_when_it_differs() {
    let home = Home::new();
    let file = home.home.join("openphone.toml");
    std::fs::write(&file, runtime_config()).unwrap();
    let env = [("OPENPHONE_CONFIG", file.to_str().unwrap())];
    let _daemon = home.serve(&env);
    let (code, out, err) = home.run(&["status"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "config: config file {} (named by OPENPHONE_CONFIG)",
            file.display()
        )),
        "{out}"
    );
    let (code, out, err) = home.run(&["status", "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["config_path"], file.display().to_string(), "{v}");

    let check = |env: &[(&str, &str)]| -> Value {
        let (_, out, _) = home.run(&["doctor", "--json"], env);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "daemon_config")
            .unwrap_or_else(|| panic!("{v}"))
            .clone()
    };
    let same = check(&env);
    assert_eq!(same["status"], "ok", "{same}");
    // This shell resolves no file (nothing at the default location): they differ.
    let differs = check(&[]);
    assert_eq!(differs["status"], "problem", "{differs}");
    let detail = differs["detail"].as_str().unwrap();
    assert!(
        detail.contains(&file.display().to_string()) && detail.contains("no config file"),
        "{detail}"
    );
    assert!(
        differs["fix"].as_str().unwrap().contains("openphone stop"),
        "{differs}"
    );
    let (code, out, _) = home.run(&["doctor"], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("PROBLEM daemon_config"), "{out}");
}

/// Issue 31 (5): nothing counted down while a confirmation waited, and nothing said when it
/// expired. Driven on a real pseudo-terminal (util-linux `script`), since the countdown is
/// for terminals only, with a 3 s confirmation timeout that nobody answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_says_what_it_waits_for_and_when_the_confirmation_expired() {
    use openphone_fake_model::Script;
    let home = Home::new();
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call(
        "messages_send",
        serde_json::json!({"to": "+49 151 2345 6789", "body": "late",
                           "reason": "tell Alice you are late"}),
    ));
    fake.push(Script::text("Nobody approved it, so I did not send it."));
    let file = home.home.join("model.toml");
    std::fs::write(
        &file,
        format!(
            "[builtin]\nbase_url = \"{}\"\nmodel = \"fake-model\"\nconfirmation_timeout_secs = 3\n",
            fake.url()
        ),
    )
    .unwrap();
    let env = [("OPENPHONE_CONFIG", file.to_str().unwrap())];
    let _daemon = home.serve(&env);
    let bin = env!("CARGO_BIN_EXE_openphone");
    // `script`, with this user's environment (as `Home::cmd` sets it).
    let user = home.cmd(&[]);
    let mut script = Command::new("script");
    for (k, v) in user.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    let out = tokio::task::spawn_blocking(move || {
        script
            .args([
                "-qefc",
                &format!("'{bin}' ask 'tell Alice I am late'"),
                "/dev/null",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("waiting for your confirmation"), "{text}");
    assert!(text.contains("expires in "), "the countdown: {text}");
    assert!(
        text.contains("expired: nobody approved it in time"),
        "the expiry line: {text}"
    );
    assert!(text.contains("I did not send it"), "{text}");
}
