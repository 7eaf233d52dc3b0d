//! The rendered screen: a flat list of UI nodes (each knows its parent) built fresh from the
//! state for every observation and every input, plus the JSON shapes of `screen.get`.

use serde_json::{Map, Value, json};

use super::state::Action;

/// Height of the status bar.
pub(crate) const STATUS_H: i32 = 96;
/// Height of an app bar.
pub(crate) const APPBAR_H: i32 = 168;
/// Height of the system navigation bar.
pub(crate) const NAV_H: i32 = 144;
/// Height of a list row.
pub(crate) const ROW_H: i32 = 192;
/// Horizontal padding.
pub(crate) const PAD: i32 = 48;
/// Approximate width of one character of body text, in screen pixels.
pub(crate) const CHAR_W: i32 = 27;
/// Height of one line of body text, in screen pixels.
pub(crate) const LINE_H: i32 = 36;

/// An axis-aligned rectangle in screen pixels (right and bottom exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Rect {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

impl Rect {
    pub(crate) fn new(left: i32, top: i32, right: i32, bottom: i32) -> Self {
        Self {
            left,
            top,
            right,
            bottom,
        }
    }

    pub(crate) fn contains(&self, x: f64, y: f64) -> bool {
        x >= f64::from(self.left)
            && x < f64::from(self.right)
            && y >= f64::from(self.top)
            && y < f64::from(self.bottom)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.right <= self.left || self.bottom <= self.top
    }

    pub(crate) fn center(&self) -> (i32, i32) {
        ((self.left + self.right) / 2, (self.top + self.bottom) / 2)
    }

    pub(crate) fn height(&self) -> i32 {
        self.bottom - self.top
    }

    pub(crate) fn width(&self) -> i32 {
        self.right - self.left
    }

    /// The part of `self` inside `clip`.
    pub(crate) fn clip(&self, clip: &Rect) -> Rect {
        Rect::new(
            self.left.max(clip.left),
            self.top.max(clip.top),
            self.right.min(clip.right),
            self.bottom.min(clip.bottom),
        )
    }
}

/// How the screenshot renderer paints a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    Plain,
    Container,
    Title,
    Bar,
    Button,
    Fab,
    Field,
    Row,
    Switch,
    BubbleIn,
    BubbleOut,
    Icon,
    Scrim,
    Panel,
    Notice,
    Status,
    NavBar,
    Big,
}

/// One UI element.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub id: String,
    pub class: &'static str,
    pub text: Option<String>,
    pub desc: Option<String>,
    pub hint: Option<String>,
    pub bounds: Rect,
    pub clickable: bool,
    pub long_clickable: bool,
    pub editable: bool,
    pub multiline: bool,
    pub enabled: bool,
    pub focused: bool,
    pub checked: Option<bool>,
    pub scrollable: bool,
    pub scroll: (i32, i32),
    /// A list anchored at its end: scrolling counts upwards.
    pub reverse: bool,
    pub parent: Option<usize>,
    pub tap: Action,
    pub long_press: Option<Action>,
    pub submit: Option<Action>,
    pub style: Style,
}

impl Node {
    pub(crate) fn new(id: impl Into<String>, class: &'static str, bounds: Rect) -> Self {
        Self {
            id: id.into(),
            class,
            text: None,
            desc: None,
            hint: None,
            bounds,
            clickable: false,
            long_clickable: false,
            editable: false,
            multiline: false,
            enabled: true,
            focused: false,
            checked: None,
            scrollable: false,
            scroll: (0, 0),
            reverse: false,
            parent: None,
            tap: Action::None,
            long_press: None,
            submit: None,
            style: Style::Plain,
        }
    }

    pub(crate) fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    pub(crate) fn desc(mut self, desc: impl Into<String>) -> Self {
        self.desc = Some(desc.into());
        self
    }

    pub(crate) fn style(mut self, style: Style) -> Self {
        self.style = style;
        self
    }

    pub(crate) fn on_tap(mut self, action: Action) -> Self {
        self.clickable = true;
        self.tap = action;
        self
    }

    pub(crate) fn on_long_press(mut self, action: Action) -> Self {
        self.long_clickable = true;
        self.long_press = Some(action);
        self
    }

    pub(crate) fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    pub(crate) fn checked(mut self, checked: bool) -> Self {
        self.checked = Some(checked);
        self
    }
}

/// The screen as built from the state.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub package: String,
    pub activity: String,
    pub title: String,
    pub width: i32,
    pub height: i32,
    pub nodes: Vec<Node>,
}

/// Builds the node list.
#[derive(Debug)]
pub(crate) struct Ui {
    pub w: i32,
    pub h: i32,
    pub nodes: Vec<Node>,
}

/// A row of a scrolling list.
#[derive(Debug, Clone)]
pub(crate) struct RowSpec {
    pub id: String,
    pub class: &'static str,
    pub primary: String,
    pub secondary: Option<String>,
    pub desc: Option<String>,
    pub tap: Option<Action>,
    pub long_press: Option<Action>,
    pub checked: Option<bool>,
    pub style: Style,
    pub height: i32,
    pub inset: (i32, i32),
}

