//! Builds the [`View`] of whatever is on screen from the state: the status bar, the home
//! screen or the foreground app's top page, an overlay, and the navigation bar.

use super::model::{contains_ci, snippet};
use super::state::{
    Action, AppRole, CallType, CustomKind, Direction, MenuItem, Overlay, Page, Route, SettingKey,
    SimState,
};
use super::time;
use super::view::{
    APPBAR_H, Column, LINE_H, NAV_H, Node, PAD, ROW_H, Rect, RowSpec, STATUS_H, Style, Ui, View,
    lines_for,
};

/// The package that owns the home screen.
pub(crate) const LAUNCHER: &str = "com.android.launcher";
const SYSTEM_UI: &str = "com.android.systemui";

/// Everything a page builder needs.
struct Ctx<'a> {
    st: &'a SimState,
    now: i64,
    page: &'a Page,
    depth: usize,
    package: &'a str,
}

impl Ctx<'_> {
    fn off(&self) -> i32 {
        self.st.offset()
    }

    fn field_value(&self, id: &str) -> String {
        self.page.fields.get(id).cloned().unwrap_or_default()
    }

    fn field_flag(&self, id: &str) -> bool {
        self.page.fields.get(id).is_some_and(|v| v == "true")
    }
}

/// The screen as it is now.
pub(crate) fn build(st: &SimState, now: i64) -> View {
    let (w, h) = st.screen();
    let mut ui = Ui::new(w, h);
    let root = ui.add(
        None,
        Node::new("root", "android.widget.FrameLayout", Rect::new(0, 0, w, h))
            .style(Style::Container),
    );
    status_bar(&mut ui, root, st, now);
    let overlay = st.nav.overlay.as_ref();
    let full_screen_overlay = matches!(overlay, Some(Overlay::Recents));
    let (mut package, mut activity, mut title) = if full_screen_overlay {
        (String::new(), String::new(), String::new())
    } else {
        match current_page(st) {
            Some((pkg, page, depth)) => {
                let ctx = Ctx {
                    st,
                    now,
                    page,
                    depth,
                    package: pkg,
                };
                let (activity, title) = app_page(&mut ui, root, &ctx);
                (pkg.to_string(), format!("{pkg}/{activity}"), title)
            }
            None => {
                home(&mut ui, root, st, now);
                (
                    LAUNCHER.to_string(),
                    format!("{LAUNCHER}/.Launcher"),
                    "Home".to_string(),
                )
            }
        }
    };
    if let Some(overlay) = overlay {
        // Whatever lies under an overlay stays visible but cannot be touched.
        for node in ui.nodes.iter_mut().skip(1) {
            if node.parent.is_some() && !node.id.starts_with("status") {
                node.clickable = false;
                node.long_clickable = false;
                node.editable = false;
                node.scrollable = false;
                node.focused = false;
            }
        }
        match overlay {
            Overlay::Recents => {
                recents(&mut ui, root, st);
                package = SYSTEM_UI.into();
                activity = format!("{SYSTEM_UI}/.recents.RecentsActivity");
                title = "Recent apps".into();
            }
            Overlay::Menu {
                title: menu_title,
                items,
            } => menu(&mut ui, root, menu_title, items),
            Overlay::ShareSheet { share_id } => {
                share_sheet(&mut ui, root, st, *share_id);
                package = "android".into();
                activity = "android/com.android.internal.app.ChooserActivity".into();
                title = "Share".into();
            }
        }
    }
    nav_bar(&mut ui, root);
    View {
        package,
        activity,
        title,
        width: w,
        height: h,
        nodes: ui.nodes,
    }
}

/// The foreground task's top page: (package, page, stack depth).
pub(crate) fn current_page(st: &SimState) -> Option<(&str, &Page, usize)> {
    let fg = st.nav.foreground.as_deref()?;
    let task = st.nav.tasks.iter().find(|t| t.package == fg)?;
    let page = task.stack.last()?;
    Some((fg, page, task.stack.len()))
}

