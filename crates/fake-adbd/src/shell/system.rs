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
        31 => "12",
        32 => "12L",
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

/// The remaining commands; `None` for a command the device does not have.
pub async fn run(shell: &Shell, args: &[&str]) -> Option<String> {
    let out = match args {
        ["am", rest @ ..] => super::am::am(shell, rest).await,
        ["monkey", rest @ ..] => super::am::monkey(shell, rest).await,
        ["pm", rest @ ..] => super::am::pm(shell, rest).await,
        ["ime", rest @ ..] => super::am::ime(shell, rest),
        ["settings", "get", "secure", "default_input_method"] => format!("{}\n", shell.ime()),
        ["dumpsys", rest @ ..] => super::dumpsys::dumpsys(shell, rest).await,
        ["cmd", rest @ ..] => super::dumpsys::cmd(shell, rest).await,
        ["content", rest @ ..] => super::content::content(shell, rest).await,
        _ => return None,
    };
    Some(out)
}
