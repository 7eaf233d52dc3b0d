//! The Messages app: the conversation list, one conversation, and a new message.

use crate::sim::model::{contains_ci, snippet};
use crate::sim::state::{Action, Direction, MenuItem, Route};
use crate::sim::time;
use crate::sim::view::{Column, LINE_H, Node, PAD, Rect, RowSpec, Style, Ui, lines_for};

use super::Ctx;
use super::widgets::{fab, field, frame, notice};

/// Messages: the conversation list, newest first.
pub(super) fn conversations(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let (content, top, bottom) = frame(ui, root, ctx, "Messages", &[]);
    let mut threads: Vec<_> = st.threads.iter().collect();
    threads.sort_by_key(|t| std::cmp::Reverse(t.messages.last().map_or(0, |m| m.at_ms)));
    let today = time::local_day(ctx.now, ctx.off());
    let rows: Vec<RowSpec> = threads
        .iter()
        .map(|t| {
            let name = st.thread_name(t);
            let unread = t.messages.iter().filter(|m| !m.read).count();
            let last = t.messages.last();
            let preview = last.map_or(String::new(), |m| {
                let who = if m.direction == Direction::Outgoing {
                    "You: "
                } else {
                    ""
                };
                format!(
                    "{who}{} · {}",
                    snippet(&m.body, 40),
                    time::when(m.at_ms, ctx.off(), today)
                )
            });
            let primary = if unread > 0 {
                format!("{name} ({unread} unread)")
            } else {
                name.clone()
            };
            RowSpec::new(format!("thread_{}", t.id), primary)
                .secondary(preview)
                .on_tap(Action::Push {
                    route: Route::Thread { thread_id: t.id },
                })
                .on_long_press(Action::Menu {
                    title: name,
                    items: vec![
                        MenuItem {
                            id: "mark_read".into(),
                            label: "Mark as read".into(),
                            action: Action::MarkThreadRead { thread_id: t.id },
                        },
                        MenuItem {
                            id: "delete".into(),
                            label: "Delete conversation".into(),
                            action: Action::DeleteThread { thread_id: t.id },
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
        .text(ui, "empty", "No conversations");
    } else {
        ui.list(
            Some(content),
            "conversation_list",
            top,
            bottom,
            rows,
            ctx.page.scroll,
            false,
        );
    }
    fab(
        ui,
        content,
        "start_chat",
        "Start chat",
        Action::Push {
            route: Route::Compose,
        },
    );
    (".ui.ConversationListActivity".into(), "Messages".into())
}

/// Messages: one conversation with its input field.
pub(super) fn thread(ui: &mut Ui, root: usize, ctx: &Ctx<'_>, thread_id: i64) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let Some(thread) = st.thread(thread_id) else {
        let (content, top, bottom) = frame(ui, root, ctx, "Messages", &[]);
        Column {
            parent: Some(content),
            y: top + 48,
            left: PAD,
            right: w - PAD,
            bottom,
        }
        .text(ui, "empty", "This conversation was deleted");
        return (".ui.ConversationActivity".into(), "Messages".into());
    };
    let name = st.thread_name(thread);
    let (content, top, bottom) = frame(
        ui,
        root,
        ctx,
        &name,
        &[(
            "thread_call",
            "Call",
            "Call",
            Action::Call {
                number: thread.address.clone(),
            },
        )],
    );
    let input_top = bottom - 200;
    let today = time::local_day(ctx.now, ctx.off());
    let bubble_w = w * 3 / 4;
    let rows: Vec<RowSpec> = thread
        .messages
        .iter()
        .map(|m| {
            let outgoing = m.direction == Direction::Outgoing;
            let lines = lines_for(&m.body, bubble_w - 2 * PAD);
            let mut row = RowSpec::new(format!("message_{}", m.id), m.body.clone())
                .secondary(time::when(m.at_ms, ctx.off(), today))
                .desc(format!(
                    "{} {}",
                    if outgoing { "You said" } else { "Received" },
                    time::when(m.at_ms, ctx.off(), today)
                ))
                .on_long_press(Action::Menu {
                    title: "Message".into(),
                    items: vec![
                        MenuItem {
                            id: "copy".into(),
                            label: "Copy text".into(),
                            action: Action::Copy {
                                text: m.body.clone(),
                            },
                        },
                        MenuItem {
                            id: "delete".into(),
                            label: "Delete".into(),
                            action: Action::DeleteMessage {
                                thread_id: thread.id,
                                message_id: m.id,
                            },
                        },
                    ],
                });
            row.style = if outgoing {
                Style::BubbleOut
            } else {
                Style::BubbleIn
            };
            row.height = 24 + LINE_H * lines + 24 + LINE_H + 24;
            row.inset = if outgoing {
                (w - bubble_w - 24, 24)
            } else {
                (24, w - bubble_w - 24)
            };
            row
        })
        .collect();
    ui.list(
        Some(content),
        "message_list",
        top,
        input_top,
        rows,
        ctx.page.scroll,
        true,
    );
    let has_text = !ctx.field_value("message_input").trim().is_empty();
    field(
        ui,
        content,
        ctx,
        "message_input",
        "Text message",
        Rect::new(PAD, input_top + 24, w - 300, bottom - 24),
        true,
        None,
    );
    ui.add(
        Some(content),
        Node::new(
            "send",
            "android.widget.Button",
            Rect::new(w - 276, input_top + 24, w - PAD, bottom - 24),
        )
        .text("Send")
        .desc("Send message")
        .style(Style::Button)
        .on_tap(Action::SendInThread {
            thread_id: thread.id,
        })
        .enabled(has_text),
    );
    (".ui.ConversationActivity".into(), name)
}

/// Messages: a new conversation, with contact suggestions for the recipient.
pub(super) fn compose(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let (content, top, bottom) = frame(ui, root, ctx, "New conversation", &[]);
    field(
        ui,
        content,
        ctx,
        "compose_to",
        "To: name or number",
        Rect::new(PAD, top + 24, w - PAD, top + 184),
        false,
        None,
    );
    notice(ui, content, ctx, top + 200);
    let query = ctx.field_value("compose_to");
    let query = query.trim();
    let input_top = bottom - 200;
    if !query.is_empty() {
        let rows: Vec<RowSpec> = st
            .contacts
            .iter()
            .filter(|c| contains_ci(&c.name, query) && !c.phones.is_empty())
            .flat_map(|c| {
                c.phones.iter().enumerate().map(move |(i, p)| {
                    RowSpec::new(format!("suggestion_{}_{i}", c.id), c.name.clone())
                        .secondary(format!("{} · {}", p.label, p.number))
                        .on_tap(Action::SetField {
                            field: "compose_to".into(),
                            value: p.number.clone(),
                        })
                })
            })
            .collect();
        if !rows.is_empty() {
            ui.list(
                Some(content),
                "suggestions",
                top + 300,
                input_top,
                rows,
                ctx.page.scroll,
                false,
            );
        }
    }
    let ready = !query.is_empty() && !ctx.field_value("compose_body").trim().is_empty();
    field(
        ui,
        content,
        ctx,
        "compose_body",
        "Text message",
        Rect::new(PAD, input_top + 24, w - 300, bottom - 24),
        true,
        None,
    );
    ui.add(
        Some(content),
        Node::new(
            "send",
            "android.widget.Button",
            Rect::new(w - 276, input_top + 24, w - PAD, bottom - 24),
        )
        .text("Send")
        .desc("Send message")
        .style(Style::Button)
        .on_tap(Action::SendCompose)
        .enabled(ready),
    );
    (
        ".ui.NewConversationActivity".into(),
        "New conversation".into(),
    )
}
