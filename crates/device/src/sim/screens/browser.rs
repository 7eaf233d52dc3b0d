//! The Browser app: the URL bar over the current page, or a new tab with shortcuts.

use crate::sim::state::Action;
use crate::sim::view::{
    APPBAR_H, LINE_H, Node, PAD, Rect, RowSpec, STATUS_H, Style, Ui, lines_for,
};

use super::widgets::frame;
use super::{Ctx, find_page, host_of};

/// Browser: the URL bar and the current page (or a new tab).
pub(super) fn page(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
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
