//! The Settings app: the main list of switches, About phone, and an app's info page.

use crate::sim::state::{Action, Route, SettingKey};
use crate::sim::view::{Column, PAD, RowSpec, Ui};

use super::Ctx;
use super::widgets::frame;

/// Settings: the main list, one switch per setting and "About phone".
pub(super) fn list(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
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

/// Settings → About phone.
pub(super) fn about(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let (content, top, bottom) = frame(ui, root, ctx, "About phone", &[]);
    let d = &st.device;
    let rows = vec![
        RowSpec::new("about_owner", "Owner").secondary(d.owner_name.clone()),
        RowSpec::new("about_number", "Phone number").secondary(d.own_number.clone()),
        RowSpec::new("about_model", "Model").secondary(d.model.clone()),
        RowSpec::new("about_os", "Android version").secondary(d.os_version.clone()),
        RowSpec::new("about_screen", "Screen")
            .secondary(format!("{} x {}", d.screen.width, d.screen.height)),
        RowSpec::new("about_battery", "Battery").secondary(format!("{}%", d.battery_percent)),
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

/// Settings → an app's info page.
pub(super) fn app_info(ui: &mut Ui, root: usize, ctx: &Ctx<'_>, package: &str) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
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
