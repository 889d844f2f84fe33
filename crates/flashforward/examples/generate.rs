//! Five seconds of the default model (the small world's student shipped in `models/world/`) on
//! the CPU, written as `generate.mp4`.
//!
//! Run: `cargo run --release -p flashforward --example generate [-- PROMPT OUT.mp4]`

use std::ops::ControlFlow;

use flashforward::{Pipeline, Request};

fn main() -> Result<(), flashforward::Error> {
    let mut args = std::env::args().skip(1);
    let prompt = args.next().unwrap_or_else(|| "a red circle bounces".into());
    let out = args.next().unwrap_or_else(|| "generate.mp4".into());
    let device = Default::default();
    let pipe = Pipeline::<flashforward::Cpu>::load(flashforward::default_model_dir()?, &device)?;
    let request = Request::new(prompt).seconds(5.0).seed(0);
    let report = pipe.generate_with(&request, |chunk| {
        println!("chunk {}/{}: {} frames after {:.2} s", chunk.index + 1, chunk.chunks, chunk.frames.len(), chunk.elapsed.as_secs_f64());
        ControlFlow::Continue(())
    })?;
    println!("{} frames, denoising {:.2} s", report.frames, report.denoise.as_secs_f64());
    let video = pipe.generate(&request)?;
    println!("{}", video.write_mp4(&out)?.display());
    Ok(())
}
