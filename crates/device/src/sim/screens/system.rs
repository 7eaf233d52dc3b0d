//! The system UI around and above the apps: the status bar, the navigation bar, the home
//! screen, and the overlays (recent apps, a long-press menu, the share sheet).

use super::super::model::snippet;
use super::super::state::{Action, MenuItem, Route, SimState};
use super::super::time;
use super::super::view::{
    APPBAR_H, Column, LINE_H, NAV_H, Node, PAD, ROW_H, Rect, RowSpec, STATUS_H, Style, Ui,
};
use super::route_name;

pub(super) fn status_bar(ui: &mut Ui, root: usize, st: &SimState, now: i64) {
    let w = ui.w;
    let bar = ui.add(
        Some(root),
        Node::new(
            "status_bar",
            "android.widget.FrameLayout",
            Rect::new(0, 0, w, STATUS_H),
        )
        .style(Style::Status),
    );
    ui.add(
        Some(bar),
        Node::new(
            "status_time",
            "android.widget.TextView",
            Rect::new(PAD, 20, 400, STATUS_H - 16),
        )
        .text(time::hm(now, st.offset())),
    );
    let mut icons = Vec::new();
    if st.active_call.is_some() {
        icons.push("On call".to_string());
    }
    if st.settings.airplane_mode {
        icons.push("Airplane".into());
    } else if st.settings.wifi {
        icons.push("Wi-Fi".into());
    }
    if st.settings.bluetooth {
        icons.push("BT".into());
    }
    if st.settings.do_not_disturb {
        icons.push("DND".into());
    }
    let unread = st.notifications.iter().filter(|n| !n.read).count();
    if unread > 0 {
        icons.push(format!("{unread} new"));
    }
    icons.push(format!(
        "{}%{}",
        st.device.battery_percent,
        if st.device.charging { "+" } else { "" }
    ));
    ui.add(
        Some(bar),
        Node::new(
            "status_icons",
            "android.widget.TextView",
            Rect::new(w / 2 - 120, 20, w - PAD, STATUS_H - 16),
        )
        .text(icons.join(" ")),
    );
}

pub(super) fn nav_bar(ui: &mut Ui, root: usize) {
    let (w, h) = (ui.w, ui.h);
    let bar = ui.add(
        Some(root),
        Node::new(
            "nav_bar",
            "android.widget.FrameLayout",
            Rect::new(0, h - NAV_H, w, h),
        )
        .style(Style::NavBar),
    );
    let third = w / 3;
    for (i, (id, desc, action)) in [
        ("nav_back", "Back", Action::Back),
        ("nav_home", "Home", Action::Home),
        ("nav_recents", "Overview", Action::Recents),
    ]
    .into_iter()
    .enumerate()
    {
        let i = i32::try_from(i).unwrap_or(0);
        ui.add(
            Some(bar),
            Node::new(
                id,
                "android.widget.ImageButton",
                Rect::new(i * third, h - NAV_H, (i + 1) * third, h),
            )
            .desc(desc)
            .style(Style::Icon)
            .on_tap(action),
        );
    }
}

pub(super) fn home(ui: &mut Ui, root: usize, st: &SimState, now: i64) {
    let (w, h) = (ui.w, ui.h);
    let content = ui.add(
        Some(root),
        Node::new(
            "home",
            "android.widget.FrameLayout",
            Rect::new(0, STATUS_H, w, h - NAV_H),
        )
        .style(Style::Container),
    );
    let off = st.offset();
    ui.add(
        Some(content),
        Node::new(
            "home_clock",
            "android.widget.TextView",
            Rect::new(PAD, STATUS_H + 40, w - PAD, STATUS_H + 160),
        )
        .text(time::hm(now, off))
        .style(Style::Big),
    );
    ui.add(
        Some(content),
        Node::new(
            "home_date",
            "android.widget.TextView",
            Rect::new(PAD, STATUS_H + 170, w - PAD, STATUS_H + 230),
        )
        .text(time::day_title(time::local_day(now, off))),
    );
    let top = STATUS_H + 300;
    let bottom = h - NAV_H;
    let apps: Vec<_> = st.apps.iter().filter(|a| a.launchable).collect();
    let cell_w = w / 4;
    let cell_h = 264;
    let rows = i32::try_from(apps.len().div_ceil(4)).unwrap_or(0);
    let max_scroll = (rows * cell_h - (bottom - top)).max(0);
    let scroll = st.nav.home_scroll.clamp(0, max_scroll);
    let mut grid = Node::new(
        "app_grid",
        "android.widget.GridView",
        Rect::new(0, top, w, bottom),
    )
    .style(Style::Container);
    grid.scrollable = max_scroll > 0;
    grid.scroll = (scroll, max_scroll);
    let grid = ui.add(Some(content), grid);
    for (i, app) in apps.iter().enumerate() {
        let i = i32::try_from(i).unwrap_or(0);
        let (col, row) = (i % 4, i / 4);
        let rect = Rect::new(
            col * cell_w + 12,
            top + row * cell_h - scroll + 12,
            (col + 1) * cell_w - 12,
            top + (row + 1) * cell_h - scroll - 12,
        );
        if rect.top < top || rect.bottom > bottom {
            continue;
        }
        let menu = Action::Menu {
            title: app.label.clone(),
            items: vec![
                MenuItem {
                    id: "open".into(),
                    label: "Open".into(),
                    action: Action::Launch {
                        package: app.package.clone(),
                    },
                },
                MenuItem {
                    id: "app_info".into(),
                    label: "App info".into(),
                    action: Action::Push {
                        route: Route::AppInfo {
                            package: app.package.clone(),
                        },
                    },
                },
            ],
        };
        ui.add(
            Some(grid),
            Node::new(
                format!("app_icon_{}", app.package),
                "android.widget.TextView",
                rect,
            )
            .text(app.label.clone())
            .desc(app.label.clone())
            .style(Style::Icon)
            .on_tap(Action::Launch {
                package: app.package.clone(),
            })
            .on_long_press(menu),
        );
    }
}

