//! What kind of command a manifest entry is, as policy reads it: whether it changes state and
//! whether it sits on the risk floor. Leaf module: every layer, the profiles and the grants
//! ask it.

use openphone_protocol::{Command, Confirmation, Risk};

/// Whether a command changes state. The manifest's `confirmation` decides (`none` = read); the
/// `mutating` flag is consulted as well so that an inconsistent entry fails safe.
pub fn is_mutating(command: &Command) -> bool {
    let by_confirmation = match command.confirmation {
        Confirmation::None => false,
        Confirmation::AskBeforeAction | Confirmation::Always => true,
    };
    by_confirmation || command.mutating
}

/// Whether a command sits on the risk floor (`confirmation: always` or risk high): it confirms
/// in every mode, one-shot, and no standing approval lowers it.
pub fn is_risk_floor(command: &Command) -> bool {
    let by_confirmation = match command.confirmation {
        Confirmation::Always => true,
        Confirmation::None | Confirmation::AskBeforeAction => false,
    };
    let by_risk = match command.risk {
        Risk::High => true,
        Risk::Low | Risk::Medium => false,
    };
    by_confirmation || by_risk
}
