//! RGB frames and their conversion from decoded VAE output.
//!
//! A decoded video is `[3, T, H, W]` (or `[1, 3, T, H, W]`) f32 in [-1, 1]. A [`Frame`] is one
//! `H x W` RGB8 image, row-major, 3 bytes per pixel.

use std::borrow::Cow;

use crate::error::{Context, Result, invalid};
use burn::tensor::TensorData;

/// One RGB8 video frame (`image`'s RGB image: row-major, 3 bytes per pixel).
pub type Frame = image::RgbImage;

/// A `width x height` frame from row-major RGB bytes (`3 * width * height` of them).
pub fn frame(width: usize, height: usize, rgb: Vec<u8>) -> Result<Frame> {
    if width == 0 || height == 0 {
        invalid!("frame size {width}x{height} is empty");
    }
    let len = rgb.len();
    Frame::from_raw(width as u32, height as u32, rgb)
        .filter(|_| len == 3 * width * height)
        .with_context(|| format!("frame {width}x{height} needs {} RGB bytes, got {len}", 3 * width * height))
}

/// The frame grown to even width and height by repeating its last column/row (H.264 4:2:0 needs
/// even sizes); borrowed when already even.
pub fn padded_to_even(frame: &Frame) -> Cow<'_, Frame> {
    let (w, h) = (frame.width() as usize, frame.height() as usize);
    let (width, height) = (w.next_multiple_of(2), h.next_multiple_of(2));
    if (width, height) == (w, h) {
        return Cow::Borrowed(frame);
    }
    let raw = frame.as_raw();
    let mut rgb = Vec::with_capacity(3 * width * height);
    for y in 0..height {
        let row = &raw[3 * w * y.min(h - 1)..][..3 * w];
        rgb.extend_from_slice(row);
        if width > w {
            rgb.extend_from_slice(&row[row.len() - 3..]);
        }
    }
    Cow::Owned(Frame::from_raw(width as u32, height as u32, rgb).expect("an even frame holds its bytes"))
}

/// Frames of a decoded video `values` with `shape` `[3, T, H, W]` or `[1, 3, T, H, W]`, mapping
/// [-1, 1] to [0, 255] (values outside are clamped).
pub fn frames_from_video(values: &[f32], shape: &[usize]) -> Result<Vec<Frame>> {
    let [channels, t, h, w] = match *shape {
        [c, t, h, w] | [1, c, t, h, w] => [c, t, h, w],
        _ => invalid!("decoded video must be [3, T, H, W] or [1, 3, T, H, W], got {shape:?}"),
    };
    if channels != 3 {
        invalid!("decoded video must have 3 channels, got shape {shape:?}");
    }
    if values.len() != 3 * t * h * w {
        invalid!("decoded video of shape {shape:?} needs {} values, got {}", 3 * t * h * w, values.len());
    }
    let plane = t * h * w;
    (0..t)
        .map(|f| {
            let rgb = (f * h * w..(f + 1) * h * w).flat_map(|i| (0..3).map(move |c| to_u8(values[c * plane + i]))).collect();
            frame(w, h, rgb)
        })
        .collect()
}

/// [`frames_from_video`] for a decoded tensor's data (any float dtype; converted to f32).
pub fn frames_from_tensor_data(data: TensorData) -> Result<Vec<Frame>> {
    let data = data.convert::<f32>();
    let values = data.as_slice::<f32>().map_err(|e| crate::Error::Invalid(format!("decoded video data is not readable as f32: {e:?}")))?;
    frames_from_video(values, &data.shape)
}

fn to_u8(x: f32) -> u8 {
    ((x.clamp(-1.0, 1.0) + 1.0) * 127.5).round() as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn video_tensor_maps_channels_and_range() {
        // [3, T=2, H=1, W=2]: R plane, G plane, B plane; frame 1 differs from frame 0.
        let values = [
            -1.0, 1.0, 0.0, 2.0, // R: f0 (x0, x1), f1 (x0, x1)
            0.0, 0.0, -1.0, -3.0, // G
            1.0, -1.0, 0.5, 1.0, // B
        ];
        let frames = frames_from_video(&values, &[3, 2, 1, 2]).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!((frames[0].width(), frames[0].height()), (2, 1));
        assert_eq!(frames[0].as_raw(), &[0, 128, 255, 255, 128, 0]);
        // 2.0 and -3.0 are clamped; 0.5 -> 191.25 -> 191.
        assert_eq!(frames[1].as_raw(), &[128, 0, 191, 255, 0, 255]);
        let batched = frames_from_video(&values, &[1, 3, 2, 1, 2]).unwrap();
        assert_eq!(batched, frames);
    }

    #[test]
    fn tensor_data_of_any_float_dtype_converts() {
        let data = TensorData::new(vec![1.0f64; 3 * 4], [3, 1, 2, 2]);
        let frames = frames_from_tensor_data(data).unwrap();
        assert_eq!(frames[0].as_raw(), &[255; 12]);
    }

    #[test]
    fn bad_shapes_are_rejected() {
        assert!(frames_from_video(&[0.0; 8], &[2, 1, 2, 2]).is_err());
        assert!(frames_from_video(&[0.0; 11], &[3, 1, 2, 2]).is_err());
        assert!(frames_from_video(&[0.0; 24], &[2, 3, 1, 2, 2]).is_err());
        assert!(frame(2, 2, vec![0; 11]).is_err());
    }

    #[test]
    fn odd_frames_pad_by_repeating_the_edge() {
        // 3x1 frame: pixels a, b, c -> 4x2, every row a b c c.
        let small = frame(3, 1, vec![1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
        let padded = padded_to_even(&small);
        assert_eq!((padded.width(), padded.height()), (4, 2));
        let row = [1, 2, 3, 4, 5, 6, 7, 8, 9, 7, 8, 9];
        assert_eq!(padded.as_raw(), &[row, row].concat());
        let even = frame(2, 2, vec![0; 12]).unwrap();
        assert!(matches!(padded_to_even(&even), Cow::Borrowed(_)));
    }
}
