//! The Calendar app: a day's agenda, one event, and the event form.

use crate::sim::state::{Action, Route};
use crate::sim::time;
use crate::sim::view::{Column, Node, PAD, Rect, RowSpec, Style, Ui};

use super::Ctx;
use super::widgets::{fab, field, frame, notice};

/// Calendar: one day's agenda (`None` → today).
pub(super) fn agenda(
    ui: &mut Ui,
    root: usize,
    ctx: &Ctx<'_>,
    day: Option<i64>,
) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let day = day.unwrap_or_else(|| time::local_day(ctx.now, ctx.off()));
    let (content, top, bottom) = frame(
        ui,
        root,
        ctx,
        "Calendar",
        &[
            (
                "prev_day",
                "<",
                "Previous day",
                Action::ShiftDay { days: -1 },
            ),
            ("next_day", ">", "Next day", Action::ShiftDay { days: 1 }),
        ],
    );
    ui.add(
        Some(content),
        Node::new(
            "agenda_date",
            "android.widget.TextView",
            Rect::new(PAD, top + 12, w - PAD, top + 108),
        )
        .text(time::day_title(day))
        .style(Style::Title),
    );
    let start = time::day_start(day, ctx.off());
    let end = start + time::DAY_MS;
    let mut events: Vec<_> = st
        .events
        .iter()
        .filter(|e| e.start_ms < end && e.end_ms > start)
        .collect();
    events.sort_by_key(|e| (!e.all_day, e.start_ms, e.id));
    let rows: Vec<RowSpec> = events
        .iter()
        .map(|e| {
            let when = if e.all_day {
                "All day".to_string()
            } else {
                format!(
                    "{} - {}",
                    time::hm(e.start_ms, ctx.off()),
                    time::hm(e.end_ms, ctx.off())
                )
            };
            let secondary = if e.location.is_empty() {
                when
            } else {
                format!("{when} · {}", e.location)
            };
            RowSpec::new(format!("event_{}", e.id), e.title.clone())
                .secondary(secondary)
                .on_tap(Action::Push {
                    route: Route::EventDetail { event_id: e.id },
                })
        })
        .collect();
    if rows.is_empty() {
        Column {
            parent: Some(content),
            y: top + 140,
            left: PAD,
            right: w - PAD,
            bottom,
        }
        .text(ui, "empty", "No events");
    } else {
        ui.list(
            Some(content),
            "event_list",
            top + 120,
            bottom,
            rows,
            ctx.page.scroll,
            false,
        );
    }
    fab(
        ui,
        content,
        "new_event",
        "New event",
        Action::Push {
            route: Route::EventForm { event_id: None },
        },
    );
    (".AllInOneActivity".into(), "Calendar".into())
}

/// Calendar: one event.
pub(super) fn event_detail(
    ui: &mut Ui,
    root: usize,
    ctx: &Ctx<'_>,
    event_id: i64,
) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let Some(event) = st.event(event_id) else {
        let (content, top, bottom) = frame(ui, root, ctx, "Event", &[]);
        Column {
            parent: Some(content),
            y: top + 48,
            left: PAD,
            right: w - PAD,
            bottom,
        }
        .text(ui, "empty", "This event was deleted");
        return (".EventInfoActivity".into(), "Event".into());
    };
    let (content, top, bottom) = frame(
        ui,
        root,
        ctx,
        &event.title,
        &[
            (
                "edit_event",
                "Edit",
                "Edit event",
                Action::Push {
                    route: Route::EventForm {
                        event_id: Some(event.id),
                    },
                },
            ),
            (
                "delete_event",
                "Delete",
                "Delete event",
                Action::DeleteEvent { event_id: event.id },
            ),
        ],
    );
    let off = ctx.off();
    let day = time::local_day(event.start_ms, off);
    let when = if event.all_day {
        format!("{} · All day", time::day_title(day))
    } else {
        format!(
            "{} · {} - {}",
            time::day_title(day),
            time::hm(event.start_ms, off),
            time::hm(event.end_ms, off)
        )
    };
    let mut col = Column {
        parent: Some(content),
        y: top + 24,
        left: PAD,
        right: w - PAD,
        bottom,
    };
    col.text(ui, "event_when", &when);
    if !event.location.is_empty() {
        col.text(ui, "event_location", &event.location);
    }
    if let Some(cal) = st.calendars.iter().find(|c| c.id == event.calendar_id) {
        col.text(ui, "event_calendar", &format!("Calendar: {}", cal.name));
    }
    if !event.attendees.is_empty() {
        col.text(
            ui,
            "event_attendees",
            &format!("With {}", event.attendees.join(", ")),
        );
    }
    if !event.description.is_empty() {
        col.text(ui, "event_description", &event.description);
    }
    (".EventInfoActivity".into(), event.title.clone())
}

/// Calendar: the form that creates (`None`) or edits an event.
pub(super) fn event_form(
    ui: &mut Ui,
    root: usize,
    ctx: &Ctx<'_>,
    event_id: Option<i64>,
) -> (String, String) {
    let w = ui.w;
    let title = if event_id.is_some() {
        "Edit event"
    } else {
        "New event"
    };
    let can_save = !ctx.field_value("event_title").trim().is_empty();
    let (content, top, _bottom) = frame(ui, root, ctx, title, &[]);
    let mut y = top + 24;
    let fh = 144;
    for (id, hint) in [
        ("event_title", "Title"),
        ("event_date", "Date (YYYY-MM-DD)"),
    ] {
        field(
            ui,
            content,
            ctx,
            id,
            hint,
            Rect::new(PAD, y, w - PAD, y + fh),
            false,
            None,
        );
        y += fh + 24;
    }
    let all_day = ctx.field_flag("event_all_day");
    ui.add(
        Some(content),
        Node::new(
            "event_all_day",
            "android.widget.Switch",
            Rect::new(PAD, y, w - PAD, y + fh),
        )
        .text("All day")
        .style(Style::Switch)
        .checked(all_day)
        .on_tap(Action::ToggleField {
            field: "event_all_day".into(),
        }),
    );
    y += fh + 24;
    if !all_day {
        field(
            ui,
            content,
            ctx,
            "event_start",
            "Start (HH:MM)",
            Rect::new(PAD, y, w / 2 - 24, y + fh),
            false,
            None,
        );
        field(
            ui,
            content,
            ctx,
            "event_end",
            "End (HH:MM)",
            Rect::new(w / 2 + 24, y, w - PAD, y + fh),
            false,
            None,
        );
        y += fh + 24;
    }
    field(
        ui,
        content,
        ctx,
        "event_location",
        "Location",
        Rect::new(PAD, y, w - PAD, y + fh),
        false,
        None,
    );
    y += fh + 24;
    field(
        ui,
        content,
        ctx,
        "event_description",
        "Description",
        Rect::new(PAD, y, w - PAD, y + 2 * fh),
        true,
        None,
    );
    y += 2 * fh + 24;
    notice(ui, content, ctx, y);
    ui.add(
        Some(content),
        Node::new(
            "save_event",
            "android.widget.Button",
            Rect::new(w - 420, y + 120, w - PAD, y + 264),
        )
        .text("Save")
        .desc("Save event")
        .style(Style::Fab)
        .on_tap(Action::SaveEvent { event_id })
        .enabled(can_save),
    );
    (".EditEventActivity".into(), title.into())
}