pub(super) fn recents(ui: &mut Ui, root: usize, st: &SimState) {
    let (w, h) = (ui.w, ui.h);
    let panel = ui.add(
        Some(root),
        Node::new(
            "recents",
            "android.widget.FrameLayout",
            Rect::new(0, STATUS_H, w, h - NAV_H),
        )
        .style(Style::Panel),
    );
    ui.add(
        Some(panel),
        Node::new(
            "recents_title",
            "android.widget.TextView",
            Rect::new(PAD, STATUS_H + 24, w - PAD, STATUS_H + APPBAR_H),
        )
        .text("Recent apps")
        .style(Style::Title),
    );
    let rows: Vec<RowSpec> = st
        .nav
        .tasks
        .iter()
        .rev()
        .map(|task| {
            let label = st
                .app(&task.package)
                .map_or(task.package.as_str(), |a| a.label.as_str());
            RowSpec::new(format!("recent_{}", task.package), label)
                .secondary(
                    task.stack
                        .last()
                        .map(|p| route_name(&p.route))
                        .unwrap_or_default(),
                )
                .on_tap(Action::SwitchTask {
                    package: task.package.clone(),
                })
        })
        .collect();
    let list_top = STATUS_H + APPBAR_H + 24;
    let list_bottom = h - NAV_H - 200;
    if rows.is_empty() {
        ui.add(
            Some(panel),
            Node::new(
                "recents_empty",
                "android.widget.TextView",
                Rect::new(PAD, list_top, w - PAD, list_top + 96),
            )
            .text("No recent items"),
        );
    } else {
        ui.list(
            Some(panel),
            "recents_list",
            list_top,
            list_bottom,
            rows,
            0,
            false,
        );
    }
    ui.add(
        Some(panel),
        Node::new(
            "clear_all",
            "android.widget.Button",
            Rect::new(w / 2 - 240, h - NAV_H - 176, w / 2 + 240, h - NAV_H - 32),
        )
        .text("Clear all")
        .style(Style::Button)
        .on_tap(Action::ClearTasks)
        .enabled(!st.nav.tasks.is_empty()),
    );
}

pub(super) fn menu(ui: &mut Ui, root: usize, title: &str, items: &[MenuItem]) {
    let (w, h) = (ui.w, ui.h);
    ui.add(
        Some(root),
        Node::new(
            "menu_scrim",
            "android.view.View",
            Rect::new(0, STATUS_H, w, h - NAV_H),
        )
        .desc("Dismiss menu")
        .style(Style::Scrim)
        .on_tap(Action::CloseOverlay),
    );
    let item_h = 144;
    let height = 120 + item_h * i32::try_from(items.len()).unwrap_or(0);
    let top = (h / 2 - height / 2).max(STATUS_H);
    let panel = ui.add(
        Some(root),
        Node::new(
            "menu",
            "android.widget.ListView",
            Rect::new(PAD * 2, top, w - PAD * 2, top + height),
        )
        .style(Style::Panel),
    );
    ui.add(
        Some(panel),
        Node::new(
            "menu_title",
            "android.widget.TextView",
            Rect::new(PAD * 3, top + 24, w - PAD * 3, top + 108),
        )
        .text(title),
    );
    for (i, item) in items.iter().enumerate() {
        let y = top + 120 + item_h * i32::try_from(i).unwrap_or(0);
        ui.add(
            Some(panel),
            Node::new(
                format!("menu_{}", item.id),
                "android.widget.TextView",
                Rect::new(PAD * 2, y, w - PAD * 2, y + item_h),
            )
            .text(item.label.clone())
            .style(Style::Row)
            .on_tap(item.action.clone()),
        );
    }
}

