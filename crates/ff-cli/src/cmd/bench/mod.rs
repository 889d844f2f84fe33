//! `flashforward bench`: the benchmarks, one subcommand each, and what they share (memory
//! readings and parameter counts; the DiT presets are `crate::schedule::preset`).

mod attention;
mod dit;
mod dmd;
mod scale;
mod schedules;
mod train;
mod vae;

use ff_model::DitConfig;

command_group! {
    /// Run several schedules and executors on one random-weight model and compare them.
    #[command(after_help = "Columns: wall s = denoising path after the warm-up runs; TTFF (time to first frames) = \
                            end of the forward that finishes the first chunk (no VAE); slowest worker busy s = the \
                            most forward time of one worker; worst worker K/V = the largest peak of live K/V bytes of \
                            one worker; K/V per device = the sum of the peaks of the workers on each device.")]
    Schedules => schedules,
    /// Time the DiT chunk forward (tokens/s, share outside matmul/attention).
    Dit => dit,
    /// Time the Wan VAE decode of a clip's latents (tiny and Wan2.1 widths, random weights).
    Vae => vae,
    /// Time block-sparse attention (dense mask, blockwise, kernel) on a packed or chunk layout.
    Attention => attention,
    /// Time one Phase 1 training step and print the memory plan of the paper's layout.
    Train => train,
    /// Time one Phase 2 generator step and one critic step and print the Phase 2 memory plan.
    Dmd => dmd,
}

/// The shape of the training steps `bench train` and `bench dmd` time.
#[derive(clap::Args)]
pub struct StepShape {
    /// Presets to time: tiny, small, 1.3b, 14b.
    #[arg(long, value_delimiter = ',', default_value = "tiny,small")]
    pub configs: Vec<String>,
    /// Latent frames L of the clip (`train`: the paper's 81 gives 155 packed frames, 21 gives 35)
    /// or of the rollout (`dmd`).
    #[arg(long, default_value_t = 21)]
    pub latents: usize,
    /// Latent height and width.
    #[arg(long, default_value_t = 8)]
    pub height: usize,
    #[arg(long, default_value_t = 8)]
    pub width: usize,
    /// Prompt tokens.
    #[arg(long, default_value_t = 32)]
    pub text_tokens: usize,
    /// LoRA rank of the two roles (paper: 256 at 1.3B), and of the critic in `dmd`.
    #[arg(long, default_value_t = 16)]
    pub lora_rank: usize,
}

/// `VmHWM` / `VmRSS` of this process in bytes (Linux).
pub fn proc_status(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Parameters of a preset: (backbone, role LoRA of `rank` on self q,k,v,o and cross q,o of
/// both roles + the two role vectors).
pub fn param_counts(c: &DitConfig, rank: usize) -> (usize, usize) {
    let (d, f) = (c.dim, c.ffn_dim);
    let linear = |i: usize, o: usize| i * o + o;
    let patch = linear(c.in_channels * c.patch_size.iter().product::<usize>(), d);
    let embeddings = linear(c.text_dim, d) + linear(d, d) + linear(c.freq_dim, d) + linear(d, d) + linear(d, 6 * d);
    // modulation 6d; self and cross attention 4 linears + 2 RMS norms each; norm3 (affine); FFN.
    let block = 6 * d + 2 * (4 * linear(d, d) + 2 * d) + 2 * d + linear(d, f) + linear(f, d);
    let head = 2 * d + linear(d, c.patch_out());
    let roles = c.num_layers * 6 * 2 * rank * 2 * d + 2 * d;
    (patch + embeddings + c.num_layers * block + head, roles)
}

pub fn gib(bytes: u64) -> String {
    format!("{:.3} GiB", bytes as f64 / (1u64 << 30) as f64)
}
