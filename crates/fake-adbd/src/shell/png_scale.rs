//! `screencap` gives a PNG of the physical screen (`wm size`); the simulator paints a smaller
//! one (a third of each side). This scales it up by whole pixels (each simulator pixel becomes
//! a block), so the PNG's size and the screen's agree as on a real phone.

use std::io::Cursor;

/// The PNG scaled to `width`×`height`, or unchanged when it already has that size. Refuses a
/// size that is not a whole multiple of the PNG's.
pub fn to_screen_size(png: &[u8], width: u32, height: u32) -> Result<Vec<u8>, String> {
    let decoder = png::Decoder::new(Cursor::new(png));
    let mut reader = decoder
        .read_info()
        .map_err(|e| format!("the simulator's PNG does not decode: {e}"))?;
    let size = reader
        .output_buffer_size()
        .ok_or("the simulator's PNG is too large")?;
    let mut pixels = vec![0u8; size];
    let info = reader
        .next_frame(&mut pixels)
        .map_err(|e| format!("the simulator's PNG does not decode: {e}"))?;
    if (info.width, info.height) == (width, height) {
        return Ok(png.to_vec());
    }
    if info.color_type != png::ColorType::Rgb || info.bit_depth != png::BitDepth::Eight {
        return Err(format!(
            "the simulator's PNG is {:?}/{:?}, not 8-bit RGB",
            info.color_type, info.bit_depth
        ));
    }
    let whole =
        |big: u32, small: u32| (small > 0 && big.is_multiple_of(small)).then(|| big / small);
    let (Some(sx), Some(sy)) = (whole(width, info.width), whole(height, info.height)) else {
        return Err(format!(
            "the simulator's {}x{} PNG does not scale evenly to the {width}x{height} screen",
            info.width, info.height
        ));
    };
    let src_stride = info.line_size;
    let mut out = Vec::with_capacity(width as usize * height as usize * 3);
    let mut row = Vec::with_capacity(width as usize * 3);
    for y in 0..info.height as usize {
        row.clear();
        let src = &pixels[y * src_stride..y * src_stride + info.width as usize * 3];
        for px in src.chunks_exact(3) {
            for _ in 0..sx {
                row.extend_from_slice(px);
            }
        }
        for _ in 0..sy {
            out.extend_from_slice(&row);
        }
    }
    let mut encoded = Vec::new();
    let mut encoder = png::Encoder::new(&mut encoded, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let failed = |e: png::EncodingError| format!("PNG encoding failed: {e}");
    let mut writer = encoder.write_header().map_err(failed)?;
    writer.write_image_data(&out).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(encoded)
}

#[cfg(test)]
mod tests {
    use super::to_screen_size;

    fn png(width: u32, height: u32, pixels: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().expect("header");
        writer.write_image_data(pixels).expect("data");
        writer.finish().expect("finish");
        out
    }

    #[test]
    fn each_pixel_becomes_a_block() {
        let small = png(2, 1, &[255, 0, 0, 0, 0, 255]);
        let big = to_screen_size(&small, 4, 2).expect("scales");
        let mut reader = png::Decoder::new(std::io::Cursor::new(big))
            .read_info()
            .expect("decodes");
        let mut buf = vec![0; reader.output_buffer_size().expect("size")];
        let info = reader.next_frame(&mut buf).expect("frame");
        assert_eq!((info.width, info.height), (4, 2));
        let red_then_blue = [255, 0, 0, 255, 0, 0, 0, 0, 255, 0, 0, 255];
        assert_eq!(&buf[..12], &red_then_blue);
        assert_eq!(&buf[12..24], &red_then_blue);
        assert!(to_screen_size(&small, 5, 2).is_err());
        assert_eq!(to_screen_size(&small, 2, 1).expect("same"), small);
    }
}