impl RowSpec {
    pub(crate) fn new(id: impl Into<String>, primary: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            class: "android.view.ViewGroup",
            primary: primary.into(),
            secondary: None,
            desc: None,
            tap: None,
            long_press: None,
            checked: None,
            style: Style::Row,
            height: ROW_H,
            inset: (0, 0),
        }
    }

    pub(crate) fn secondary(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        if !text.is_empty() {
            self.secondary = Some(text);
        }
        self
    }

    pub(crate) fn desc(mut self, desc: impl Into<String>) -> Self {
        self.desc = Some(desc.into());
        self
    }

    pub(crate) fn on_tap(mut self, action: Action) -> Self {
        self.tap = Some(action);
        self
    }

    pub(crate) fn on_long_press(mut self, action: Action) -> Self {
        self.long_press = Some(action);
        self
    }

    pub(crate) fn switch(mut self, on: bool) -> Self {
        self.class = "android.widget.Switch";
        self.style = Style::Switch;
        self.checked = Some(on);
        self
    }
}

/// Lines `text` needs at `width` pixels.
pub(crate) fn lines_for(text: &str, width: i32) -> i32 {
    let per_line = (width / CHAR_W).max(1);
    text.split('\n')
        .map(|line| {
            let chars = i32::try_from(line.chars().count()).unwrap_or(i32::MAX);
            ((chars + per_line - 1) / per_line).max(1)
        })
        .sum()
}

impl Ui {
    pub(crate) fn new(w: i32, h: i32) -> Self {
        Self {
            w,
            h,
            nodes: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, parent: Option<usize>, mut node: Node) -> usize {
        node.parent = parent;
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// A scrolling list between `top` and `bottom`. Rows outside the viewport are not part
    /// of the tree (as with a recycler view); partly visible rows are clipped. With
    /// `from_bottom` the list is anchored at its end (chat transcripts) and `scroll` counts
    /// upwards.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn list(
        &mut self,
        parent: Option<usize>,
        id: &str,
        top: i32,
        bottom: i32,
        rows: Vec<RowSpec>,
        scroll: i32,
        from_bottom: bool,
    ) -> usize {
        let viewport = Rect::new(0, top, self.w, bottom);
        let total: i32 = rows.iter().map(|r| r.height).sum();
        let max_scroll = (total - viewport.height()).max(0);
        let scroll = scroll.clamp(0, max_scroll);
        let mut list = Node::new(id, "androidx.recyclerview.widget.RecyclerView", viewport)
            .style(Style::Container);
        list.scrollable = max_scroll > 0;
        list.scroll = (scroll, max_scroll);
        list.reverse = from_bottom;
        let list_idx = self.add(parent, list);
        let mut y = if from_bottom {
            top + (viewport.height() - total).max(0) - (max_scroll - scroll)
        } else {
            top - scroll
        };
        for row in rows {
            let full = Rect::new(row.inset.0, y, self.w - row.inset.1, y + row.height);
            y += row.height;
            let visible = full.clip(&viewport);
            if visible.height() < 24 {
                continue;
            }
            let mut node = Node::new(row.id.clone(), row.class, visible).style(row.style);
            if let Some(desc) = row.desc {
                node = node.desc(desc);
            }
            if let Some(on) = row.checked {
                node = node.checked(on).text(row.primary.clone());
            }
            if let Some(tap) = row.tap {
                node = node.on_tap(tap);
            }
            if let Some(long) = row.long_press {
                node = node.on_long_press(long);
            }
            let row_idx = self.add(Some(list_idx), node);
            if row.checked.is_some() {
                continue;
            }
            let text_w = full.width() - 2 * PAD;
            let primary_h = LINE_H * lines_for(&row.primary, text_w) + 24;
            let primary = Rect::new(
                full.left + PAD,
                full.top + 24,
                full.right - PAD,
                full.top + 24 + primary_h,
            )
            .clip(&viewport);
            if !primary.is_empty() {
                self.add(
                    Some(row_idx),
                    Node::new(
                        format!("{}_title", row.id),
                        "android.widget.TextView",
                        primary,
                    )
                    .text(row.primary.clone()),
                );
            }
            if let Some(secondary) = row.secondary {
                let second = Rect::new(
                    full.left + PAD,
                    full.top + 24 + primary_h,
                    full.right - PAD,
                    full.bottom - 12,
                )
                .clip(&viewport);
                if !second.is_empty() {
                    self.add(
                        Some(row_idx),
                        Node::new(
                            format!("{}_subtitle", row.id),
                            "android.widget.TextView",
                            second,
                        )
                        .text(secondary),
                    );
                }
            }
        }
        list_idx
    }
}

/// A vertical stack of elements inside a body area.
#[derive(Debug)]
pub(crate) struct Column {
    pub parent: Option<usize>,
    pub y: i32,
    pub left: i32,
    pub right: i32,
    pub bottom: i32,
}

impl Column {
    /// Places `node` with `height` at the current position (skipped when it would not fit).
    pub(crate) fn place(&mut self, ui: &mut Ui, mut node: Node, height: i32) -> Option<usize> {
        if self.y + height > self.bottom {
            return None;
        }
        node.bounds = Rect::new(self.left, self.y, self.right, self.y + height);
        self.y += height + 16;
        Some(ui.add(self.parent, node))
    }

