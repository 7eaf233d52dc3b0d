//! The Notes app: the list and the editor.

use crate::sim::model::snippet;
use crate::sim::state::{Action, MenuItem, Route};
use crate::sim::view::{Column, PAD, Rect, RowSpec, Ui};

use super::Ctx;
use super::widgets::{fab, field, frame};

/// Notes: every note, most recently changed first.
pub(super) fn list(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
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

/// Notes: the editor.
pub(super) fn editor(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let w = ui.w;
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
