//! `ToolBridge::creator_authority` (issue 28, item 5): the one computation of the authority the
//! built-in runtime works with on behalf of a creator.

use std::collections::BTreeMap;

use openphone_core::BridgeConfig;
use openphone_policy::{
    Autonomy, BackgroundRun, Caller, Context, ExposureGrants, RuntimeAuthorisation, ToolList,
    ToolPolicy, ToolSelector, Transport,
};

use super::support::{Harness, open_notes, registry, with};

fn configure(h: &Harness, hermes: RuntimeAuthorisation, tool_policy: ToolPolicy) {
    h.bridge.set_config(BridgeConfig {
        tool_policy,
        runtimes: Some(BTreeMap::from([
            (
                "builtin".to_owned(),
                Caller::builtin("daemon").authorisation(),
            ),
            ("hermes".to_owned(), hermes),
        ])),
    });
}

#[test]
fn a_runtimes_work_gets_the_intersection_and_the_users_gets_builtin() {
    let h = Harness::new();
    let hermes = RuntimeAuthorisation {
        enabled: true,
        grants: ExposureGrants {
            safe_read: true,
            private_read: false,
            dangerous: true,
        },
        max_autonomy: Autonomy::TrustedActions,
    };
    // hermes's own list denies screenshots; builtin's denies nothing.
    let mut policy = ToolPolicy::default();
    policy.runtimes.insert(
        "hermes".to_owned(),
        ToolList {
            deny: vec![ToolSelector::parse("openphone.screen.understand_local").unwrap()],
            ..ToolList::default()
        },
    );
    configure(&h, hermes, policy);
    let builtin = Caller::builtin("daemon");
    let command = |name: &str| registry().resolve(name).unwrap();

    let theirs = h.bridge.creator_authority(&builtin, "hermes");
    assert!(!theirs.is_users());
    assert_eq!(theirs.caller().runtime, "builtin");
    assert_eq!(theirs.caller().grants, hermes.grants);
    // The stricter ceiling: builtin's ask_before_action, not hermes's trusted_actions.
    assert_eq!(theirs.caller().max_autonomy, Autonomy::AskBeforeAction);
    assert!(
        !theirs.permits(command("openphone.messages.search")),
        "private_read"
    );
    assert!(
        !theirs.permits(command("openphone.screen.understand_local")),
        "hermes's tool policy"
    );
    assert!(theirs.permits(command("openphone.screen.get")));
    assert_eq!(
        theirs.job_context(7),
        Context::Background {
            run: BackgroundRun::Job {
                job_id: 7,
                on_behalf_of: Some("hermes".to_owned()),
            },
        }
    );

    for user in ["operator", "builtin"] {
        let mine = h.bridge.creator_authority(&builtin, user);
        assert!(mine.is_users(), "{user}");
        assert_eq!(mine.caller(), &builtin);
        assert!(mine.permits(command("openphone.messages.search")));
        assert_eq!(mine.job_context(7), Context::job(7));
    }

    // A creator no longer configured has no authority at all.
    let gone = h.bridge.creator_authority(&builtin, "openclaw");
    assert!(!gone.caller().enabled);
    assert!(!gone.permits(command("openphone.screen.get")));
}

/// Review finding 5: the elevation was looked up by the caller's runtime, so `openphone
/// elevate builtin --to trusted_actions` lifted every runtime's jobs — an `observe_only`
/// runtime's job, run as `builtin`, acted under `trusted_actions`. An elevation lifts only its
/// runtime's own foreground calls.
#[test]
fn elevating_builtin_lifted_every_runtimes_jobs() {
    let h = Harness::new();
    let observe_only = RuntimeAuthorisation {
        enabled: true,
        grants: ExposureGrants::ALL,
        max_autonomy: Autonomy::ObserveOnly,
    };
    let mut builtin_auth = Caller::builtin("daemon").authorisation();
    builtin_auth.max_autonomy = Autonomy::AskBeforeAction;
    h.bridge.set_config(BridgeConfig {
        tool_policy: ToolPolicy::default(),
        runtimes: Some(BTreeMap::from([
            ("builtin".to_owned(), builtin_auth),
            ("hermes".to_owned(), observe_only),
        ])),
    });
    let operator = Caller::operator("cli", Transport::Cli, "user");
    h.bridge
        .elevate(&operator, "builtin", "trusted_actions", 3600)
        .expect("elevated");
    let builtin = Caller::builtin("daemon").with_authorisation(builtin_auth);
    let open = |session: &str| {
        with(open_notes("e1"), |r| {
            r.autonomy = Some("trusted_actions".into());
            r.runtime_session_id = session.to_owned();
        })
    };
    let effective = |caller: &Caller, session: &str, context: Context| {
        h.bridge
            .explain(caller, open(session), context)
            .expect("explained")
            .effective_autonomy
    };
    // The user's own assistant in the foreground: elevated.
    assert_eq!(
        effective(&builtin, "chat", Context::Interactive),
        Autonomy::TrustedActions
    );
    // hermes's job, run by builtin: never under builtin's elevation.
    let theirs = h.bridge.creator_authority(&builtin, "hermes");
    for (session, context) in [
        ("background-job:1", theirs.job_context(1)),
        ("background-job:1", Context::Interactive),
        ("goal:g1", Context::goal("g1")),
        ("watcher:3", Context::Interactive),
    ] {
        assert_ne!(
            effective(theirs.caller(), session, context.clone()),
            Autonomy::TrustedActions,
            "{session} {context:?}"
        );
    }
    // Nor the user's own job running with nobody present.
    assert_ne!(
        effective(&builtin, "background-job:2", Context::job(2)),
        Autonomy::TrustedActions
    );
}
