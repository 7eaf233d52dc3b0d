//! Widgets the app pages share: the app bar with its content frame, editable fields bound to
//! the page's `fields`, the floating action button and the page notice.

use super::super::state::{Action, MenuItem};
use super::super::view::{APPBAR_H, NAV_H, Node, PAD, Rect, STATUS_H, Style, Ui};
use super::Ctx;

/// App bar and content container; returns (content, body top, body bottom).
pub(super) fn frame(
    ui: &mut Ui,
    root: usize,
    ctx: &Ctx<'_>,
    title: &str,
    actions: &[(&str, &str, &str, Action)],
) -> (usize, i32, i32) {
    let (w, h) = (ui.w, ui.h);
    let content = ui.add(
        Some(root),
        Node::new(
            "content",
            "android.widget.FrameLayout",
            Rect::new(0, STATUS_H, w, h - NAV_H),
        )
        .style(Style::Container),
    );
    let bar = ui.add(
        Some(content),
        Node::new(
            "app_bar",
            "android.widget.LinearLayout",
            Rect::new(0, STATUS_H, w, STATUS_H + APPBAR_H),
        )
        .style(Style::Bar),
    );
    let mut left = PAD;
    if ctx.depth > 1 {
        ui.add(
            Some(bar),
            Node::new(
                "nav_up",
                "android.widget.ImageButton",
                Rect::new(0, STATUS_H, 144, STATUS_H + APPBAR_H),
            )
            .text("<")
            .desc("Navigate up")
            .style(Style::Icon)
            .on_tap(Action::Back),
        );
        left = 168;
    }
    let mut right = w;
    for (id, label, desc, action) in actions.iter().rev() {
        let width = i32::try_from(label.chars().count()).unwrap_or(4) * 30 + 72;
        let rect = Rect::new(
            right - width,
            STATUS_H + 24,
            right - 12,
            STATUS_H + APPBAR_H - 24,
        );
        right -= width;
        ui.add(
            Some(bar),
            Node::new(*id, "android.widget.Button", rect)
                .text(*label)
                .desc(*desc)
                .style(Style::Button)
                .on_tap(action.clone()),
        );
    }
    ui.add(
        Some(bar),
        Node::new(
            "title",
            "android.widget.TextView",
            Rect::new(left, STATUS_H + 40, right - 12, STATUS_H + APPBAR_H - 40),
        )
        .text(title)
        .style(Style::Title),
    );
    (content, STATUS_H + APPBAR_H, h - NAV_H)
}

/// An editable field bound to the page's `fields`.
#[allow(clippy::too_many_arguments)] // geometry, behaviour and binding of one widget
pub(super) fn field(
    ui: &mut Ui,
    parent: usize,
    ctx: &Ctx<'_>,
    id: &str,
    hint: &str,
    rect: Rect,
    multiline: bool,
    submit: Option<Action>,
) -> usize {
    let mut node = Node::new(id, "android.widget.EditText", rect)
        .text(ctx.field_value(id))
        .style(Style::Field)
        .on_tap(Action::Focus { field: id.into() });
    node.hint = Some(hint.into());
    node.editable = true;
    node.multiline = multiline;
    node.focused = ctx.page.focus.as_deref() == Some(id);
    node.submit = submit;
    let mut items = vec![
        MenuItem {
            id: "copy".into(),
            label: "Copy".into(),
            action: Action::Copy {
                text: ctx.field_value(id),
            },
        },
        MenuItem {
            id: "clear".into(),
            label: "Clear".into(),
            action: Action::SetField {
                field: id.into(),
                value: String::new(),
            },
        },
    ];
    if ctx.st.clipboard.as_ref().is_some_and(|c| !c.is_empty()) {
        items.insert(
            0,
            MenuItem {
                id: "paste".into(),
                label: "Paste".into(),
                action: Action::PasteInto { field: id.into() },
            },
        );
    }
    node = node.on_long_press(Action::Menu {
        title: hint.into(),
        items,
    });
    ui.add(Some(parent), node)
}

pub(super) fn fab(ui: &mut Ui, parent: usize, id: &str, label: &str, action: Action) {
    let (w, h) = (ui.w, ui.h);
    ui.add(
        Some(parent),
        Node::new(
            id,
            "android.widget.Button",
            Rect::new(w - 480, h - NAV_H - 200, w - PAD, h - NAV_H - 48),
        )
        .text(label)
        .style(Style::Fab)
        .on_tap(action),
    );
}

pub(super) fn notice(ui: &mut Ui, parent: usize, ctx: &Ctx<'_>, y: i32) {
    if let Some(text) = &ctx.page.notice {
        let w = ui.w;
        ui.add(
            Some(parent),
            Node::new(
                "notice",
                "android.widget.TextView",
                Rect::new(PAD, y, w - PAD, y + 96),
            )
            .text(text.clone())
            .style(Style::Notice),
        );
    }
}
