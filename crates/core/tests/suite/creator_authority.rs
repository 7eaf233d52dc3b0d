//! `ToolBridge::creator_authority` (issue 28, item 5): the one computation of the authority the
//! built-in runtime works with on behalf of a creator.

use std::collections::BTreeMap;

use openphone_core::BridgeConfig;
use openphone_policy::{
    Autonomy, BackgroundRun, Caller, Context, ExposureGrants, RuntimeAuthorisation, ToolList,
    ToolPolicy, ToolSelector,
};

use super::support::{Harness, registry};

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