/// A stable name for a route, as reported in `screen.get`.
pub(crate) fn route_name(route: &Route) -> String {
    match route {
        Route::Settings => "settings".into(),
        Route::SettingsAbout => "settings_about".into(),
        Route::AppInfo { .. } => "app_info".into(),
        Route::Conversations => "conversations".into(),
        Route::Thread { .. } => "thread".into(),
        Route::Compose => "compose".into(),
        Route::CallLog => "call_log".into(),
        Route::Dialpad => "dialpad".into(),
        Route::InCall { .. } => "in_call".into(),
        Route::Contacts => "contacts".into(),
        Route::ContactDetail { .. } => "contact_detail".into(),
        Route::Agenda { .. } => "agenda".into(),
        Route::EventDetail { .. } => "event_detail".into(),
        Route::EventForm { .. } => "event_form".into(),
        Route::Browser => "browser".into(),
        Route::Clock => "clock".into(),
        Route::Notes => "notes".into(),
        Route::NoteEditor { .. } => "note_editor".into(),
        Route::Camera => "camera".into(),
        Route::Custom { screen_id } => format!("custom:{screen_id}"),
        Route::Blank => "blank".into(),
    }
}

fn status_bar(ui: &mut Ui, root: usize, st: &SimState, now: i64) {
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

fn nav_bar(ui: &mut Ui, root: usize) {
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

fn home(ui: &mut Ui, root: usize, st: &SimState, now: i64) {
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

fn recents(ui: &mut Ui, root: usize, st: &SimState) {
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

fn menu(ui: &mut Ui, root: usize, title: &str, items: &[MenuItem]) {
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

fn share_sheet(ui: &mut Ui, root: usize, st: &SimState, share_id: i64) {
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

/// App bar and content container; returns (content, body top, body bottom).
fn frame(
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
fn field(
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

fn fab(ui: &mut Ui, parent: usize, id: &str, label: &str, action: Action) {
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

fn notice(ui: &mut Ui, parent: usize, ctx: &Ctx<'_>, y: i32) {
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

/// Builds the foreground page; returns (activity, title).
fn app_page(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let label = st
        .app(ctx.package)
        .map_or(ctx.package, |a| a.label.as_str());
    match &ctx.page.route {
        Route::Settings => {
            let (content, top, bottom) = frame(ui, root, ctx, "Settings", &[]);
            let mut rows: Vec<RowSpec> = SettingKey::ALL
                .iter()
                .map(|key| {
                    RowSpec::new(format!("setting_{}", key.id()), key.label())
                        .switch(st.settings.get(*key))
                        .on_tap(Action::Toggle { setting: *key })
                })
                .collect();
            rows.push(
                RowSpec::new("settings_about", "About phone")
                    .secondary(st.device.model.clone())
                    .on_tap(Action::Push {
                        route: Route::SettingsAbout,
                    }),
            );
            ui.list(
                Some(content),
                "settings_list",
                top,
                bottom,
                rows,
                ctx.page.scroll,
                false,
            );
            (".Settings".into(), "Settings".into())
        }
        Route::SettingsAbout => {
            let (content, top, bottom) = frame(ui, root, ctx, "About phone", &[]);
            let d = &st.device;
            let rows = vec![
                RowSpec::new("about_owner", "Owner").secondary(d.owner_name.clone()),
                RowSpec::new("about_number", "Phone number").secondary(d.own_number.clone()),
                RowSpec::new("about_model", "Model").secondary(d.model.clone()),
                RowSpec::new("about_os", "Android version").secondary(d.os_version.clone()),
                RowSpec::new("about_screen", "Screen")
                    .secondary(format!("{} x {}", d.screen.width, d.screen.height)),
                RowSpec::new("about_battery", "Battery")
                    .secondary(format!("{}%", d.battery_percent)),
            ];
            ui.list(
                Some(content),
                "about_list",
                top,
                bottom,
                rows,
                ctx.page.scroll,
                false,
            );
            (".DeviceInfoSettings".into(), "About phone".into())
        }
        Route::AppInfo { package } => {
            let (content, top, bottom) = frame(ui, root, ctx, "App info", &[]);
            let mut col = Column {
                parent: Some(content),
                y: top + 24,
                left: PAD,
                right: w - PAD,
                bottom,
            };
            match st.app(package) {
                Some(app) => {
                    col.text(ui, "app_label", &app.label);
                    col.text(ui, "app_package", &app.package);
                    col.text(ui, "app_version", &format!("Version {}", app.version));
                    col.button(
                        ui,
                        "app_open",
                        "Open",
                        Action::Launch {
                            package: app.package.clone(),
                        },
                        app.launchable,
                    );
                }
                None => {
                    col.text(ui, "app_missing", "This app is not installed");
                }
            }
            (
                ".applications.InstalledAppDetails".into(),
                "App info".into(),
            )
        }
        Route::Conversations => {
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
        Route::Thread { thread_id } => {
            let Some(thread) = st.thread(*thread_id) else {
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
        Route::Compose => {
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
        Route::CallLog => {
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
        Route::Dialpad => {
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
        Route::InCall { call_id } => {
            let (content, top, bottom) = frame(ui, root, ctx, "Call", &[]);
            let call = st.calls.iter().find(|c| c.id == *call_id);
            let active = st.active_call == Some(*call_id);
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
                .on_tap(Action::EndCall { call_id: *call_id })
                .enabled(active),
            );
            (".InCallActivity".into(), "Call".into())
        }
        Route::Contacts => {
            let (content, top, bottom) = frame(ui, root, ctx, "Contacts", &[]);
            let mut contacts: Vec<_> = st.contacts.iter().collect();
            contacts.sort_by_key(|c| c.name.to_lowercase());
            let rows: Vec<RowSpec> = contacts
                .iter()
                .map(|c| {
                    let secondary = c
                        .organization
                        .clone()
                        .or_else(|| c.phones.first().map(|p| p.number.clone()))
                        .unwrap_or_default();
                    RowSpec::new(format!("contact_{}", c.id), c.name.clone())
                        .secondary(secondary)
                        .on_tap(Action::Push {
                            route: Route::ContactDetail { contact_id: c.id },
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
                .text(ui, "empty", "No contacts");
            } else {
                ui.list(
                    Some(content),
                    "contact_list",
                    top,
                    bottom,
                    rows,
                    ctx.page.scroll,
                    false,
                );
            }
            (".activities.PeopleActivity".into(), "Contacts".into())
        }
        Route::ContactDetail { contact_id } => {
            let Some(contact) = st.contact(*contact_id) else {
                let (content, top, bottom) = frame(ui, root, ctx, "Contacts", &[]);
                Column {
                    parent: Some(content),
                    y: top + 48,
                    left: PAD,
                    right: w - PAD,
                    bottom,
                }
                .text(ui, "empty", "This contact was deleted");
                return (
                    ".activities.ContactDetailActivity".into(),
                    "Contacts".into(),
                );
            };
            let (content, top, bottom) = frame(ui, root, ctx, &contact.name, &[]);
            let primary = contact.phones.first().map(|p| p.number.clone());
            let half = w / 2;
            ui.add(
                Some(content),
                Node::new(
                    "contact_call",
                    "android.widget.Button",
                    Rect::new(PAD, top + 24, half - 24, top + 168),
                )
                .text("Call")
                .style(Style::Button)
                .on_tap(
                    primary
                        .clone()
                        .map_or(Action::None, |number| Action::Call { number }),
                )
                .enabled(primary.is_some()),
            );
            ui.add(
                Some(content),
                Node::new(
                    "contact_message",
                    "android.widget.Button",
                    Rect::new(half + 24, top + 24, w - PAD, top + 168),
                )
                .text("Message")
                .style(Style::Button)
                .on_tap(
                    primary
                        .clone()
                        .map_or(Action::None, |address| Action::ComposeTo {
                            address,
                            body: String::new(),
                        }),
                )
                .enabled(primary.is_some()),
            );
            let mut rows: Vec<RowSpec> = contact
                .phones
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    RowSpec::new(format!("contact_phone_{i}"), p.number.clone())
                        .secondary(p.label.clone())
                        .on_tap(Action::DialNumber {
                            number: p.number.clone(),
                        })
                        .on_long_press(Action::Menu {
                            title: p.number.clone(),
                            items: vec![MenuItem {
                                id: "copy_number".into(),
                                label: "Copy number".into(),
                                action: Action::Copy {
                                    text: p.number.clone(),
                                },
                            }],
                        })
                })
                .collect();
            rows.extend(contact.emails.iter().enumerate().map(|(i, e)| {
                RowSpec::new(format!("contact_email_{i}"), e.address.clone())
                    .secondary(e.label.clone())
            }));
            if let Some(org) = &contact.organization {
                rows.push(RowSpec::new("contact_org", org.clone()).secondary("Company"));
            }
            if let Some(note) = &contact.note {
                rows.push(RowSpec::new("contact_note", note.clone()).secondary("Note"));
            }
            ui.list(
                Some(content),
                "contact_fields",
                top + 200,
                bottom,
                rows,
                ctx.page.scroll,
                false,
            );
            (
                ".activities.ContactDetailActivity".into(),
                contact.name.clone(),
            )
        }
        Route::Agenda { day } => {
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
        Route::EventDetail { event_id } => {
            let Some(event) = st.event(*event_id) else {
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
        Route::EventForm { event_id } => {
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
                .on_tap(Action::SaveEvent {
                    event_id: *event_id,
                })
                .enabled(can_save),
            );
            (".EditEventActivity".into(), title.into())
        }
        Route::Browser => {
            let (content, top, bottom) = frame(ui, root, ctx, "", &[]);
            // The URL bar replaces the title.
            let url_text = ctx
                .page
                .fields
                .get("url_bar")
                .cloned()
                .unwrap_or_else(|| st.browser.current().unwrap_or_default().to_string());
            let mut node = Node::new(
                "url_bar",
                "android.widget.EditText",
                Rect::new(
                    if ctx.depth > 1 { 168 } else { PAD },
                    STATUS_H + 24,
                    w - PAD,
                    STATUS_H + APPBAR_H - 24,
                ),
            )
            .text(url_text)
            .style(Style::Field)
            .on_tap(Action::Focus {
                field: "url_bar".into(),
            });
            node.hint = Some("Search or type URL".into());
            node.editable = true;
            node.focused = ctx.page.focus.as_deref() == Some("url_bar");
            node.submit = Some(Action::SubmitUrl);
            ui.add(Some(content), node);
            let mut rows = Vec::new();
            let title;
            match st.browser.current() {
                None => {
                    title = "New tab".to_string();
                    let mut heading = RowSpec::new("page_title", "New tab");
                    heading.style = Style::Plain;
                    rows.push(heading);
                    for (i, page) in st.web_pages.iter().take(6).enumerate() {
                        rows.push(
                            RowSpec::new(format!("shortcut_{i}"), page.title.clone())
                                .secondary(page.url.clone())
                                .on_tap(Action::OpenUrl {
                                    url: page.url.clone(),
                                }),
                        );
                    }
                }
                Some(url) => {
                    let page = find_page(st, url);
                    title = page.map_or_else(|| host_of(url).to_string(), |p| p.title.clone());
                    let mut heading = RowSpec::new("page_title", title.clone());
                    heading.style = Style::Title;
                    rows.push(heading);
                    let paragraphs: Vec<String> = page.map_or_else(
                        || {
                            vec![
                                format!("This is a simulated page for {url}."),
                                "Nothing else is known about this site.".to_string(),
                            ]
                        },
                        |p| p.paragraphs.clone(),
                    );
                    for (i, text) in paragraphs.into_iter().enumerate() {
                        let mut row = RowSpec::new(format!("page_text_{i}"), text.clone());
                        row.style = Style::Plain;
                        row.class = "android.widget.TextView";
                        row.height = LINE_H * lines_for(&text, w - 2 * PAD) + 48;
                        rows.push(row);
                    }
                    if let Some(p) = page {
                        for (i, link) in p.links.iter().enumerate() {
                            rows.push(
                                RowSpec::new(format!("link_{i}"), link.text.clone())
                                    .secondary(link.url.clone())
                                    .on_tap(Action::OpenUrl {
                                        url: link.url.clone(),
                                    }),
                            );
                        }
                    }
                }
            }
            ui.list(
                Some(content),
                "web_view",
                top,
                bottom,
                rows,
                ctx.page.scroll,
                false,
            );
            (".BrowserActivity".into(), title)
        }
        Route::Clock => {
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
        Route::Notes => {
            let (content, top, bottom) = frame(ui, root, ctx, "Notes", &[]);
            let mut notes: Vec<_> = st.notes.iter().collect();
            notes.sort_by_key(|n| std::cmp::Reverse((n.updated_ms, n.id)));
            let rows: Vec<RowSpec> = notes
                .iter()
                .map(|n| {
                    let title = if n.title.is_empty() {
                        snippet(&n.body, 30)
                    } else {
                        n.title.clone()
                    };
                    RowSpec::new(format!("note_{}", n.id), title.clone())
                        .secondary(snippet(&n.body, 60))
                        .on_tap(Action::Push {
                            route: Route::NoteEditor {
                                note_id: Some(n.id),
                            },
                        })
                        .on_long_press(Action::Menu {
                            title,
                            items: vec![MenuItem {
                                id: "delete".into(),
                                label: "Delete".into(),
                                action: Action::DeleteNote { note_id: n.id },
                            }],
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
                .text(ui, "empty", "No notes");
            } else {
                ui.list(
                    Some(content),
                    "note_list",
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
                "new_note",
                "New note",
                Action::Push {
                    route: Route::NoteEditor { note_id: None },
                },
            );
            (".NotesActivity".into(), "Notes".into())
        }
        Route::NoteEditor { .. } => {
            let (content, top, bottom) = frame(
                ui,
                root,
                ctx,
                "Note",
                &[("note_done", "Done", "Save note", Action::SaveNote)],
            );
            field(
                ui,
                content,
                ctx,
                "note_title",
                "Title",
                Rect::new(PAD, top + 24, w - PAD, top + 168),
                false,
                None,
            );
            field(
                ui,
                content,
                ctx,
                "note_body",
                "Note",
                Rect::new(PAD, top + 192, w - PAD, bottom - 48),
                true,
                None,
            );
            (".NoteEditorActivity".into(), "Note".into())
        }
        Route::Camera => {
            let (content, top, bottom) = frame(ui, root, ctx, "Camera", &[]);
            let facing = match st.camera_facing {
                super::state::CameraFacing::Back => "back",
                super::state::CameraFacing::Front => "front",
            };
            ui.add(
                Some(content),
                Node::new(
                    "viewfinder",
                    "android.view.TextureView",
                    Rect::new(0, top, w, bottom - 320),
                )
                .desc(format!("Camera preview ({facing} camera)"))
                .style(Style::Container),
            );
            notice(ui, content, ctx, top + 24);
            let y = bottom - 280;
            ui.add(
                Some(content),
                Node::new(
                    "last_photo",
                    "android.widget.TextView",
                    Rect::new(PAD, y, w / 3 - 24, y + 200),
                )
                .text(format!("Photos: {}", st.photos.len())),
            );
            ui.add(
                Some(content),
                Node::new(
                    "shutter",
                    "android.widget.ImageButton",
                    Rect::new(w / 3, y, 2 * w / 3, y + 200),
                )
                .desc("Take photo")
                .text("O")
                .style(Style::Fab)
                .on_tap(Action::TakePhoto),
            );
            ui.add(
                Some(content),
                Node::new(
                    "switch_camera",
                    "android.widget.ImageButton",
                    Rect::new(2 * w / 3 + 24, y, w - PAD, y + 200),
                )
                .desc("Switch camera")
                .text("Flip")
                .style(Style::Button)
                .on_tap(Action::SwitchCamera),
            );
            (".CameraActivity".into(), "Camera".into())
        }
        Route::Custom { screen_id } => {
            let screen = st
                .app(ctx.package)
                .and_then(|a| a.screens.iter().find(|s| &s.id == screen_id));
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
        Route::Blank => {
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
    }
}

/// The scenario page for `url` (ignoring a trailing slash).
pub(crate) fn find_page<'a>(st: &'a SimState, url: &str) -> Option<&'a super::state::WebPage> {
    let want = url.trim_end_matches('/');
    st.web_pages
        .iter()
        .find(|p| p.url.trim_end_matches('/') == want)
}

/// The host part of an http(s) URL.
pub(crate) fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    host.rsplit('@').next().unwrap_or(host)
}

/// The start route of an app.
pub(crate) fn start_route(st: &SimState, package: &str) -> Route {
    let Some(app) = st.app(package) else {
        return Route::Blank;
    };
    match app.role {
        Some(AppRole::Settings) => Route::Settings,
        Some(AppRole::Messages) => Route::Conversations,
        Some(AppRole::Phone) => Route::CallLog,
        Some(AppRole::Contacts) => Route::Contacts,
        Some(AppRole::Calendar) => Route::Agenda { day: None },
        Some(AppRole::Browser) => Route::Browser,
        Some(AppRole::Clock) => Route::Clock,
        Some(AppRole::Notes) => Route::Notes,
        Some(AppRole::Camera) => Route::Camera,
        None => app.screens.first().map_or(Route::Blank, |s| Route::Custom {
            screen_id: s.id.clone(),
        }),
    }
}
