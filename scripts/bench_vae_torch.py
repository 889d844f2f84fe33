"""PyTorch CPU baseline for `flashforward bench vae`: diffusers `AutoencoderKLWan` decode, f32,
random weights, same presets and shapes as crates/ff-cli/src/cmd/bench/vae.rs:
  tiny   : base_dim 8, one residual block per stage, 64x64 px
  wan2.1 : the released Wan2.1 VAE's width (base_dim 96, two residual blocks), 480x832 px
Latents [1, 16, L, H/8, W/8] -> video [1, 3, 1 + 4(L-1), H, W]. One warm-up unless --iters 0
(then the first call alone is timed), then the mean of --iters decodes. Prints one JSON line.

    python bench_vae_torch.py --preset tiny --threads 2 [--latents 21] [--height H --width W]
"""
import argparse, json, time

import torch
from diffusers import AutoencoderKLWan

PRESETS = {
    "tiny": (dict(base_dim=8, num_res_blocks=1), (64, 64)),
    "wan2.1": (dict(base_dim=96, num_res_blocks=2), (480, 832)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny", choices=list(PRESETS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--latents", type=int, default=21)
    ap.add_argument("--height", type=int)
    ap.add_argument("--width", type=int)
    ap.add_argument("--iters", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    kwargs, (h, w) = PRESETS[a.preset]
    h, w = a.height or h, a.width or w
    vae = AutoencoderKLWan(z_dim=16, dim_mult=[1, 2, 4, 4], attn_scales=[],
                           temperal_downsample=[False, True, True], **kwargs).eval()
    z = torch.randn(1, 16, a.latents, h // 8, w // 8)

    def decode():
        with torch.inference_mode():
            return vae.decode(z).sample

    if a.iters == 0:
        t = time.perf_counter()
        out = decode()
        seconds = time.perf_counter() - t
    else:
        out = decode()
        t = time.perf_counter()
        for _ in range(a.iters):
            decode()
        seconds = (time.perf_counter() - t) / a.iters
    print(json.dumps(dict(preset=a.preset, threads=a.threads, latents=a.latents, pixels=[h, w],
                          frames=out.shape[2], seconds=seconds, torch=torch.__version__)))


if __name__ == "__main__":
    main()
