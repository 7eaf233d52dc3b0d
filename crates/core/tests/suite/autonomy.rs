//! The autonomy modes end to end (issue 4 acceptance).

use openphone_protocol::{Confirmation, ToolStatus};
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn observe_only_denies_every_mutating_command_and_runs_reads() {
    let h = Harness::new();
    let caller = hermes();
    for (i, cmd) in registry().commands().enumerate() {
        let req = with(
            request(&format!("r{i}"), &cmd.name, minimal_params(&cmd.name)),
            |r| {
                r.autonomy = Some("observe_only".into());
            },
        );
        let result = h.call(&caller, req).await;
        if cmd.mutating {
            assert_eq!(result.status, ToolStatus::Denied, "{}", cmd.name);
            assert_eq!(
                code(&result),
                Some("observe_only_mutation_denied"),
                "{}",
                cmd.name
            );
            let details = result.error.as_ref().unwrap().details.as_ref().unwrap();
            assert_eq!(details["policy"], "observe_only_blocks_mutation");
            assert_eq!(details["autonomy"], "observe_only");
        } else if cmd.category == "background" {
            // Background jobs arrive with their own layer: reported unsupported, never faked.
            assert_eq!(
                code(&result),
                Some("tool_not_supported_by_phone_platform"),
                "{}",
                cmd.name
            );
        } else {
            assert_eq!(
                result.status,
                ToolStatus::Ok,
                "{}: {:?}",
                cmd.name,
                result.error
            );
        }
    }
    assert_eq!(
        h.actions(),
        0,
        "nothing may change the phone under observe_only"
    );
}

#[tokio::test]
async fn legacy_synonyms_mean_observe_only() {
    let h = Harness::new();
    for (i, legacy) in ["read_only", "dry_run", " READ_ONLY "]
        .into_iter()
        .enumerate()
    {
        let req = with(open_notes(&format!("l{i}")), |r| {
            r.autonomy = Some(legacy.into())
        });
        assert_eq!(
            code(&h.call(&hermes(), req).await),
            Some("observe_only_mutation_denied")
        );
    }
}

#[tokio::test]
async fn trusted_actions_runs_medium_risk_but_confirms_the_risk_floor() {
    let h = Harness::new();
    let caller = trusted_hermes();
    let req = with(open_notes("t1"), |r| {
        r.autonomy = Some("trusted_actions".into())
    });
    let result = h.call(&caller, req).await;
    assert_eq!(result.status, ToolStatus::Ok, "{:?}", result.error);
    assert_eq!(h.actions(), 1);
    // `yolo` is the legacy spelling of trusted_actions.
    let req = with(
        request(
            "t2",
            "openphone.clipboard.set",
            json!({"text": "hi", "reason": "r"}),
        ),
        |r| {
            r.autonomy = Some("yolo".into());
        },
    );
    assert_eq!(h.call(&caller, req).await.status, ToolStatus::Ok);

    for tool in [
        "openphone.messages.send",
        "openphone.calls.place",
        "openphone.calendar.delete",
        "openphone.share.text",
    ] {
        let cmd = registry().resolve(tool).unwrap();
        assert_eq!(cmd.confirmation, Confirmation::Always);
        let req = with(
            request(&format!("floor-{tool}"), tool, minimal_params(tool)),
            |r| {
                r.autonomy = Some("trusted_actions".into());
            },
        );
        let result = h.call(&caller, req).await;
        assert_eq!(result.status, ToolStatus::NeedsConfirmation, "{tool}");
        assert!(result.requires_confirmation);
    }
    assert_eq!(h.actions(), 2, "the risk-floor commands did not run");
}

#[tokio::test]
async fn a_runtime_cannot_raise_its_own_autonomy() {
    let h = Harness::new();
    // hermes' ceiling is ask_before_action: asking for trusted_actions still confirms.
    let req = with(open_notes("e1"), |r| {
        r.autonomy = Some("trusted_actions".into())
    });
    let result = h.call(&hermes(), req).await;
    assert_eq!(result.status, ToolStatus::NeedsConfirmation);
    assert_eq!(h.actions(), 0);
}

#[tokio::test]
async fn request_without_autonomy_inherits_ask_before_action() {
    let h = Harness::new();
    let result = h.call(&trusted_hermes(), open_notes("i1")).await;
    assert_eq!(result.status, ToolStatus::NeedsConfirmation);
    assert_eq!(code(&result), Some("mutating_tool_requires_confirmation"));
}
