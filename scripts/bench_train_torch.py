"""PyTorch CPU baseline for `flashforward bench train`: one Phase 1 packed SFT step, f32, random weights.

Same work as crates/ff-cli/src/cmd/bench/train.rs (`ff_train::sft::SftObjective` + Burn AdamW):
  * the packed layout of a clip of L latents (default 21) and 4 time-rebased crops of L - 10
    latents, built by the same rules as crates/ff-train/src/sft/layout.rs over the inference contract
    of crates/ff-sched/src/contract (ported below): at L = 21, 3 clean anchor copies + 3 noised planner
    inputs + 21 renderer inputs of the clip and 2 planner inputs per crop = 35 frames;
  * 8x8 latents (2x2 patches: 16 tokens per frame), 32 prompt tokens, presets 'tiny'/'small';
  * planner/renderer roles: a role vector per role added to the time embedding, LoRA rank 16
    (alpha 1, scale 1/16, A ~ N(0, 1/sqrt(16)), B = 0) of both roles on self-attention q, k, v, o and
    cross-attention q, o, each role's delta computed over all tokens and multiplied by its 0/1 token
    mask (as ff_model::lora::LoraLinear does for a mixed-role sequence); only the adapters and the
    role vectors are trainable;
  * per step: draw sigma (shifted 1000-step table, shift 5), eps and 4 crop offsets, pack, embed the
    prompt, one forward under the frame-level rules, the grouped velocity loss (per-frame mean squared
    error, mean per group: clip planner, renderer, crop planner; summed), backward, AdamW
    (lr 1e-5, betas (0, 0.999), weight decay 0.01, eps 1e-8; torch's default CPU implementation).

The model is Self-Forcing's CausalWanModel (guandeh17/Self-Forcing modules as prepared by
make_causal_fixtures.py, the same constructor as bench_dit_torch.py) used as a parameter container;
the forward is a plain-PyTorch Wan block forward as bench_dit_torch.py's `plain` one, with autograd,
per-frame RoPE positions and timesteps, and the frame rules as a boolean SDPA mask over tokens
(expanded from the frame-level matrix). Difference from the Rust side: SDPA computes the masked
pairs too (dense 560x560 scores per head at L = 21), where the Rust CPU kernel skips disallowed
frame blocks. One warm-up step, then the mean of --iters steps. Prints one JSON line; --profile also
prints self CPU time per aten op over the timed steps (torch.profiler, to stderr; the JSON's seconds
then include the profiler's overhead).

    python bench_train_torch.py --sfcode DIR --preset small --threads 2 [--iters 2] [--latents 21] [--profile]
"""
import argparse, json, math, sys, time

import torch
import torch.nn.functional as F

PRESETS = {  # DitConfig::tiny() / DitConfig::small()
    "tiny": dict(dim=32, ffn_dim=64, freq_dim=256, text_dim=24, num_heads=2, num_layers=2),
    "small": dict(dim=512, ffn_dim=1536, freq_dim=256, text_dim=256, num_heads=8, num_layers=8),
}

# SftConfig::new() / ContractConfig defaults.
STRIDE, CHUNK, PLANNER_BLOCK, HISTORY, PLANNER_CONTEXT, ANCHOR_WINDOW, CROPS, SHIFT = 10, 3, 3, 5, 18, 3, 4, 5.0
CLEAN, PLANNER, RENDERER = "clean", "planner", "renderer"


# --- ff_sched::Contract (crates/ff-sched/src/contract): anchors, blocks, chunks, windows ---------------
def split(n, size):
    return [range(s, min(s + size, n)) for s in range(0, n, size)]


