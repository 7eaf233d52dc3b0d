//! The Contacts app: the list and one contact.

use crate::sim::state::{Action, MenuItem, Route};
use crate::sim::view::{Column, Node, PAD, Rect, RowSpec, Style, Ui};

use super::Ctx;
use super::widgets::frame;

/// Contacts: everyone, by name.
pub(super) fn list(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
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

/// Contacts: one contact with call and message buttons.
pub(super) fn detail(ui: &mut Ui, root: usize, ctx: &Ctx<'_>, contact_id: i64) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let Some(contact) = st.contact(contact_id) else {
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
        RowSpec::new(format!("contact_email_{i}"), e.address.clone()).secondary(e.label.clone())
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
