//! The clipboard and the share sheet.

use serde_json::json;

use crate::DeviceError;
use crate::params::Params;
use crate::sim::actions;
use crate::sim::state::{Overlay, Share};

use super::ui::{field_value, focused, ui_result};
use super::{Exec, Outcome, check_len, screen_brief};

pub(crate) fn clipboard_set(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let text = p
        .str_opt("text")?
        .ok_or_else(|| DeviceError::invalid("text", "is required"))?;
    check_len("text", text)?;
    x.st.clipboard = Some(text.to_string());
    Ok(Outcome::act(
        json!({ "set": true, "length": text.chars().count() }),
        format!("clipboard set ({} characters)", text.chars().count()),
    ))
}

pub(crate) fn clipboard_paste(x: &mut Exec<'_>, _p: Params<'_>) -> Result<Outcome, DeviceError> {
    let (id, _, _, enabled) = focused(x)?;
    if !enabled {
        return Err(DeviceError::ElementDisabled { element_id: id });
    }
    let clip =
        x.st.clipboard
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or(DeviceError::ClipboardEmpty)?;
    actions::type_into_focus(x.st, &id, &clip);
    let value = field_value(x, &id);
    let out = ui_result(
        x,
        "paste",
        json!({ "element_id": id }),
        "pasted",
        json!({ "pasted": clip, "value": value }),
    );
    Ok(Outcome::act(
        out,
        format!("pasted {} characters into {id}", clip.chars().count()),
    ))
}

pub(crate) fn share_text(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let text = p.text_req("text")?;
    check_len("text", text)?;
    let chooser_title = p.ident_opt("chooser_title")?.map(str::to_string);
    let id = x.st.fresh_id();
    x.st.shares.push(Share {
        id,
        text: text.to_string(),
        chooser_title: chooser_title.clone(),
        at_ms: x.now,
        target: None,
    });
    x.st.nav.overlay = Some(Overlay::ShareSheet { share_id: id });
    let screen = screen_brief(x.st, x.now);
    Ok(Outcome::act(
        json!({ "shared": true, "share_id": id, "chooser_title": chooser_title, "targets": ["messages", "notes", "copy"], "screen": screen }),
        format!("opened the share sheet for share {id}"),
    ))
}
