//! The pages of apps a scenario declares: its own screens, or a blank page.

use crate::sim::state::{Action, CustomKind, Route};
use crate::sim::view::{Column, Node, PAD, ROW_H, Rect, Style, Ui};

use super::Ctx;
use super::widgets::{field, frame};

/// A screen a scenario declares for its own app.
pub(super) fn screen(ui: &mut Ui, root: usize, ctx: &Ctx<'_>, screen_id: &str) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let label = st
        .app(ctx.package)
        .map_or(ctx.package, |a| a.label.as_str());
    let screen = st
        .app(ctx.package)
        .and_then(|a| a.screens.iter().find(|s| s.id == screen_id));
    let Some(screen) = screen else {
        let (content, top, bottom) = frame(ui, root, ctx, label, &[]);
        Column {
            parent: Some(content),
            y: top + 48,
            left: PAD,
            right: w - PAD,
            bottom,
        }
        .text(ui, "empty", "Nothing to show");
        return (".MainActivity".into(), label.into());
    };
    let (content, top, bottom) = frame(ui, root, ctx, &screen.title, &[]);
    let mut col = Column {
        parent: Some(content),
        y: top + 24,
        left: PAD,
        right: w - PAD,
        bottom,
    };
    for el in &screen.elements {
        let action = el
            .navigate
            .clone()
            .map_or(Action::None, |screen_id| Action::Push {
                route: Route::Custom { screen_id },
            });
        let text = el.text.clone().unwrap_or_default();
        let idx = match el.kind {
            CustomKind::Text => col.text(ui, &el.id, &text),
            CustomKind::Button => col.button(ui, &el.id, &text, action, el.enabled),
            CustomKind::Row => col.place(
                ui,
                Node::new(el.id.clone(), "android.view.ViewGroup", Rect::default())
                    .text(text)
                    .style(Style::Row)
                    .on_tap(action)
                    .enabled(el.enabled),
                ROW_H,
            ),
            CustomKind::Field => {
                if col.y + 144 > col.bottom {
                    None
                } else {
                    let rect = Rect::new(col.left, col.y, col.right, col.y + 144);
                    col.y += 160;
                    let idx = field(
                        ui,
                        content,
                        ctx,
                        &el.id,
                        el.description.as_deref().unwrap_or("Text"),
                        rect,
                        false,
                        None,
                    );
                    if !ctx.page.fields.contains_key(&el.id)
                        && let Some(node) = ui.nodes.get_mut(idx)
                    {
                        node.text = Some(text);
                    }
                    if let Some(node) = ui.nodes.get_mut(idx) {
                        node.enabled = el.enabled;
                    }
                    None
                }
            }
        };
        if let (Some(idx), Some(desc)) = (idx, &el.description)
            && let Some(node) = ui.nodes.get_mut(idx)
        {
            node.desc = Some(desc.clone());
        }
    }
    let activity = screen
        .activity
        .clone()
        .unwrap_or_else(|| ".MainActivity".into());
    (activity, screen.title.clone())
}

/// An app with nothing to show.
pub(super) fn blank(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let w = ui.w;
    let label = ctx
        .st
        .app(ctx.package)
        .map_or(ctx.package, |a| a.label.as_str());
    let (content, top, bottom) = frame(ui, root, ctx, label, &[]);
    Column {
        parent: Some(content),
        y: top + 48,
        left: PAD,
        right: w - PAD,
        bottom,
    }
    .text(ui, "empty", &format!("{label} has nothing to show"));
    (".MainActivity".into(), label.into())
}
