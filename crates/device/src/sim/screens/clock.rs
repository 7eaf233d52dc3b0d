//! The Clock app: the time, the date and the alarms.

use crate::sim::state::Action;
use crate::sim::time;
use crate::sim::view::{Node, PAD, Rect, RowSpec, Style, Ui};

use super::Ctx;
use super::widgets::frame;

/// Clock: the time, the date and the alarms.
pub(super) fn page(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let (content, top, bottom) = frame(ui, root, ctx, "Clock", &[]);
    let off = ctx.off();
    ui.add(
        Some(content),
        Node::new(
            "clock_time",
            "android.widget.TextClock",
            Rect::new(PAD, top + 24, w - PAD, top + 184),
        )
        .text(time::hm(ctx.now, off))
        .style(Style::Big),
    );
    ui.add(
        Some(content),
        Node::new(
            "clock_date",
            "android.widget.TextView",
            Rect::new(PAD, top + 196, w - PAD, top + 268),
        )
        .text(time::day_title(time::local_day(ctx.now, off))),
    );
    let rows: Vec<RowSpec> = st
        .alarms
        .iter()
        .map(|a| {
            let text = if a.label.is_empty() {
                format!("{:02}:{:02}", a.hour, a.minute)
            } else {
                format!("{:02}:{:02} · {}", a.hour, a.minute, a.label)
            };
            RowSpec::new(format!("alarm_{}", a.id), text)
                .switch(a.enabled)
                .on_tap(Action::ToggleAlarm { alarm_id: a.id })
        })
        .collect();
    if !rows.is_empty() {
        ui.list(
            Some(content),
            "alarm_list",
            top + 300,
            bottom,
            rows,
            ctx.page.scroll,
            false,
        );
    }
    (".DeskClock".into(), "Clock".into())
}
