//! Rule `device`: only core holds or calls the phone. Outside the holders below, no non-test
//! code names the device handle (`PhoneDevice`, `SimPhone`) or glob-imports the device crate;
//! every other crate reaches the phone through `ToolBridge`. The device crate's data types
//! (`DeviceError`, `DeviceEvent`, `SimState`, …) are plain values and stay importable.

use crate::{Tree, Violation, has_word};

pub const RULE: &str = "device";

/// Where the device may be held, and why.
pub const HOLDERS: &[(&str, &str)] = &[
    ("crates/core/", "the bridge holds the device"),
    ("crates/device/", "the device itself"),
    (
        "crates/fake-adbd/",
        "the fake ADB device answers shell commands from its own simulated phone",
    ),
    (
        "crates/adb/",
        "the ADB backend is a PhoneDevice (a real Android phone)",
    ),
    ("crates/server/src/daemon.rs", "the daemon's construction"),
    (
        "crates/server/src/phones.rs",
        "the daemon's construction: its phones, by id (`--device`, `[[devices]]`)",
    ),
    (
        "crates/server/src/sim_state.rs",
        "the daemon's construction opens the simulated phone from its saved state and saves it",
    ),
    (
        "crates/cli/src/bench/bridge.rs",
        "`openphone bench bridge` constructs its own in-process bridge, like the daemon",
    ),
    (
        "crates/goals/src/sim.rs",
        "`openphone goals simulate` constructs its own simulated phone and bridge",
    ),
];

/// The names of the device handle.
const HANDLES: &[&str] = &["PhoneDevice", "SimPhone"];

pub fn check(tree: &Tree) -> Vec<Violation> {
    let mut out = Vec::new();
    for file in tree.rust() {
        if !file.path.starts_with("crates/")
            || file.is_test_file()
            || HOLDERS.iter().any(|(p, _)| file.path.starts_with(p))
        {
            continue;
        }
        for line in file.lines().iter().filter(|l| !l.in_test) {
            let named = HANDLES.iter().find(|h| has_word(&line.bare, h));
            let glob = line.bare.replace(' ', "").contains("openphone_device::*");
            let what = match (named, glob) {
                (Some(handle), _) => format!("`{handle}`"),
                (None, true) => "a glob import of openphone_device".to_owned(),
                (None, false) => continue,
            };
            out.push(Violation {
                rule: RULE,
                path: file.path.clone(),
                line: line.no,
                message: format!(
                    "{what} outside core: reach the phone through ToolBridge (holders: rules/device.rs)"
                ),
            });
        }
    }
    out
}
