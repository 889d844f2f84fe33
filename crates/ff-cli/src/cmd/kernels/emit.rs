//! `flashforward kernels emit --target cuda --out DIR`: one `NAME.cu` per kernel and
//! `kernels.json` with the launch settings (`scripts/check-cuda-kernels.sh` compiles them with
//! NVRTC). The source comes from `kernels_cubecl::kernel::emit`, in builds with the `cuda` feature.

use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Source language: `cuda` (CUDA C++, CubeCL's CUDA compiler).
    #[arg(long, default_value = "cuda")]
    pub target: String,
    /// Folder to write `NAME.cu` and `kernels.json` into (created if missing).
    #[arg(long)]
    pub out: PathBuf,
}

#[cfg(feature = "cuda")]
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    use ff_model::io::write_atomic;
    use std::io::Write;
    if args.target != "cuda" {
        bail!("--target {}: only `cuda` is supported", args.target);
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating --out {}", args.out.display()))?;
    let kernels = kernels_cubecl::kernel::emit::emit_cuda().map_err(anyhow::Error::msg)?;
    let mut listed = Vec::new();
    for k in &kernels {
        let file = format!("{}.cu", k.name);
        write_atomic(&args.out.join(&file), |w| w.write_all(k.source.as_bytes()))?;
        listed.push(serde_json::json!({
            "name": k.name, "file": file, "entrypoint": k.entrypoint, "kind": k.kind, "head_dim": k.head_dim,
            "dtype": k.dtype, "cube_dim": k.cube_dim, "shared_memory_bytes": k.shared_memory_bytes, "grid": k.grid,
            "tensor_cores": k.tensor_cores,
        }));
    }
    let json = serde_json::to_string_pretty(&serde_json::json!({ "target": "cuda", "kernels": listed }))?;
    write_atomic(&args.out.join("kernels.json"), |w| writeln!(w, "{json}"))?;
    println!("{} kernels written to {}", kernels.len(), args.out.display());
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "cuda"))]
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    bail!("kernels emit --target {}: this binary was built without the `cuda` feature (cargo build -p ff-cli --features cuda)", args.target)
}