pub(super) fn share_sheet(ui: &mut Ui, root: usize, st: &SimState, share_id: i64) {
    let (w, h) = (ui.w, ui.h);
    ui.add(
        Some(root),
        Node::new(
            "share_scrim",
            "android.view.View",
            Rect::new(0, STATUS_H, w, h - NAV_H),
        )
        .desc("Dismiss")
        .style(Style::Scrim)
        .on_tap(Action::CloseOverlay),
    );
    let top = h / 2;
    let panel = ui.add(
        Some(root),
        Node::new(
            "share_sheet",
            "android.widget.LinearLayout",
            Rect::new(0, top, w, h - NAV_H),
        )
        .style(Style::Panel),
    );
    let share = st.shares.iter().find(|s| s.id == share_id);
    let title = share
        .and_then(|s| s.chooser_title.clone())
        .unwrap_or_else(|| "Share".into());
    let mut col = Column {
        parent: Some(panel),
        y: top + 32,
        left: PAD,
        right: w - PAD,
        bottom: h - NAV_H,
    };
    col.place(
        ui,
        Node::new("share_title", "android.widget.TextView", Rect::default())
            .text(title)
            .style(Style::Title),
        96,
    );
    if let Some(share) = share {
        col.text(ui, "share_preview", &snippet(&share.text, 120));
    }
    for (target, label) in [
        ("messages", "Messages"),
        ("notes", "Notes"),
        ("copy", "Copy"),
    ] {
        col.button(
            ui,
            &format!("share_target_{target}"),
            label,
            Action::ShareTo {
                share_id,
                target: target.into(),
            },
            true,
        );
    }
}

/// An element id made of a notification key (letters, digits and `_` kept, the rest `_`).
fn notification_element_id(key: &str) -> String {
    let safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("notification_{safe}")
}

/// The notification shade: the notifications, newest first, each a row that opens it. Action
/// buttons are drawn as a plain label under their notification, never as something to tap:
/// the runtime's own notifications carry decisions (approve, deny) that only the user takes,
/// so no tap of an agent may press them (only an operator's `sim inject action` does).
pub(super) fn shade(ui: &mut Ui, root: usize, st: &SimState) {
    let (w, h) = (ui.w, ui.h);
    let panel = ui.add(
        Some(root),
        Node::new(
            "notification_shade",
            "android.widget.FrameLayout",
            Rect::new(0, STATUS_H, w, h - NAV_H),
        )
        .style(Style::Panel),
    );
    ui.add(
        Some(panel),
        Node::new(
            "shade_title",
            "android.widget.TextView",
            Rect::new(PAD, STATUS_H + 24, w - PAD, STATUS_H + APPBAR_H - 24),
        )
        .text("Notifications")
        .style(Style::Title),
    );
    let mut list: Vec<_> = st.notifications.iter().collect();
    list.sort_by_key(|n| std::cmp::Reverse(n.posted_ms));
    let bottom = h - NAV_H;
    let mut y = STATUS_H + APPBAR_H;
    if list.is_empty() {
        ui.add(
            Some(panel),
            Node::new(
                "shade_empty",
                "android.widget.TextView",
                Rect::new(PAD, y, w - PAD, y + 96),
            )
            .text("No notifications"),
        );
        return;
    }
    for n in list {
        let actions_h = if n.actions.is_empty() { 0 } else { 84 };
        if y + ROW_H + actions_h > bottom {
            break;
        }
        let id = notification_element_id(&n.key);
        let app = crate::sim::commands::records::app_label(st, &n.package);
        let row = ui.add(
            Some(panel),
            Node::new(
                id.clone(),
                "android.view.ViewGroup",
                Rect::new(0, y, w, y + ROW_H),
            )
            .desc(format!("{app}: {}", n.title))
            .style(Style::Row)
            .on_tap(Action::OpenNotification { key: n.key.clone() }),
        );
        ui.add(
            Some(row),
            Node::new(
                format!("{id}_title"),
                "android.widget.TextView",
                Rect::new(PAD, y + 24, w - PAD, y + 24 + LINE_H + 24),
            )
            .text(format!(
                "{app} · {}{}",
                n.title,
                if n.read { "" } else { " •" }
            )),
        );
        ui.add(
            Some(row),
            Node::new(
                format!("{id}_text"),
                "android.widget.TextView",
                Rect::new(PAD, y + 24 + LINE_H + 24, w - PAD, y + ROW_H - 12),
            )
            .text(snippet(&n.text, 80)),
        );
        y += ROW_H;
        if !n.actions.is_empty() {
            let labels: Vec<&str> = n.actions.iter().map(|a| a.label.as_str()).collect();
            // Not clickable, and outside the row: a finger here touches nothing.
            ui.add(
                Some(panel),
                Node::new(
                    format!("{id}_actions"),
                    "android.widget.TextView",
                    Rect::new(PAD * 2, y, w - PAD, y + actions_h),
                )
                .text(labels.join("   "))
                .desc("Notification actions: only the user answers these, not a tap"),
            );
            y += actions_h;
        }
    }
}
