//! System properties and the commands beyond `input`/`uiautomator`/`screencap`.

use super::Shell;
use crate::Options;

/// The Android release for an SDK level (what `ro.build.version.release` says).
fn release(sdk: u32) -> &'static str {
    match sdk {
        0..=25 => "7.1.2",
        26 => "8.0.0",
        27 => "8.1.0",
        28 => "9",
        29 => "10",
        30 => "11",
        31 | 32 => "12",
        33 => "13",
        34 => "14",
        35 => "15",
        _ => "16",
    }
}

fn props(options: &Options) -> Vec<(&'static str, String)> {
    let mut props = vec![
        ("ro.build.version.release", release(options.sdk).to_owned()),
        ("ro.build.version.sdk", options.sdk.to_string()),
        ("ro.build.type", "userdebug".to_owned()),
        ("ro.product.brand", "openphone".to_owned()),
        ("ro.product.device", "fake".to_owned()),
        ("ro.product.manufacturer", "OpenPhone".to_owned()),
        ("ro.product.model", "OpenPhone Fake".to_owned()),
        ("ro.product.name", "openphone_fake".to_owned()),
        ("ro.serialno", "openphone-fake".to_owned()),
        ("ro.sf.lcd_density", "420".to_owned()),
        ("sys.boot_completed", "1".to_owned()),
        ("persist.sys.locale", "en-US".to_owned()),
    ];
    props.sort();
    props
}

/// `getprop` (every property, `[name]: [value]` lines, sorted) or `getprop NAME` (the value,
/// an empty line when unset).
pub fn getprop(options: &Options, args: &[&str]) -> String {
    let props = props(options);
    match args.first() {
        None => props
            .iter()
            .map(|(k, v)| format!("[{k}]: [{v}]\n"))
            .collect(),
        Some(name) => {
            let value = props
                .iter()
                .find(|(k, _)| k == name)
                .map_or("", |(_, v)| v.as_str());
            format!("{value}\n")
        }
    }
}

/// `ps -e`: the system's processes and the app in the foreground.
async fn ps(shell: &Shell) -> String {
    let mut out = String::from(
        "USER           PID  PPID     VSZ    RSS WCHAN            ADDR S NAME\nroot             1     0 10904412 11336 0                  0 S init\nsystem         612     1 14862516 98304 0                  0 S system_server\nu0_a45        1201   612 14122188 81920 0                  0 S com.android.systemui\nshell         4242  4240 10780200  3840 0                  0 R ps\n",
    );
    if let Ok(status) = shell
        .phone()
        .call("openphone.device.status", serde_json::json!({}))
        .await
        && let Some(package) = status["device"]["foreground"]["package"].as_str()
    {
        out.push_str(&format!(
            "u0_a101       5120   612 14022188 65536 0                  0 S {package}\n"
        ));
    }
    out
}

/// The remaining commands; `None` for a command the device does not have.
pub async fn run(shell: &Shell, args: &[&str]) -> Option<String> {
    let out = match args {
        ["am", rest @ ..] => super::am::am(shell, rest).await,
        ["monkey", rest @ ..] => super::am::monkey(shell, rest).await,
        ["pm", rest @ ..] => super::am::pm(shell, rest).await,
        ["ime", rest @ ..] => super::am::ime(shell, rest),
        ["settings", "get", "secure", "default_input_method"] => format!("{}\n", shell.ime()),
        // The simulated phone is portrait only, with auto-rotation off.
        ["settings", "get", "system", "user_rotation" | "accelerometer_rotation"] => "0\n".to_owned(),
        ["settings", "get", _, _] => "null\n".to_owned(),
        ["settings", "put", "system", "accelerometer_rotation", "0"] => String::new(),
        ["settings", ..] => "Error: openphone-fake-adbd answers `settings get NAMESPACE KEY` (and keeps auto-rotation off)\n".to_owned(),
        ["wm", "density"] => "Physical density: 420\n".to_owned(),
        ["cmd", "package", "query-activities", rest @ ..] => {
            super::am::query_activities(shell, rest).await
        }
        ["dumpsys", "SurfaceFlinger", "--display-id"] => {
            "Display 4619827259835644672 (HWC display 0): port=0 pnpId=OPF displayName=\"OpenPhone Fake\"\n".to_owned()
        }
        ["ps", ..] => ps(shell).await,
        ["dumpsys", rest @ ..] => super::dumpsys::dumpsys(shell, rest).await,
        ["cmd", rest @ ..] => super::dumpsys::cmd(shell, rest).await,
        ["content", rest @ ..] => super::content::content(shell, rest).await,
        _ => return None,
    };
    Some(out)
}
