//! OS-level confirmations through a real daemon (issue 30): the simulated phone's scenario has
//! apps that ask a permission on their first open. Under `trusted_actions` the open runs, the
//! permission prompt stays on the phone's screen and the runtime is answered
//! `needs_confirmation` / `framework_confirmation_required` until the user answers with
//! `openphone confirmations approve|deny`; a request the user approved still asks about its prompt.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{Runtime, Serve, TOKEN, cli_async};
use super::support::openphone;

/// hermes, allowed to run at `trusted_actions`.
fn config(dir: &Path) -> String {
    let path = dir.join("openphone.toml");
    std::fs::write(
        &path,
        format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\
             max_autonomy = \"trusted_actions\"\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

/// The demo scenario plus Lens, Maps and Scan, each asking one permission on its first open.
fn scenario(dir: &Path) -> String {
    let mut doc: Value =
        serde_json::from_str(openphone_device::sim::DEFAULT_SCENARIO).expect("demo scenario");
    let apps = doc["apps"].as_array_mut().expect("apps");
    for (package, label) in [
        ("com.example.lens", "Lens"),
        ("com.example.maps", "Maps"),
        ("com.example.scan", "Scan"),
    ] {
        apps.push(json!({ "package": package, "label": label }));
    }
    doc["system_dialogs"] = json!({ "permissions": [
        { "package": "com.example.lens", "permission": "camera" },
        { "package": "com.example.maps", "permission": "location" },
        { "package": "com.example.scan", "permission": "camera" }
    ]});
    let path = dir.join("dialogs.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `openphone serve --device sim:<scenario>` on a free port, ready.
// The child moves into `Serve`, whose Drop reaps it.
#[allow(clippy::zombie_processes)]
fn serve_scenario(data: &Path, config: &str, scenario: &str) -> Serve {
    let mut child = openphone()
        .args(["serve", "--listen", "127.0.0.1:0", "--config", config])
        .args(["--device", &format!("sim:{scenario}"), "--data-dir"])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Up to 30 s: 1500 polls 20 ms apart (counted, so no clock is read).
    for _ in 0..1500 {
        if let Ok(text) = std::fs::read_to_string(data.join("endpoint.json"))
            && let Ok(info) = serde_json::from_str::<Value>(&text)
            && info["pid"] == json!(child.id())
        {
            return Serve {
                url: info["url"].as_str().unwrap().to_owned(),
                child,
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the daemon did not start");
}

async fn invoke(rt: &mut Runtime, id: &str, tool: &str, params: Value, trusted: bool) -> Value {
    let mut req = json!({ "request_id": id, "tool": tool, "params": params,
                          "reason": "a step of the task", "wait": false });
    if trusted {
        req["autonomy"] = json!("trusted_actions");
    }
    let answer = rt.call("tools.invoke", req).await;
    answer["result"].clone()
}

async fn open(rt: &mut Runtime, id: &str, label: &str, trusted: bool) -> Value {
    invoke(
        rt,
        id,
        "openphone.app.open",
        json!({ "package_or_label": label }),
        trusted,
    )
    .await
}

async fn foreground(rt: &mut Runtime, id: &str) -> String {
    let screen = invoke(rt, id, "openphone.screen.get", json!({}), false).await;
    screen["result"]["package"]
        .as_str()
        .unwrap_or_else(|| panic!("{screen}"))
        .to_owned()
}

async fn home(rt: &mut Runtime, id: &str) {
    let r = invoke(
        rt,
        id,
        "openphone.input.press_key",
        json!({ "key": "home" }),
        true,
    )
    .await;
    assert_eq!(r["status"], "ok", "{r}");
}

async fn cli_json(args: &[&str], data: &Path) -> Value {
    let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    all.push("--json".into());
    let (code, out, err) = cli_async(all, data).await;
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn confirmation_id(result: &Value) -> String {
    result["result"]["confirmation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{result}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_prompt_waits_for_the_user_even_under_trusted_actions() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let serve = serve_scenario(&data, &config(tmp.path()), &scenario(tmp.path()));
    let mut rt = Runtime::connect(&serve.url).await;

    // Trusted: the open runs, the prompt is the user's.
    let asked = open(&mut rt, "r1", "Lens", true).await;
    assert_eq!(asked["status"], "needs_confirmation", "{asked}");
    assert_eq!(asked["error"]["code"], "framework_confirmation_required");
    let id = confirmation_id(&asked);
    let listed = cli_json(&["confirmations", "list"], &data).await;
    let text = listed.to_string();
    assert!(
        text.contains("Android asks: Allow Lens to take pictures and record video?"),
        "{listed}"
    );
    // The prompt stays on the screen, whatever the runtime reads or retries.
    assert_eq!(
        foreground(&mut rt, "r2").await,
        "com.android.permissioncontroller"
    );
    let retried = open(&mut rt, "r1", "Lens", true).await;
    assert_eq!(confirmation_id(&retried), id);
    assert_eq!(
        foreground(&mut rt, "r3").await,
        "com.android.permissioncontroller"
    );

    // The user approves: the prompt is answered once, the app is open.
    let approved = cli_json(&["confirmations", "approve", &id], &data).await;
    assert_eq!(approved["status"], "ok", "{approved}");
    assert_eq!(approved["result"]["os_dialog"]["answer"], "accepted");
    assert_eq!(approved["result"]["result"]["opened"], true);
    assert_eq!(foreground(&mut rt, "r4").await, "com.example.lens");
    // Granted: opening it again asks nothing.
    home(&mut rt, "r5").await;
    let again = open(&mut rt, "r6", "Lens", true).await;
    assert_eq!(again["status"], "ok", "{again}");

    // Deny: the prompt is dismissed, the permission stays denied and is not asked again.
    let asked = open(&mut rt, "r7", "Maps", true).await;
    assert_eq!(asked["error"]["code"], "framework_confirmation_required");
    let denied = cli_json(&["confirmations", "deny", &confirmation_id(&asked)], &data).await;
    assert_eq!(denied["status"], "denied", "{denied}");
    assert_eq!(
        denied["error"]["details"]["os_dialog"]["answer"],
        "dismissed"
    );
    assert_eq!(foreground(&mut rt, "r8").await, "com.example.maps");
    home(&mut rt, "r9").await;
    let reopened = open(&mut rt, "r10", "Maps", true).await;
    assert_eq!(reopened["status"], "ok", "{reopened}");

    // A request the user approved still asks about its prompt: the approval of the request
    // never presses the dialog (review finding 4); the dialog is a question of its own.
    let asked = open(&mut rt, "r11", "Scan", false).await;
    assert_eq!(
        asked["error"]["code"],
        "mutating_tool_requires_confirmation"
    );
    let approved = cli_json(
        &["confirmations", "approve", &confirmation_id(&asked)],
        &data,
    )
    .await;
    assert_eq!(
        approved["error"]["code"], "framework_confirmation_required",
        "{approved}"
    );
    let pending = cli_json(&["confirmations", "list"], &data).await;
    assert!(pending.to_string().contains("Android asks"), "{pending}");
    let pressed = cli_json(
        &["confirmations", "approve", &confirmation_id(&approved)],
        &data,
    )
    .await;
    assert_eq!(pressed["status"], "ok", "{pressed}");
    assert_eq!(pressed["result"]["os_dialog"]["answered_by"], "user");
    assert_eq!(foreground(&mut rt, "r12").await, "com.example.scan");
    drop(serve);
}
