//! Screenshots are downscaled before they leave the backend: `screencap -p` gives a PNG of the
//! physical screen (1080x2400 is 10 MB of pixels and some hundreds of KB of PNG), far more than
//! a model or a tool result needs. The image is decoded, averaged down so that its longest side
//! is at most [`MAX_SIDE`] (the simulator's screenshot of its 1080x2400 screen is 360x800, a
//! third of each side), and encoded again as 8-bit RGB. The scale factor goes back with it so a
//! point on the image maps to the screen: `screen = image / scale`.

use std::io::Cursor;

/// The longest side of a screenshot, in pixels: the simulator's (2400 / 3).
pub(crate) const MAX_SIDE: u32 = 800;

/// A downscaled screenshot.
#[derive(Debug)]
pub(crate) struct Scaled {
    /// PNG bytes (8-bit RGB).
    pub png: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// The size of the PNG `screencap` gave (the physical screen).
    pub screen_width: u32,
    pub screen_height: u32,
    /// Image pixels per screen pixel (1.0 when the PNG was small enough already).
    pub scale: f64,
}

/// Decodes `png`, scales it so its longest side is at most `max_side`, and encodes it again.
/// A PNG already small enough is passed through unchanged (scale 1.0).
pub(crate) fn downscale(png: &[u8], max_side: u32) -> Result<Scaled, String> {
    let mut decoder = png::Decoder::new(Cursor::new(png));
    // Palette and low-bit images to 8 bits per channel, 16-bit channels to 8.
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder
        .read_info()
        .map_err(|e| format!("screencap's PNG does not decode: {e}"))?;
    let (sw, sh) = {
        let info = reader.info();
        (info.width, info.height)
    };
    let longest = sw.max(sh);
    if longest == 0 {
        return Err("screencap's PNG is empty (0 pixels)".into());
    }
    if longest <= max_side.max(1) {
        return Ok(Scaled {
            png: png.to_vec(),
            width: sw,
            height: sh,
            screen_width: sw,
            screen_height: sh,
            scale: 1.0,
        });
    }
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| format!("screencap's {sw}x{sh} PNG is too large to decode"))?;
    let mut pixels = vec![0u8; size];
    let info = reader
        .next_frame(&mut pixels)
        .map_err(|e| format!("screencap's PNG does not decode: {e}"))?;
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => {
            return Err("screencap's PNG kept its palette after expansion".into());
        }
    };
    let scale = f64::from(max_side) / f64::from(longest);
    let out_side = |side: u32| ((f64::from(side) * scale).round() as u32).clamp(1, max_side);
    let (dw, dh) = (out_side(sw), out_side(sh));
    let rgb = average_down(&pixels, info.line_size, channels, (sw, sh), (dw, dh));
    let mut encoded = Vec::new();
    let mut encoder = png::Encoder::new(&mut encoded, dw, dh);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let failed = |e: png::EncodingError| format!("PNG encoding failed: {e}");
    let mut writer = encoder.write_header().map_err(failed)?;
    writer.write_image_data(&rgb).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(Scaled {
        png: encoded,
        width: dw,
        height: dh,
        screen_width: sw,
        screen_height: sh,
        scale,
    })
}

/// Box filter: every output pixel is the mean of the source pixels it covers. Gray is spread
/// to RGB; alpha is dropped (`screencap` is opaque). One pass over the source, row by row,
/// adding each pixel into its output column's sums (cheap even in an unoptimised build).
fn average_down(
    pixels: &[u8],
    stride: usize,
    channels: usize,
    (sw, sh): (u32, u32),
    (dw, dh): (u32, u32),
) -> Vec<u8> {
    let (sw, sh, dw, dh) = (sw as usize, sh as usize, dw as usize, dh as usize);
    // The output cell a source column or row falls in (dw ≤ sw, dh ≤ sh).
    let col_of: Vec<usize> = (0..sw).map(|x| x * dw / sw).collect();
    let mut col_count = vec![0u32; dw];
    for &o in &col_of {
        col_count[o] += 1;
    }
    let mut out = Vec::with_capacity(dw * dh * 3);
    let mut sums = vec![0u32; dw * 3];
    let mut y = 0;
    for oy in 0..dh {
        sums.fill(0);
        let mut rows = 0u32;
        while y < sh && y * dh / sh == oy {
            let row = &pixels[y * stride..y * stride + sw * channels];
            for (px, &o) in row.chunks_exact(channels).zip(&col_of) {
                let cell = &mut sums[o * 3..o * 3 + 3];
                if channels >= 3 {
                    cell[0] += u32::from(px[0]);
                    cell[1] += u32::from(px[1]);
                    cell[2] += u32::from(px[2]);
                } else {
                    let v = u32::from(px[0]);
                    cell[0] += v;
                    cell[1] += v;
                    cell[2] += v;
                }
            }
            rows += 1;
            y += 1;
        }
        for (ox, cell) in sums.chunks_exact(3).enumerate() {
            let n = (col_count[ox] * rows).max(1);
            out.extend(cell.iter().map(|s| (s / n) as u8));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::downscale;

    fn encode(width: u32, height: u32, color: png::ColorType, pixels: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(color);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().unwrap();
        writer.write_image_data(pixels).unwrap();
        writer.finish().unwrap();
        out
    }

    fn decode(png: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut reader = png::Decoder::new(std::io::Cursor::new(png))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    #[test]
    fn an_rgba_screencap_is_averaged_to_the_longest_side() {
        // 6x3 RGBA: left half white, right half black; downscaled to longest side 2.
        let mut px = Vec::new();
        for _y in 0..3 {
            for x in 0..6 {
                let v = if x < 3 { 255 } else { 0 };
                px.extend_from_slice(&[v, v, v, 255]);
            }
        }
        let s = downscale(&encode(6, 3, png::ColorType::Rgba, &px), 2).unwrap();
        assert_eq!(
            (s.width, s.height, s.screen_width, s.screen_height),
            (2, 1, 6, 3)
        );
        assert!((s.scale - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(decode(&s.png), (2, 1, vec![255, 255, 255, 0, 0, 0]));
    }

    #[test]
    fn a_grayscale_png_becomes_rgb() {
        let s = downscale(&encode(4, 4, png::ColorType::Grayscale, &[100; 16]), 2).unwrap();
        assert_eq!(decode(&s.png), (2, 2, vec![100; 12]));
    }

    #[test]
    fn a_small_png_passes_through_unscaled() {
        let png = encode(2, 2, png::ColorType::Rgb, &[7; 12]);
        let s = downscale(&png, 800).unwrap();
        assert_eq!((s.png, s.scale), (png, 1.0));
    }

    #[test]
    fn a_truncated_png_is_a_clear_error() {
        let png = encode(900, 2, png::ColorType::Rgb, &[7; 900 * 2 * 3]);
        let err = downscale(&png[..40], 800).unwrap_err();
        assert!(err.contains("does not decode"), "{err}");
    }
}
