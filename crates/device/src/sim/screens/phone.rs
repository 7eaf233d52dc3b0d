//! The Phone app: the call log, the keypad and the in-call screen.

use crate::sim::state::{Action, CallType, MenuItem, Route};
use crate::sim::time;
use crate::sim::view::{Column, Node, PAD, Rect, RowSpec, Style, Ui};

use super::Ctx;
use super::widgets::{field, frame};

/// Phone: the call log, newest first.
pub(super) fn call_log(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let (content, top, bottom) = frame(
        ui,
        root,
        ctx,
        "Phone",
        &[(
            "open_keypad",
            "Keypad",
            "Open keypad",
            Action::Push {
                route: Route::Dialpad,
            },
        )],
    );
    let mut calls: Vec<_> = st.calls.iter().collect();
    calls.sort_by_key(|c| std::cmp::Reverse(c.at_ms));
    let today = time::local_day(ctx.now, ctx.off());
    let rows: Vec<RowSpec> = calls
        .iter()
        .map(|c| {
            let name = st.name_for_number(&c.number);
            let kind = match c.call_type {
                CallType::Missed => "Missed",
                CallType::Incoming => "Incoming",
                CallType::Outgoing => "Outgoing",
                CallType::Voicemail => "Voicemail",
                CallType::Rejected => "Rejected",
                CallType::Blocked => "Blocked",
            };
            RowSpec::new(format!("call_{}", c.id), name.clone())
                .secondary(format!(
                    "{kind} · {}",
                    time::when(c.at_ms, ctx.off(), today)
                ))
                .on_tap(Action::DialNumber {
                    number: c.number.clone(),
                })
                .on_long_press(Action::Menu {
                    title: name,
                    items: vec![
                        MenuItem {
                            id: "copy_number".into(),
                            label: "Copy number".into(),
                            action: Action::Copy {
                                text: c.number.clone(),
                            },
                        },
                        MenuItem {
                            id: "send_message".into(),
                            label: "Send message".into(),
                            action: Action::ComposeTo {
                                address: c.number.clone(),
                                body: String::new(),
                            },
                        },
                    ],
                })
        })
        .collect();
    if rows.is_empty() {
        Column {
            parent: Some(content),
            y: top + 48,
            left: PAD,
            right: w - PAD,
            bottom,
        }
        .text(ui, "empty", "No recent calls");
    } else {
        ui.list(
            Some(content),
            "call_list",
            top,
            bottom,
            rows,
            ctx.page.scroll,
            false,
        );
    }
    (".DialtactsActivity".into(), "Phone".into())
}

/// Phone: the keypad.
pub(super) fn dialpad(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let (content, top, bottom) = frame(ui, root, ctx, "Keypad", &[]);
    field(
        ui,
        content,
        ctx,
        "dial_number",
        "Enter number",
        Rect::new(PAD, top + 24, w - PAD, top + 184),
        false,
        Some(Action::CallFromDialpad),
    );
    let number = ctx.field_value("dial_number");
    let name = st.contact_for_number(&number).map(|c| c.name.clone());
    if let Some(name) = name.filter(|_| number.len() >= 3) {
        ui.add(
            Some(content),
            Node::new(
                "dial_match",
                "android.widget.TextView",
                Rect::new(PAD, top + 196, w - PAD, top + 268),
            )
            .text(name),
        );
    }
    let keys = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "*", "0", "#"];
    let key_w = (w - 2 * PAD) / 3;
    let key_h = 168;
    let grid_top = top + 300;
    for (i, key) in keys.iter().enumerate() {
        let i = i32::try_from(i).unwrap_or(0);
        let (col, row) = (i % 3, i / 3);
        let id = match *key {
            "*" => "key_star".to_string(),
            "#" => "key_hash".to_string(),
            k => format!("key_{k}"),
        };
        ui.add(
            Some(content),
            Node::new(
                id,
                "android.widget.Button",
                Rect::new(
                    PAD + col * key_w,
                    grid_top + row * key_h,
                    PAD + (col + 1) * key_w - 12,
                    grid_top + (row + 1) * key_h - 12,
                ),
            )
            .text(*key)
            .style(Style::Button)
            .on_tap(Action::Dial {
                digit: (*key).into(),
            }),
        );
    }
    let row_top = (grid_top + 4 * key_h + 24).min(bottom - 168);
    let has_number = !number.trim().is_empty();
    ui.add(
        Some(content),
        Node::new(
            "dial_delete",
            "android.widget.Button",
            Rect::new(PAD, row_top, w / 2 - 24, row_top + 144),
        )
        .text("Delete")
        .desc("Backspace")
        .style(Style::Button)
        .on_tap(Action::DialDelete)
        .enabled(has_number),
    );
    ui.add(
        Some(content),
        Node::new(
            "dial_call",
            "android.widget.Button",
            Rect::new(w / 2 + 24, row_top, w - PAD, row_top + 144),
        )
        .text("Call")
        .desc("Call")
        .style(Style::Fab)
        .on_tap(Action::CallFromDialpad)
        .enabled(has_number),
    );
    (".DialpadActivity".into(), "Keypad".into())
}

/// Phone: the in-call screen of call `call_id`.
pub(super) fn in_call(ui: &mut Ui, root: usize, ctx: &Ctx<'_>, call_id: i64) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let (content, top, bottom) = frame(ui, root, ctx, "Call", &[]);
    let call = st.calls.iter().find(|c| c.id == call_id);
    let active = st.active_call == Some(call_id);
    let mut col = Column {
        parent: Some(content),
        y: top + 120,
        left: PAD,
        right: w - PAD,
        bottom,
    };
    if let Some(call) = call {
        col.place(
            ui,
            Node::new("call_name", "android.widget.TextView", Rect::default())
                .text(st.name_for_number(&call.number))
                .style(Style::Big),
            144,
        );
        col.text(ui, "call_number", &call.number);
        let status = if active {
            let secs = (ctx.now.saturating_sub(call.at_ms) / 1000).max(0);
            if secs < 5 {
                "Calling…".to_string()
            } else {
                format!("{:02}:{:02}", secs / 60, secs % 60)
            }
        } else {
            format!(
                "Call ended · {}:{:02}",
                call.duration_s / 60,
                call.duration_s % 60
            )
        };
        col.text(ui, "call_status", &status);
    }
    ui.add(
        Some(content),
        Node::new(
            "end_call",
            "android.widget.Button",
            Rect::new(w / 2 - 240, bottom - 360, w / 2 + 240, bottom - 180),
        )
        .text("End call")
        .desc("End call")
        .style(Style::Fab)
        .on_tap(Action::EndCall { call_id })
        .enabled(active),
    );
    (".InCallActivity".into(), "Call".into())
}
