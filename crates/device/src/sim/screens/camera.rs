//! The Camera app: the viewfinder, the shutter and the camera switch.

use crate::sim::state::{Action, CameraFacing};
use crate::sim::view::{Node, PAD, Rect, Style, Ui};

use super::Ctx;
use super::widgets::{frame, notice};

/// Camera: the viewfinder and the shutter.
pub(super) fn page(ui: &mut Ui, root: usize, ctx: &Ctx<'_>) -> (String, String) {
    let st = ctx.st;
    let w = ui.w;
    let (content, top, bottom) = frame(ui, root, ctx, "Camera", &[]);
    let facing = match st.camera_facing {
        CameraFacing::Back => "back",
        CameraFacing::Front => "front",
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
