//! Screenshots: the UI tree painted into a downscaled RGB image (boxes, bars and 8x8 bitmap
//! text) and encoded as PNG. A 1080x2400 screen becomes a 360x800 image of a few tens of KB.

use base64::Engine as _;
use font8x8::UnicodeFonts as _;
use serde_json::{Value, json};

use crate::DeviceError;

use super::view::{Node, Rect, Style, View};

/// Screen pixels per image pixel.
pub(crate) const SCALE: i32 = 3;
const ADVANCE: i32 = 9;
const LINE: i32 = 12;

type Rgb = [u8; 3];

struct Palette {
    background: Rgb,
    text: Rgb,
    muted: Rgb,
    bar: Rgb,
    system: Rgb,
    system_text: Rgb,
    button: Rgb,
    accent: Rgb,
    on_accent: Rgb,
    field: Rgb,
    line: Rgb,
    bubble_in: Rgb,
    bubble_out: Rgb,
    panel: Rgb,
    notice: Rgb,
}

const LIGHT: Palette = Palette {
    background: [255, 255, 255],
    text: [32, 33, 36],
    muted: [128, 134, 139],
    bar: [241, 243, 244],
    system: [32, 33, 36],
    system_text: [232, 234, 237],
    button: [232, 240, 254],
    accent: [26, 115, 232],
    on_accent: [255, 255, 255],
    field: [248, 249, 250],
    line: [218, 220, 224],
    bubble_in: [241, 243, 244],
    bubble_out: [210, 227, 252],
    panel: [255, 255, 255],
    notice: [254, 239, 195],
};

const DARK: Palette = Palette {
    background: [18, 18, 18],
    text: [232, 234, 237],
    muted: [154, 160, 166],
    bar: [32, 33, 36],
    system: [0, 0, 0],
    system_text: [232, 234, 237],
    button: [48, 49, 52],
    accent: [138, 180, 248],
    on_accent: [32, 33, 36],
    field: [40, 42, 45],
    line: [60, 64, 67],
    bubble_in: [48, 49, 52],
    bubble_out: [25, 69, 128],
    panel: [41, 42, 45],
    notice: [92, 74, 20],
};