def contract(latents):
    anchors = list(range(0, latents, STRIDE))
    if anchors[-1] != latents - 1:
        anchors.append(latents - 1)
    na = len(anchors)
    if na < ANCHOR_WINDOW:
        windows = [range(0, na)]
    else:
        step = max(ANCHOR_WINDOW - 1, 1)
        windows, j = [], 0
        while step * j + ANCHOR_WINDOW <= na:
            windows.append(range(step * j, step * j + ANCHOR_WINDOW))
            j += 1
        if windows[-1].stop < na:
            windows.append(range(na - ANCHOR_WINDOW, na))
    chunks = split(latents, CHUNK)
    chunk_window = [next(w for w, r in enumerate(windows) if anchors[r.stop - 1] >= ch.stop - 1) for ch in chunks]
    blocks = split(na, PLANNER_BLOCK)
    return dict(latents=latents, anchors=anchors, blocks=blocks, chunks=chunks,
                window=lambda i: windows[chunk_window[i]],
                planner_context=lambda j: range(max(blocks[j].start - PLANNER_CONTEXT, 0), blocks[j].start),
                tail=lambda i: range(max(i - HISTORY, 0), i), block_of=lambda a: a // PLANNER_BLOCK)


# --- ff_train::sft::PackedLayout (crates/ff-train/src/sft/layout.rs) ---------------------------------
def packed_layout(clip, crop, offsets):
    frames, rules = [], []  # frames: (sequence, kind, latent, position)

    def push(f):
        frames.append(f)
        return len(frames) - 1

    def sequence(c, offset, renderer):
        seq = len({f[0] for f in frames})
        consumed = {c["block_of"](a) for j in range(len(c["blocks"])) for a in c["planner_context"](j)}
        if renderer:
            consumed |= {c["block_of"](a) for i in range(len(c["chunks"])) for a in c["window"](i)}
        clean_of = [push((seq, CLEAN, offset + p, p)) if c["block_of"](a) in consumed else None
                    for a, p in enumerate(c["anchors"])]
        planner = [push((seq, PLANNER, offset + p, p)) for p in c["anchors"]]
        rend = [push((seq, RENDERER, offset + p, p)) for p in range(c["latents"])] if renderer else []
        clean = lambda anchors: [clean_of[a] for a in anchors if clean_of[a] is not None]
        for j, block in enumerate(c["blocks"]):
            context = clean(c["planner_context"](j))
            inputs = [planner[a] for a in block]
            rules.append((inputs, inputs + context))
            copies = clean(block)
            if copies:
                rules.append((copies, copies + context))
        for i, chunk in enumerate(c["chunks"] if renderer else []):
            own = [rend[p] for p in chunk]
            history = [rend[p] for h in c["tail"](i) for p in c["chunks"][h]]
            rules.append((own, own + history + clean(c["window"](i))))

    sequence(clip, 0, True)
    for o in offsets:
        sequence(crop, o, False)
    allowed = torch.zeros(len(frames), len(frames), dtype=torch.bool)
    for q, k in rules:
        allowed[torch.tensor(q)[:, None], torch.tensor(k)[None, :]] = True
    return frames, allowed


def group_of(frame):
    seq, kind = frame[0], frame[1]
    if kind == CLEAN:
        return None
    return "renderer" if kind == RENDERER else ("planner" if seq == 0 else "rebased")


# --- the model ---------------------------------------------------------------------------------------
def rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def rope_cos_sin(freqs, positions, h, w, hd):
    """cos/sin [F*h*w, hd/2] of Wan's 3-axis RoPE, temporal index = each frame's position."""
    c = hd // 2
    parts = freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)
    f = len(positions)
    fr = torch.cat([parts[0][positions].view(f, 1, 1, -1).expand(f, h, w, -1),
                    parts[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
                    parts[2][:w].view(1, 1, w, -1).expand(f, h, w, -1)], dim=-1).reshape(f * h * w, c)
    return fr.real.float().contiguous(), fr.imag.float().contiguous()


def rope(x, cos, sin):  # x [B, H, L, hd], pairs (2j, 2j+1) rotated by the complex factor
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


class Lora:
    """Adapters of both roles on one linear: x -> base(x) + sum_r mask_r * (x A_r) B_r * alpha/rank."""

    def __init__(self, base, rank):
        self.base = base
        d_in, d_out = base.in_features, base.out_features
        self.a = [torch.randn(d_in, rank).mul_(1 / math.sqrt(rank)).requires_grad_() for _ in range(2)]
        self.b = [torch.zeros(rank, d_out).requires_grad_() for _ in range(2)]
        self.scale = 1.0 / rank

    def params(self):
        return self.a + self.b

    def __call__(self, x, role_masks):
        y = self.base(x)
        for r, mask in enumerate(role_masks):
            y = y + (x @ self.a[r] @ self.b[r]) * self.scale * mask
        return y


def forward(model, loras, role_vec, sin_emb, inputs, t, roles, role_masks, cos, sin, attn_mask, text):
    """inputs [1, C, F, h, w]; t [F]; roles [F] (0 planner, 1 renderer); attn_mask [n, n] bool."""
    dim, H = model.dim, model.num_heads
    hd, eps = dim // H, model.eps
    x = model.patch_embedding(inputs)  # [1, dim, F, gh, gw]
    b, _, f, gh, gw = x.shape
    fs = gh * gw
    x = x.flatten(2).transpose(1, 2)  # [1, n, dim]
    n = x.shape[1]
    temb = model.time_embedding(sin_emb(model.freq_dim, t).float()) + role_vec[roles]  # [F, dim]
    e0 = model.time_projection(temb).unflatten(1, (6, dim)).unsqueeze(0)  # [1, F, 6, dim]

    def modulate(h, shift, scale):  # per-frame modulation
        return (h.view(b, f, fs, dim) * (1 + scale) + shift).view(b, n, dim)

    ctx = model.text_embedding(text)  # [1, T, dim]; the prompt's K/V per layer below, as TextContext
    for blk, lo in zip(model.blocks, loras):
        m = [u.unsqueeze(2) for u in (blk.modulation.unsqueeze(1) + e0).unbind(2)]
        sa, ca = blk.self_attn, blk.cross_attn
        h = modulate(F.layer_norm(x, (dim,), eps=eps), m[0], m[1])
        q = rms(lo["q"](h, role_masks), sa.norm_q.weight, eps).view(b, n, H, hd).transpose(1, 2)
        k = rms(lo["k"](h, role_masks), sa.norm_k.weight, eps).view(b, n, H, hd).transpose(1, 2)
        v = lo["v"](h, role_masks).view(b, n, H, hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        y = lo["o"](y.transpose(1, 2).reshape(b, n, dim), role_masks)
        x = x + (y.view(b, f, fs, dim) * m[2]).view(b, n, dim)
        tk = rms(ca.k(ctx), ca.norm_k.weight, eps).view(b, -1, H, hd).transpose(1, 2)
        tv = ca.v(ctx).view(b, -1, H, hd).transpose(1, 2)
        qc = rms(lo["cq"](blk.norm3(x), role_masks), ca.norm_q.weight, eps).view(b, n, H, hd).transpose(1, 2)
        yc = F.scaled_dot_product_attention(qc, tk, tv)
        x = x + lo["co"](yc.transpose(1, 2).reshape(b, n, dim), role_masks)
        hf = modulate(F.layer_norm(x, (dim,), eps=eps), m[3], m[4])
        x = x + (blk.ffn(hf).view(b, f, fs, dim) * m[5]).view(b, n, dim)
    hm = [u.unsqueeze(2) for u in (model.head.modulation.unsqueeze(1) + temb.unsqueeze(0).unsqueeze(2)).unbind(2)]
    out = model.head.head(modulate(F.layer_norm(x, (dim,), eps=eps), hm[0], hm[1]))
    return model.unpatchify(out, torch.tensor([[f, gh, gw]]))[0].unsqueeze(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sfcode", required=True, help="the Self-Forcing modules prepared by make_causal_fixtures.py --work DIR")
    ap.add_argument("--preset", default="tiny", choices=list(PRESETS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--latents", type=int, default=21)
    ap.add_argument("--height", type=int, default=8)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--text-tokens", type=int, default=32)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--profile", action="store_true", help="per-op self CPU time of the timed steps, to stderr")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    sys.path.insert(0, a.sfcode)
    import wan.modules.causal_model as cm
    from wan.modules.model import sinusoidal_embedding_1d
    p = PRESETS[a.preset]
    torch.manual_seed(0)
    model = cm.CausalWanModel(model_type="t2v", patch_size=(1, 2, 2), text_len=a.text_tokens, in_dim=16,
                              out_dim=16, local_attn_size=-1, sink_size=0, qk_norm=True,
                              cross_attn_norm=True, eps=1e-6, **p)
    with torch.no_grad():  # init_weights zeroes the head; give it values as the Rust preset has
        model.head.head.weight.normal_(0, 0.02)
    model.requires_grad_(False)  # frozen backbone (--trainable lora)
    names = ["q", "k", "v", "o", "cq", "co"]
    loras = [dict(zip(names, [Lora(m, a.lora_rank) for m in (blk.self_attn.q, blk.self_attn.k, blk.self_attn.v,
                                                                blk.self_attn.o, blk.cross_attn.q, blk.cross_attn.o)]))
             for blk in model.blocks]
    role_vec = torch.zeros(2, model.dim, requires_grad=True)
    trainable = [role_vec] + [t for lo in loras for l in lo.values() for t in l.params()]
    optim = torch.optim.AdamW(trainable, lr=1e-5, betas=(0.0, 0.999), weight_decay=0.01, eps=1e-8)

    L, hd = a.latents, model.dim // model.num_heads
    clip_c, crop_c = contract(L), contract(L - STRIDE)
    clip = torch.randn(16, L, a.height, a.width)
    prompt = torch.randn(1, a.text_tokens, p["text_dim"])
    gh, gw = a.height // 2, a.width // 2
    tpf = gh * gw
    gen = torch.Generator().manual_seed(1)
    n_frames = [0]

    def step():
        # draw: crop offsets (4 distinct of 1..9), sigma, eps
        offsets = sorted((torch.randperm(STRIDE - 1, generator=gen)[:CROPS] + 1).tolist())
        s = 1.0 - torch.randint(1000, (1,), generator=gen).item() / 1000
        sigma = SHIFT * s / (1 + (SHIFT - 1) * s)
        noise = torch.randn(clip.shape, generator=gen)
        frames, allowed = packed_layout(clip_c, crop_c, offsets)
        n_frames[0] = len(frames)
        # pack
        idx = torch.tensor([fr[2] for fr in frames])
        x0, eps = clip.index_select(1, idx), noise.index_select(1, idx)
        noised = torch.tensor([0.0 if fr[1] == CLEAN else sigma for fr in frames])
        targets = (eps - x0).unsqueeze(0)
        inputs = (x0 + (eps - x0) * noised.view(1, -1, 1, 1)).unsqueeze(0)
        t = noised * 1000.0
        roles = torch.tensor([1 if fr[1] == RENDERER else 0 for fr in frames])
        tok_roles = roles.repeat_interleave(tpf)
        role_masks = [(tok_roles == r).float().view(1, -1, 1) for r in range(2)]
        cos, sin = rope_cos_sin(model.freqs, [fr[3] for fr in frames], gh, gw, hd)
        attn_mask = allowed.repeat_interleave(tpf, 0).repeat_interleave(tpf, 1)
        pred = forward(model, loras, role_vec, sinusoidal_embedding_1d, inputs, t, roles, role_masks, cos, sin,
                       attn_mask, prompt)
        per_frame = (pred - targets).pow(2).transpose(1, 2).reshape(len(frames), -1).mean(1)
        groups = {}
        for i, fr in enumerate(frames):
            g = group_of(fr)
            if g is not None:
                groups.setdefault(g, []).append(i)
        loss = sum(per_frame[torch.tensor(ix)].mean() for ix in groups.values())
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        return loss.item()

    first = step()
    prof = None
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        last = step()
    seconds = (time.perf_counter() - t0) / a.iters
    if prof is not None:
        prof.__exit__(None, None, None)
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        print(f"{'op':<48} {'self CPU ms/step':>17} {'share':>7}", file=sys.stderr)
        for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:30]:
            ms = e.self_cpu_time_total / 1000 / a.iters
            print(f"{e.key:<48} {ms:>17.1f} {e.self_cpu_time_total / total:>7.1%}", file=sys.stderr)
    print(json.dumps(dict(preset=a.preset, threads=a.threads, iters=a.iters, latents=L, packed_frames=n_frames[0],
                          tokens=n_frames[0] * tpf, trainable_params=sum(t.numel() for t in trainable),
                          loss_first=first, loss_last=last, seconds=seconds, torch=torch.__version__)))


if __name__ == "__main__":
    main()