    /// Static text, as tall as its lines.
    pub(crate) fn text(&mut self, ui: &mut Ui, id: &str, text: &str) -> Option<usize> {
        let h = LINE_H * lines_for(text, self.right - self.left) + 24;
        self.place(
            ui,
            Node::new(id, "android.widget.TextView", Rect::default()).text(text),
            h,
        )
    }

    /// A button.
    pub(crate) fn button(
        &mut self,
        ui: &mut Ui,
        id: &str,
        label: &str,
        action: Action,
        enabled: bool,
    ) -> Option<usize> {
        self.place(
            ui,
            Node::new(id, "android.widget.Button", Rect::default())
                .text(label)
                .style(Style::Button)
                .on_tap(action)
                .enabled(enabled),
            144,
        )
    }
}

impl View {
    pub(crate) fn find(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    fn children(&self, idx: usize) -> impl Iterator<Item = usize> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(_, n)| n.parent == Some(idx))
            .map(|(i, _)| i)
    }

    /// A node's human label: its text, its description, or its descendants' texts.
    pub(crate) fn label(&self, idx: usize) -> String {
        let Some(node) = self.nodes.get(idx) else {
            return String::new();
        };
        if let Some(text) = node.text.as_ref().filter(|t| !t.is_empty()) {
            return text.clone();
        }
        if let Some(desc) = node.desc.as_ref().filter(|t| !t.is_empty()) {
            return desc.clone();
        }
        if let Some(hint) = node.hint.as_ref() {
            return hint.clone();
        }
        let parts: Vec<String> = self
            .children(idx)
            .map(|c| self.label(c))
            .filter(|s| !s.is_empty())
            .collect();
        parts.join(" · ")
    }

    /// Texts on screen in reading order (field hints stand in for empty fields).
    pub(crate) fn visible_text(&self) -> Vec<String> {
        let mut out = Vec::new();
        for node in &self.nodes {
            let text = match (&node.text, &node.hint) {
                (Some(t), _) if !t.is_empty() => Some(t.clone()),
                (_, Some(h)) if node.editable => Some(h.clone()),
                _ => None,
            };
            if let Some(text) = text {
                out.push(text);
            }
        }
        out
    }

    pub(crate) fn is_interactive(node: &Node) -> bool {
        node.clickable || node.long_clickable || node.editable || node.scrollable
    }

    /// One element as JSON (without children).
    pub(crate) fn element_json(&self, idx: usize, with_label: bool) -> Value {
        let Some(n) = self.nodes.get(idx) else {
            return Value::Null;
        };
        let (cx, cy) = n.bounds.center();
        let mut m = Map::new();
        m.insert("element_id".into(), json!(n.id));
        m.insert("class".into(), json!(n.class));
        if let Some(t) = &n.text {
            m.insert("text".into(), json!(t));
        }
        if let Some(d) = &n.desc {
            m.insert("content_description".into(), json!(d));
        }
        if let Some(h) = &n.hint {
            m.insert("hint".into(), json!(h));
        }
        if with_label {
            m.insert("label".into(), json!(self.label(idx)));
        }
        m.insert(
            "bounds".into(),
            json!({"left": n.bounds.left, "top": n.bounds.top, "right": n.bounds.right, "bottom": n.bounds.bottom}),
        );
        m.insert("center".into(), json!({"x": cx, "y": cy}));
        m.insert("clickable".into(), json!(n.clickable));
        m.insert("long_clickable".into(), json!(n.long_clickable));
        m.insert("editable".into(), json!(n.editable));
        m.insert("enabled".into(), json!(n.enabled));
        m.insert("focused".into(), json!(n.focused));
        m.insert("scrollable".into(), json!(n.scrollable));
        if let Some(c) = n.checked {
            m.insert("checkable".into(), json!(true));
            m.insert("checked".into(), json!(c));
        }
        Value::Object(m)
    }

    /// The interactive elements, in screen order.
    pub(crate) fn interactive(&self) -> Vec<Value> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| Self::is_interactive(n))
            .map(|(i, _)| self.element_json(i, true))
            .collect()
    }

    /// The nested UI tree.
    pub(crate) fn tree(&self) -> Value {
        self.subtree(0)
    }

    fn subtree(&self, idx: usize) -> Value {
        let mut value = self.element_json(idx, false);
        let children: Vec<Value> = self.children(idx).map(|c| self.subtree(c)).collect();
        if let Some(map) = value.as_object_mut()
            && !children.is_empty()
        {
            map.insert("children".into(), Value::Array(children));
        }
        value
    }

    /// The focused editable node, if any.
    pub(crate) fn focused_field(&self) -> Option<&Node> {
        self.nodes.iter().find(|n| n.focused && n.editable)
    }
}
