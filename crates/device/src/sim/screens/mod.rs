//! Builds the [`View`] of whatever is on screen from the state: the status bar, the home
//! screen or the foreground app's top page, an overlay, and the navigation bar.
//!
//! [`build`] draws the system UI (`system`) and hands the foreground page to the builder of
//! its app: one module per app (`settings`, `messages`, `phone`, `contacts`, `calendar`,
//! `browser`, `clock`, `notes`, `camera`, and `custom` for the screens a scenario declares),
//! all drawing with the shared `widgets`. Every app builder returns the page's
//! (activity, title).

mod browser;
mod calendar;
mod camera;
mod clock;
mod contacts;
mod custom;
mod messages;
mod notes;
mod phone;
mod settings;
mod system;
mod widgets;

use super::state::{AppRole, Overlay, Page, Route, SimState, WebPage};
use super::view::{Node, Rect, Style, Ui, View};

use system::{home, menu, nav_bar, recents, shade, share_sheet, status_bar};

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

/// The package, activity and title of the home screen.
pub(crate) fn home_identity() -> (&'static str, String, &'static str) {
    (LAUNCHER, format!("{LAUNCHER}/.Launcher"), "Home")
}

/// What of `now` the screen of `st` shows: [`build`] and the brief give the same screen
/// (but for `captured_at`) at any two times with the same bucket. The screen shows the time
/// to the minute and the day (both whole seconds after a whole-minute offset), and an active
/// call's whole seconds since it started (`phone.rs`): the bucket is the second, and that
/// count.
pub(crate) fn time_bucket(st: &SimState, now: i64) -> (i64, i64) {
    let call_secs = st
        .active_call
        .and_then(|id| st.calls.iter().find(|c| c.id == id))
        .map_or(0, |call| (now.saturating_sub(call.at_ms) / 1000).max(0));
    (now.div_euclid(1000), call_secs)
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
    let full_screen_overlay = matches!(overlay, Some(Overlay::Recents | Overlay::Shade));
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
                let (package, activity, title) = home_identity();
                (package.to_string(), activity, title.to_string())
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
            Overlay::Shade => {
                shade(&mut ui, root, st);
                package = SYSTEM_UI.into();
                activity = format!("{SYSTEM_UI}/.NotificationShade");
                title = "Notifications".into();
            }
            Overlay::ShareSheet { share_id } => {
                share_sheet(&mut ui, root, st, *share_id);
                package = "android".into();
                activity = "android/com.android.internal.app.ChooserActivity".into();
                title = "Share".into();
            }
        }
    }
    // An OS dialog (a permission prompt, a chooser, a payment sheet) is above everything.
    if let Some((pkg, act, name)) = super::dialogs::draw(&mut ui, root, st) {
        (package, activity, title) = (pkg, act, name);
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

/// Builds the foreground page with its app's builder; returns (activity, title).
fn app_page(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    match &ctx.page.route {
        Route::Settings => settings::list(ui, root, ctx),
        Route::SettingsAbout => settings::about(ui, root, ctx),
        Route::AppInfo { package } => settings::app_info(ui, root, ctx, package),
        Route::Conversations => messages::conversations(ui, root, ctx),
        Route::Thread { thread_id } => messages::thread(ui, root, ctx, *thread_id),
        Route::Compose => messages::compose(ui, root, ctx),
        Route::CallLog => phone::call_log(ui, root, ctx),
        Route::Dialpad => phone::dialpad(ui, root, ctx),
        Route::InCall { call_id } => phone::in_call(ui, root, ctx, *call_id),
        Route::Contacts => contacts::list(ui, root, ctx),
        Route::ContactDetail { contact_id } => contacts::detail(ui, root, ctx, *contact_id),
        Route::Agenda { day } => calendar::agenda(ui, root, ctx, *day),
        Route::EventDetail { event_id } => calendar::event_detail(ui, root, ctx, *event_id),
        Route::EventForm { event_id } => calendar::event_form(ui, root, ctx, *event_id),
        Route::Browser => browser::page(ui, root, ctx),
        Route::Clock => clock::page(ui, root, ctx),
        Route::Notes => notes::list(ui, root, ctx),
        Route::NoteEditor { .. } => notes::editor(ui, root, ctx),
        Route::Camera => camera::page(ui, root, ctx),
        Route::Custom { screen_id } => custom::screen(ui, root, ctx, screen_id),
        Route::Blank => custom::blank(ui, root, ctx),
    }
}

/// The scenario page for `url` (ignoring a trailing slash).
pub(crate) fn find_page<'a>(st: &'a SimState, url: &str) -> Option<&'a WebPage> {
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