struct Canvas {
    w: i32,
    h: i32,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: i32, h: i32, fill: Rgb) -> Self {
        let n = usize::try_from(w * h).unwrap_or(0);
        let mut px = Vec::with_capacity(n * 3);
        for _ in 0..n {
            px.extend_from_slice(&fill);
        }
        Self { w, h, px }
    }

    fn put(&mut self, x: i32, y: i32, c: Rgb) {
        if x < 0 || y < 0 || x >= self.w || y >= self.h {
            return;
        }
        let i = usize::try_from((y * self.w + x) * 3).unwrap_or(usize::MAX);
        if let Some(slot) = self.px.get_mut(i..i + 3) {
            slot.copy_from_slice(&c);
        }
    }

    fn fill(&mut self, r: Rect, c: Rgb) {
        for y in r.top.max(0)..r.bottom.min(self.h) {
            for x in r.left.max(0)..r.right.min(self.w) {
                self.put(x, y, c);
            }
        }
    }

    fn darken(&mut self, r: Rect) {
        for y in r.top.max(0)..r.bottom.min(self.h) {
            for x in r.left.max(0)..r.right.min(self.w) {
                let i = usize::try_from((y * self.w + x) * 3).unwrap_or(usize::MAX);
                if let Some(slot) = self.px.get_mut(i..i + 3) {
                    for v in slot {
                        *v /= 2;
                    }
                }
            }
        }
    }

    fn outline(&mut self, r: Rect, c: Rgb) {
        self.fill(Rect::new(r.left, r.top, r.right, r.top + 1), c);
        self.fill(Rect::new(r.left, r.bottom - 1, r.right, r.bottom), c);
        self.fill(Rect::new(r.left, r.top, r.left + 1, r.bottom), c);
        self.fill(Rect::new(r.right - 1, r.top, r.right, r.bottom), c);
    }

    fn glyph(&mut self, x: i32, y: i32, ch: char, size: i32, c: Rgb, clip: Rect) {
        let Some(rows) = glyph_rows(ch) else {
            // No bitmap for this character (emoji, CJK, …): draw a hollow box.
            let r = Rect::new(x, y, x + 7 * size, y + 8 * size).clip(&clip);
            if !r.is_empty() {
                self.outline(r, c);
            }
            return;
        };
        for (row, bits) in (0i32..).zip(rows) {
            for col in 0..8 {
                if bits & (1 << col) != 0 {
                    for dy in 0..size {
                        for dx in 0..size {
                            let (px, py) = (x + col * size + dx, y + row * size + dy);
                            if clip.contains(f64::from(px), f64::from(py)) {
                                self.put(px, py, c);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Draws wrapped text inside `area`; returns nothing (overflow is clipped).
    fn text(&mut self, area: Rect, text: &str, size: i32, c: Rgb, center: bool) {
        let per_line = ((area.width()) / (ADVANCE * size)).max(1);
        let mut lines: Vec<String> = Vec::new();
        for para in text.split('\n') {
            let chars: Vec<char> = para.chars().collect();
            if chars.is_empty() {
                lines.push(String::new());
            }
            for chunk in chars.chunks(usize::try_from(per_line).unwrap_or(1)) {
                lines.push(chunk.iter().collect());
            }
        }
        let line_h = LINE * size;
        let total = i32::try_from(lines.len()).unwrap_or(1) * line_h;
        let mut y = if center {
            area.top + ((area.height() - total) / 2).max(0)
        } else {
            area.top
        };
        for line in lines {
            if y >= area.bottom {
                break;
            }
            let width = i32::try_from(line.chars().count()).unwrap_or(0) * ADVANCE * size;
            let mut x = if center {
                area.left + ((area.width() - width) / 2).max(0)
            } else {
                area.left
            };
            for ch in line.chars() {
                self.glyph(x, y, ch, size, c, area);
                x += ADVANCE * size;
            }
            y += line_h;
        }
    }
}

fn glyph_rows(ch: char) -> Option<[u8; 8]> {
    let ch = match ch {
        '—' | '–' | '‒' | '−' => '-',
        '‘' | '’' | '‚' => '\'',
        '“' | '”' | '„' => '"',
        '…' => '.',
        '\u{a0}' => ' ',
        other => other,
    };
    font8x8::BASIC_FONTS
        .get(ch)
        .or_else(|| font8x8::LATIN_FONTS.get(ch))
        .or_else(|| font8x8::GREEK_FONTS.get(ch))
        .or_else(|| font8x8::BOX_FONTS.get(ch))
        .or_else(|| font8x8::BLOCK_FONTS.get(ch))
        .or_else(|| font8x8::HIRAGANA_FONTS.get(ch))
}

fn small(r: Rect) -> Rect {
    Rect::new(
        r.left / SCALE,
        r.top / SCALE,
        r.right / SCALE,
        r.bottom / SCALE,
    )
}

fn inset(r: Rect, d: i32) -> Rect {
    Rect::new(r.left + d, r.top + d, r.right - d, r.bottom - d)
}

fn paint(canvas: &mut Canvas, node: &Node, p: &Palette) {
    let r = small(node.bounds);
    if r.is_empty() {
        return;
    }
    let label = node.text.clone().filter(|t| !t.is_empty());
    let fg = if node.enabled { p.text } else { p.muted };
    match node.style {
        Style::Container | Style::Plain => {
            if node.id == "root" {
                canvas.fill(r, p.background);
            } else if node.id == "viewfinder" {
                canvas.fill(r, [20, 24, 28]);
                if let Some(d) = &node.desc {
                    canvas.text(inset(r, 6), d, 1, [200, 200, 200], true);
                }
            }
            if let Some(t) = label {
                canvas.text(r, &t, 1, fg, false);
            }
        }
        Style::Title => {
            if let Some(t) = label {
                canvas.text(r, &t, 2, p.text, false);
            }
        }
        Style::Big => {
            if let Some(t) = label {
                canvas.text(r, &t, 4, p.text, false);
            }
        }
        Style::Status | Style::NavBar => canvas.fill(r, p.system),
        Style::Bar => {
            canvas.fill(r, p.bar);
            canvas.fill(Rect::new(r.left, r.bottom - 1, r.right, r.bottom), p.line);
        }
        Style::Button => {
            canvas.fill(inset(r, 1), if node.enabled { p.button } else { p.bar });
            canvas.outline(r, p.line);
            if let Some(t) = label.or_else(|| node.desc.clone()) {
                canvas.text(
                    inset(r, 3),
                    &t,
                    1,
                    if node.enabled { p.accent } else { p.muted },
                    true,
                );
            }
        }
        Style::Fab => {
            canvas.fill(r, if node.enabled { p.accent } else { p.line });
            if let Some(t) = label.or_else(|| node.desc.clone()) {
                canvas.text(inset(r, 3), &t, 1, p.on_accent, true);
            }
        }
        Style::Field => {
            canvas.fill(r, p.field);
            let underline = if node.focused { p.accent } else { p.line };
            let thick = if node.focused { 2 } else { 1 };
            canvas.fill(
                Rect::new(r.left, r.bottom - thick, r.right, r.bottom),
                underline,
            );
            let area = Rect::new(r.left + 4, r.top + 4, r.right - 4, r.bottom - 3);
            match label {
                Some(t) => canvas.text(area, &t, 1, fg, false),
                None => canvas.text(area, node.hint.as_deref().unwrap_or(""), 1, p.muted, false),
            }
        }
        Style::Row => {
            canvas.fill(Rect::new(r.left, r.bottom - 1, r.right, r.bottom), p.line);
            if let Some(t) = label {
                canvas.text(
                    Rect::new(r.left + 16, r.top + 8, r.right - 16, r.bottom),
                    &t,
                    1,
                    fg,
                    false,
                );
            }
        }
        Style::Switch => {
            canvas.fill(Rect::new(r.left, r.bottom - 1, r.right, r.bottom), p.line);
            if let Some(t) = label {
                canvas.text(
                    Rect::new(
                        r.left + 16,
                        r.top + (r.height() - 8) / 2,
                        r.right - 70,
                        r.bottom,
                    ),
                    &t,
                    1,
                    fg,
                    false,
                );
            }
            let on = node.checked.unwrap_or(false);
            let cy = (r.top + r.bottom) / 2;
            let track = Rect::new(r.right - 60, cy - 6, r.right - 24, cy + 6);
            canvas.fill(track, if on { p.accent } else { p.line });
            let knob_x = if on { track.right - 12 } else { track.left };
            canvas.fill(
                Rect::new(knob_x, cy - 8, knob_x + 12, cy + 8),
                if on { p.accent } else { p.muted },
            );
        }
        Style::BubbleIn | Style::BubbleOut => {
            let fill = if node.style == Style::BubbleIn {
                p.bubble_in
            } else {
                p.bubble_out
            };
            canvas.fill(inset(r, 2), fill);
        }
        Style::Icon => {
            if node.id.starts_with("app_icon_") {
                let size = (r.width().min(r.height()) - 30).max(10);
                let icon = Rect::new(
                    r.left + (r.width() - size) / 2,
                    r.top + 4,
                    r.left + (r.width() + size) / 2,
                    r.top + 4 + size,
                );
                canvas.fill(icon, p.accent);
                if let Some(first) = label.as_ref().and_then(|t| t.chars().next()) {
                    canvas.text(icon, &first.to_string(), 3, p.on_accent, true);
                }
                if let Some(t) = label {
                    canvas.text(
                        Rect::new(r.left, icon.bottom + 4, r.right, r.bottom),
                        &t,
                        1,
                        p.text,
                        true,
                    );
                }
            } else {
                let symbol = match node.id.as_str() {
                    "nav_back" | "nav_up" => "<",
                    "nav_home" => "O",
                    "nav_recents" => "[]",
                    _ => label.as_deref().unwrap_or("*"),
                };
                let color = if node.id.starts_with("nav_") && node.id != "nav_up" {
                    p.system_text
                } else {
                    p.text
                };
                canvas.text(r, symbol, 2, color, true);
            }
        }
        Style::Scrim => canvas.darken(r),
        Style::Panel => {
            canvas.fill(r, p.panel);
            canvas.outline(r, p.line);
        }
        Style::Notice => {
            canvas.fill(r, p.notice);
            if let Some(t) = label {
                canvas.text(inset(r, 4), &t, 1, p.text, false);
            }
        }
    }
    // Texts inside system bars are light.
    if matches!(node.style, Style::Plain)
        && node.id.starts_with("status_")
        && let Some(t) = &node.text
    {
        canvas.fill(r, p.system);
        canvas.text(r, t, 1, p.system_text, false);
    }
}

/// Paints the view; returns (PNG bytes, width, height).
pub(crate) fn render_png(view: &View, dark: bool) -> Result<(Vec<u8>, u32, u32), DeviceError> {
    let palette = if dark { &DARK } else { &LIGHT };
    let (w, h) = ((view.width / SCALE).max(1), (view.height / SCALE).max(1));
    let mut canvas = Canvas::new(w, h, palette.background);
    for node in &view.nodes {
        paint(&mut canvas, node, palette);
    }
    let (uw, uh) = (u32::try_from(w).unwrap_or(1), u32::try_from(h).unwrap_or(1));
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, uw, uh);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Fast);
        let internal = |e: png::EncodingError| DeviceError::Internal {
            message: format!("PNG encoding failed: {e}"),
        };
        let mut writer = encoder.write_header().map_err(internal)?;
        writer.write_image_data(&canvas.px).map_err(internal)?;
        writer.finish().map_err(internal)?;
    }
    Ok((out, uw, uh))
}

/// The `screenshot` object of `screen.get`.
pub(crate) fn screenshot(view: &View, dark: bool) -> Result<Value, DeviceError> {
    let (png, w, h) = render_png(view, dark)?;
    Ok(json!({
        "mime_type": "image/png",
        "width": w,
        "height": h,
        "scale": 1.0 / f64::from(SCALE),
        "screen_width": view.width,
        "screen_height": view.height,
        "byte_length": png.len(),
        "data_base64": base64::engine::general_purpose::STANDARD.encode(&png),
    }))
}
