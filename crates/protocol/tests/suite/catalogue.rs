//! The shipped catalogue matches the totals of `runtime-protocol.md` §5.1, §4.6 and §6.

use std::collections::{BTreeMap, HashSet};

use openphone_protocol::{Confirmation, Direction, Executor, Exposure, Risk};

use super::support::registry;

fn count<T: Ord + Copy>(items: impl Iterator<Item = T>) -> BTreeMap<T, usize> {
    let mut m = BTreeMap::new();
    for i in items {
        *m.entry(i).or_default() += 1;
    }
    m
}

/// The upstream-compatible set: every command but this project's own additions.
struct Upstream;

impl Upstream {
    fn commands(&self) -> impl Iterator<Item = &'static openphone_protocol::Command> {
        registry().commands().filter(|c| !c.project)
    }
}

fn upstream_set() -> Upstream {
    Upstream
}

#[test]
fn command_totals_match_the_upstream_compatible_set() {
    let r = upstream_set();
    assert_eq!(r.commands().count(), 37);
    let names: usize = r.commands().map(|c| 1 + c.aliases.len()).sum();
    assert_eq!(names, 55, "names including aliases");
    assert_eq!(
        count(r.commands().map(|c| c.risk)),
        BTreeMap::from([(Risk::Low, 8), (Risk::Medium, 25), (Risk::High, 4)])
    );
    assert_eq!(
        count(r.commands().map(|c| c.confirmation)),
        BTreeMap::from([
            (Confirmation::None, 13),
            (Confirmation::AskBeforeAction, 20),
            (Confirmation::Always, 4)
        ])
    );
    assert_eq!(
        count(r.commands().map(|c| c.default_exposure)),
        BTreeMap::from([
            (Exposure::SafeRead, 4),
            (Exposure::PrivateRead, 9),
            (Exposure::Dangerous, 24)
        ])
    );
    let not_mcp: Vec<&str> = r
        .commands()
        .filter(|c| !c.mcp)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        not_mcp,
        ["openphone.messages.send", "openphone.calls.place"]
    );
    assert!(r.commands().all(|c| c.remote_runtime));
    assert!(
        r.commands()
            .all(|c| c.required_inputs().contains(&"reason"))
    );
}

#[test]
fn mutating_is_exactly_the_confirming_commands() {
    let r = registry();
    for c in r.commands() {
        assert_eq!(
            c.mutating,
            c.confirmation != Confirmation::None,
            "{}",
            c.name
        );
    }
    assert_eq!(upstream_set().commands().filter(|c| c.mutating).count(), 24);
}

#[test]
fn the_project_commands_are_the_goal_commands_shaped_like_the_job_commands() {
    let r = registry();
    let project: Vec<&str> = r
        .commands()
        .filter(|c| c.project)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        project,
        [
            "openphone.goals.list",
            "openphone.goals.get",
            "openphone.goals.create",
            "openphone.goals.plan",
            "openphone.goals.stop"
        ]
    );
    let job = |name: &str| r.resolve(name).unwrap();
    for c in r.commands().filter(|c| c.project) {
        let like = if c.mutating {
            job("openphone.jobs.create")
        } else {
            job("openphone.jobs.list")
        };
        assert_eq!(c.executor, Executor::Runtime, "{}", c.name);
        assert_eq!(c.category, like.category, "{}", c.name);
        assert_eq!(c.risk, like.risk, "{}", c.name);
        assert_eq!(c.capability, like.capability, "{}", c.name);
        assert_eq!(c.confirmation, like.confirmation, "{}", c.name);
        assert_eq!(c.default_exposure, like.default_exposure, "{}", c.name);
        assert!(c.mcp && c.remote_runtime, "{}", c.name);
        assert!(c.required_inputs().contains(&"reason"), "{}", c.name);
    }
}

#[test]
fn runtime_owned_commands_are_memory_watchers_and_jobs() {
    let r = registry();
    let runtime: HashSet<&str> = r
        .commands()
        .filter(|c| c.executor == Executor::Runtime)
        .map(|c| c.category.as_str())
        .collect();
    assert_eq!(runtime, HashSet::from(["memory", "watchers", "background"]));
    assert_eq!(
        r.commands()
            .filter(|c| c.executor == Executor::Runtime)
            .count(),
        13,
        "memory 2, watchers 3, jobs 3, goals 5"
    );
}

#[test]
fn names_aliases_and_model_tools_resolve_to_one_command() {
    let r = registry();
    for (input, canonical) in [
        ("openphone.messages.send", "openphone.messages.send"),
        ("sms.send", "openphone.messages.send"),
        ("messages_send", "openphone.messages.send"),
        ("  canvas.snapshot ", "openphone.screen.get"),
        ("get_screen", "openphone.screen.get"),
        ("callLog.search", "openphone.calls.search"),
        (
            "openphone.local.screen_understanding",
            "openphone.screen.understand_local",
        ),
        ("device.info", "openphone.device.status"),
    ] {
        assert_eq!(
            r.resolve(input).map(|c| c.name.as_str()),
            Some(canonical),
            "{input}"
        );
    }
    for unknown in ["", "SMS.SEND", "openphone.teleport", "sms"] {
        assert!(r.resolve(unknown).is_none(), "{unknown:?} must not resolve");
    }
    // every declared name resolves back to its own command
    for c in r.commands() {
        for n in c.all_names() {
            assert_eq!(r.resolve(n).unwrap().name, c.name);
        }
    }
}

#[test]
fn events_and_capabilities_totals() {
    let r = registry();
    assert_eq!(r.events().len(), 35); // upstream's 18 and 17 project additions
    assert_eq!(r.capabilities().len(), 25);
    assert_eq!(
        r.event("runtime.session.updated").map(|e| e.direction),
        Some(Direction::Bidirectional)
    );
    assert_eq!(
        r.event("runtime.tool.requested").map(|e| e.direction),
        Some(Direction::RuntimeToPhone)
    );
    let openclaw = &r.transport_mappings()[0];
    assert_eq!(
        (openclaw.runtime.as_str(), openclaw.transport.as_str()),
        ("openclaw", "node.event")
    );
    let online: Vec<&str> = openclaw
        .events
        .iter()
        .filter(|m| m.protocol == "runtime.presence.online")
        .map(|m| m.wire.as_str())
        .collect();
    assert_eq!(online, ["openphone.presence.online", "node.presence.alive"]);
    assert_eq!(
        r.capability("messages.send").map(|c| c.risk.as_str()),
        Some("critical")
    );
}

#[test]
fn every_command_has_its_own_description() {
    let r = registry();
    let mut seen = HashSet::new();
    for c in r.commands() {
        assert!(
            c.description.len() > 20,
            "{} needs a real description",
            c.name
        );
        assert!(
            seen.insert(c.description.as_str()),
            "{} repeats a description",
            c.name
        );
    }
}

#[test]
fn docs_name_every_manifest_rule() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md");
    let doc = std::fs::read_to_string(path).unwrap();
    for rule in openphone_protocol::Rule::ALL {
        assert!(
            doc.contains(&format!("`{}`", rule.id())),
            "docs/protocol.md misses rule {}",
            rule.id()
        );
    }
}
