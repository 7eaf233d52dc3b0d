//! Elevated mode: a user-granted elevation lifts the runtime's ceiling for its window only,
//! never past the risk floor or background parking, and is named in the proof.

use openphone_policy::{Autonomy, Context, Elevation, Layer, Requirement, inputs_digest};

use super::support::{Case, NOW};

fn elevation(until: u64) -> Elevation {
    Elevation {
        grant_id: "elev-7".into(),
        to: Autonomy::TrustedActions,
        expires_at_ms: until,
    }
}

#[test]
fn an_elevation_raises_the_ceiling_for_its_window_only() {
    // A runtime asking for trusted_actions under the default ceiling is asked first …
    let mut case = Case::new("tap").session(None);
    case.request = Some("trusted_actions".into());
    assert!(matches!(
        case.decide().requirement,
        Requirement::Confirm { .. }
    ));
    // … runs while an elevation lasts, which the proof names …
    case.elevation = Some(elevation(NOW + 1));
    let decision = case.decide();
    assert_eq!(decision.requirement, Requirement::Allow);
    assert_eq!(decision.effective_autonomy, Autonomy::TrustedActions);
    let l4 = decision.verdict(Layer::Autonomy).unwrap();
    assert!(l4.reason.contains("elevation `elev-7`"), "{}", l4.reason);
    // … and is asked first again once it has expired.
    case.elevation = Some(elevation(NOW));
    assert!(matches!(
        case.decide().requirement,
        Requirement::Confirm { .. }
    ));
}

#[test]
fn an_elevation_never_passes_the_risk_floor_background_parking_or_a_stricter_session() {
    let mut case = Case::new("sms.send").session(None);
    case.request = Some("trusted_actions".into());
    case.elevation = Some(elevation(NOW + 60_000));
    assert!(matches!(
        case.decide().requirement,
        Requirement::Confirm { one_shot: true, .. }
    ));
    let mut tap = Case::new("tap").session(Some(Autonomy::AskBeforeAction));
    tap.elevation = Some(elevation(NOW + 60_000));
    assert!(matches!(
        tap.decide().requirement,
        Requirement::Confirm { .. }
    ));
    let mut job = Case::new("tap").session(Some(Autonomy::TrustedActions));
    job.context = Context::job(1);
    job.elevation = Some(elevation(NOW + 60_000));
    assert!(matches!(
        job.decide().requirement,
        Requirement::Confirm {
            park_for_review: true,
            ..
        }
    ));
}

#[test]
fn the_inputs_digest_names_an_elevation_and_is_unchanged_without_one() {
    let case = Case::new("tap");
    let plain = inputs_digest(&case.input());
    let mut elevated = case.clone();
    elevated.elevation = Some(elevation(NOW + 1));
    assert_ne!(inputs_digest(&elevated.input()), plain);
    let object = openphone_policy::inputs_object(&case.input());
    assert!(object.get("elevation").is_none());
}
