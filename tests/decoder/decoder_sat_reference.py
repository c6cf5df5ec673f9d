"""An independent, plain-torch (float64) account of the released decoder, from its SAT names.

Written from the released code's formulas (dit_video_concat.py, sat lora2, sgm samplers), not from
inference/decoder: the tests compare the diffusers-based decoder against this.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

P = "model.diffusion_model."
TEXT_TOKENS, IP_TOKENS, T5_WIDTH, CLIP_WIDTH = 30, 196, 4096, 768


# --------------------------------------------------------------------------------------------
# A synthesized SAT checkpoint


def _sincos_1d(dim: int, pos: np.ndarray) -> np.ndarray:
    omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=np.float64) / (dim / 2.0))
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def sat_pos_embedding(dim: int, h: int, w: int, t: int, text: int, interp: float = 1.875) -> torch.Tensor:
    """Basic3DPositionEmbeddingMixin's table (zeros for the text rows)."""
    gw, gh = np.meshgrid(np.arange(w, dtype=np.float32) / interp, np.arange(h, dtype=np.float32) / interp)
    spatial_dim = dim // 4 * 3
    spatial = np.concatenate([_sincos_1d(spatial_dim // 2, gw), _sincos_1d(spatial_dim // 2, gh)], axis=1)
    temporal = _sincos_1d(dim // 4, np.arange(t, dtype=np.float32))
    table = np.concatenate(
        [np.repeat(temporal[:, None], h * w, axis=1), np.repeat(spatial[None], t, axis=0)], axis=-1
    ).reshape(t * h * w, dim)
    full = np.zeros((1, text + t * h * w, dim), dtype=np.float32)
    full[0, text:] = table
    return torch.from_numpy(full)


def make_sat_checkpoint(cfg: dict, seed: int = 0, lora_rank: int | None = 64) -> dict[str, torch.Tensor]:
    """Random weights under the released SAT names (LoRA on q/k/v and dense), plus non-DiT keys."""
    g = torch.Generator().manual_seed(seed)
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    hd, te, c, p = cfg["attention_head_dim"], cfg["time_embed_dim"], cfg["in_channels"], cfg["patch_size"]
    sd: dict[str, torch.Tensor] = {}

    def lin(name, out_f, in_f, bias=True):
        sd[f"{P}{name}.weight"] = torch.randn(out_f, in_f, generator=g) / math.sqrt(in_f)
        if bias:
            sd[f"{P}{name}.bias"] = 0.1 * torch.randn(out_f, generator=g)

    def norm(name, n):
        sd[f"{P}{name}.weight"] = 1 + 0.1 * torch.randn(n, generator=g)
        sd[f"{P}{name}.bias"] = 0.1 * torch.randn(n, generator=g)

    lin("time_embed.0", te, d)
    lin("time_embed.2", te, te)
    lin("flow_embed.0", te, d)
    lin("flow_embed.2", te, te)
    sd[f"{P}mixins.patch_embed.proj.weight"] = torch.randn(d, c, p, p, generator=g) / math.sqrt(c * p * p)
    sd[f"{P}mixins.patch_embed.proj.bias"] = 0.1 * torch.randn(d, generator=g)
    lin("mixins.patch_embed.text_proj.0", d, T5_WIDTH)
    lin("mixins.patch_embed.text_proj.2", d, d)
    lin("mixins.patch_embed.ip_proj.0", d, CLIP_WIDTH)
    lin("mixins.patch_embed.ip_proj.2", d, d)
    for n in ("output_mix_layer_norm", "ip_mix_layer_norm", "txt_mix_layer_norm"):
        norm(f"mixins.patch_embed.{n}", d)
    frames = (cfg["sample_frames"] - 1) // cfg["temporal_compression_ratio"] + 1
    sd[f"{P}mixins.pos_embed.pos_embedding"] = sat_pos_embedding(
        d, cfg["sample_height"] // p, cfg["sample_width"] // p, frames, cfg["max_text_seq_length"]
    )
    for i in range(cfg["num_layers"]):
        L = f"transformer.layers.{i}"
        norm(f"{L}.input_layernorm", d)
        norm(f"{L}.post_attention_layernorm", d)
        for name, out_f, parts in (("query_key_value", 3 * d, 3), ("dense", d, 1)):
            base = f"{L}.attention.{name}"
            if lora_rank is None:
                lin(base, out_f, d)
            else:
                lin(f"{base}.original", out_f, d)
                for j in range(parts):
                    sd[f"{P}{base}.matrix_A.{j}"] = torch.randn(lora_rank, d, generator=g) / math.sqrt(d)
                    sd[f"{P}{base}.matrix_B.{j}"] = torch.randn(out_f // parts, lora_rank, generator=g)
        lin(f"{L}.mlp.dense_h_to_4h", 4 * d, d)
        lin(f"{L}.mlp.dense_4h_to_h", d, 4 * d)
        lin(f"mixins.adaln_layer.adaLN_modulations.{i}.1", 12 * d, te)
        norm(f"mixins.adaln_layer.query_layernorm_list.{i}", hd)
        norm(f"mixins.adaln_layer.key_layernorm_list.{i}", hd)
    norm("transformer.final_layernorm", d)
    norm("mixins.final_layer.norm_final", d)
    lin("mixins.final_layer.linear", p * p * cfg["out_channels"], d)
    lin("mixins.final_layer.adaLN_modulation.1", 2 * d, te)
    # Other sub-models stored in the released file: the converter must skip and list them.
    sd["conditioner.embedders.0.transformer.shared.weight"] = torch.randn(8, 4, generator=g)
    sd["first_stage_model.decoder.conv_in.conv.weight"] = torch.randn(4, 4, 1, 1, 1, generator=g)
    return sd


# --------------------------------------------------------------------------------------------
# The released forward pass


def _w(sd, name):
    return sd[P + name].double()


def _linear(sd, name, x):
    return F.linear(x, _w(sd, f"{name}.weight"), _w(sd, f"{name}.bias"))


def _lora_linear(sd, name, x, parts):
    """sat lora2.LoraLinear.forward: original(x) + cat_i(x A_i^T B_i^T) * (1 / r), unmerged."""
    if P + f"{name}.weight" in sd:
        return _linear(sd, name, x)
    out = _linear(sd, f"{name}.original", x)
    r = sd[P + f"{name}.matrix_A.0"].shape[0]
    lora = [x @ _w(sd, f"{name}.matrix_A.{j}").T @ _w(sd, f"{name}.matrix_B.{j}").T * (1.0 / r) for j in range(parts)]
    return out + torch.cat(lora, -1)


def _ln(sd, name, x, eps):
    w = _w(sd, f"{name}.weight")
    return F.layer_norm(x, w.shape, w, _w(sd, f"{name}.bias"), eps)


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """sgm util.timestep_embedding: cos first, period 1e4."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float64) / half)
    args = t.double()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def time_flow_embedding(sd, t: torch.Tensor, flow: torch.Tensor, d: int) -> torch.Tensor:
    emb = _linear(sd, "time_embed.2", F.silu(_linear(sd, "time_embed.0", timestep_embedding(t, d))))
    return emb + flow_embedding(sd, flow, d)


def flow_embedding(sd, flow: torch.Tensor, d: int) -> torch.Tensor:
    return _linear(sd, "flow_embed.2", F.silu(_linear(sd, "flow_embed.0", timestep_embedding(flow, d))))


def _modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def sat_layer(sd, i: int, hidden: torch.Tensor, emb: torch.Tensor, heads: int, text_len: int) -> torch.Tensor:
    """AdaLNMixin.layer_forward of layer i on (b, text + video, d)."""
    L = f"transformer.layers.{i}"
    text_h, img_h = hidden[:, :text_len], hidden[:, text_len:]
    mods = _linear(sd, f"mixins.adaln_layer.adaLN_modulations.{i}.1", F.silu(emb)).chunk(12, dim=1)
    shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = mods[:6]
    t_shift_msa, t_scale_msa, t_gate_msa, t_shift_mlp, t_scale_mlp, t_gate_mlp = mods[6:]

    img_in = _modulate(_ln(sd, f"{L}.input_layernorm", img_h, 1e-5), shift_msa, scale_msa)
    text_in = _modulate(_ln(sd, f"{L}.input_layernorm", text_h, 1e-5), t_shift_msa, t_scale_msa)
    x = torch.cat([text_in, img_in], dim=1)
    b, n, d = x.shape
    hd = d // heads
    q, k, v = _lora_linear(sd, f"{L}.attention.query_key_value", x, 3).split(d, dim=-1)
    q, k, v = (y.view(b, n, heads, hd).permute(0, 2, 1, 3) for y in (q, k, v))
    q = _ln(sd, f"mixins.adaln_layer.query_layernorm_list.{i}", q, 1e-6)
    k = _ln(sd, f"mixins.adaln_layer.key_layernorm_list.{i}", k, 1e-6)
    scores = (q / math.sqrt(hd)) @ k.transpose(-1, -2)
    ctx = (scores.softmax(dim=-1) @ v).permute(0, 2, 1, 3).reshape(b, n, d)
    attn = _lora_linear(sd, f"{L}.attention.dense", ctx, 1)

    img_h = img_h + gate_msa.unsqueeze(1) * attn[:, text_len:]
    text_h = text_h + t_gate_msa.unsqueeze(1) * attn[:, :text_len]
    img_in = _modulate(_ln(sd, f"{L}.post_attention_layernorm", img_h, 1e-5), shift_mlp, scale_mlp)
    text_in = _modulate(_ln(sd, f"{L}.post_attention_layernorm", text_h, 1e-5), t_shift_mlp, t_scale_mlp)
    x = torch.cat([text_in, img_in], dim=1)
    mlp = _linear(sd, f"{L}.mlp.dense_4h_to_h", F.gelu(_linear(sd, f"{L}.mlp.dense_h_to_4h", x), approximate="tanh"))
    img_h = img_h + gate_mlp.unsqueeze(1) * mlp[:, text_len:]
    text_h = text_h + t_gate_mlp.unsqueeze(1) * mlp[:, :text_len]
    return torch.cat([text_h, img_h], dim=1)


def sat_forward(sd, cfg: dict, x: torch.Tensor, context: torch.Tensor, t: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """DiffusionTransformer.forward: latents (b, T, C, H, W) + 226 context tokens -> v (b, T, C, H, W)."""
    b, T, C, H, W = x.shape
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    p = cfg["patch_size"]
    emb = time_flow_embedding(sd, t, flow, d)
    patches = F.conv2d(x.double().reshape(b * T, C, H, W), _w(sd, "mixins.patch_embed.proj.weight"),
                       _w(sd, "mixins.patch_embed.proj.bias"), stride=p)
    patches = patches.view(b, T, d, -1).transpose(2, 3).reshape(b, -1, d)
    hidden = torch.cat([context.double(), patches], dim=1)
    hidden = hidden + _w(sd, "mixins.pos_embed.pos_embedding")[:, : hidden.shape[1]]
    text_len = context.shape[1]
    for i in range(cfg["num_layers"]):
        hidden = sat_layer(sd, i, hidden, emb, cfg["num_attention_heads"], text_len)
    hidden = _ln(sd, "transformer.final_layernorm", hidden, 1e-5)
    img = hidden[:, text_len:]
    shift, scale = _linear(sd, "mixins.final_layer.adaLN_modulation.1", F.silu(emb)).chunk(2, dim=1)
    img = _modulate(_ln(sd, "mixins.final_layer.norm_final", img, 1e-6), shift, scale)
    out = _linear(sd, "mixins.final_layer.linear", img)  # (b, T*h*w, c*p*q)
    h, w = H // p, W // p
    out = out.view(b, T, h, w, C, p, p).permute(0, 1, 4, 2, 5, 3, 6)
    return out.reshape(b, T, C, H, W)


def sat_uncond(sd) -> torch.Tensor:
    """cat(txt_mix_layer_norm(text_proj(0_{30x4096})), ip_mix_layer_norm(ip_proj(0_{196x768})))."""
    def proj(name, x):
        return _linear(sd, f"mixins.patch_embed.{name}.2", F.gelu(_linear(sd, f"mixins.patch_embed.{name}.0", x)))

    text = _ln(sd, "mixins.patch_embed.txt_mix_layer_norm", proj("text_proj", torch.zeros(TEXT_TOKENS, T5_WIDTH, dtype=torch.float64)), 1e-5)
    ip = _ln(sd, "mixins.patch_embed.ip_mix_layer_norm", proj("ip_proj", torch.zeros(IP_TOKENS, CLIP_WIDTH, dtype=torch.float64)), 1e-5)
    return torch.cat([text, ip], dim=0)


# --------------------------------------------------------------------------------------------
# The released sampler (ZeroSNRDDPMDiscretization, DiscreteDenoiser + VideoScaling, DynamicCFG,
# VPSDEDPMPP2MSampler), in float64


def _rescaled_sqrt(ac: np.ndarray) -> np.ndarray:
    s = np.sqrt(ac)
    return (s - s[-1]) * s[0] / (s[0] - s[-1])


def released_tables(num_steps: int):
    betas = np.linspace(0.00085**0.5, 0.012**0.5, 1000, dtype=np.float64) ** 2
    ac = np.cumprod(1 - betas)
    ac = ac / (3.0 - 2.0 * ac)
    ts = np.linspace(999, 0, num_steps, endpoint=False).astype(int)  # noisiest first
    steps = _rescaled_sqrt(ac[ts[::-1]])[::-1]  # rescaled over the chosen steps
    table = _rescaled_sqrt(ac)
    snapped = np.array([table[np.abs(table - a).argmin()] for a in steps])
    return ts, steps, snapped


def released_cfg(t: int, sampler_steps: int) -> float:
    return 1 + 6 * (1 - math.cos(math.pi * ((sampler_steps - t) / 50) ** 5)) / 2


def released_sample(v_fn, noises: list[torch.Tensor], num_steps: int) -> torch.Tensor:
    """v_fn(x, t) -> (v_uncond, v_cond) float64. noises: x_T then the draws in release order."""
    ts, a_steps, a_snap = released_tables(num_steps)
    draws = iter(noises)
    x = next(draws).double()
    old = None
    lam = lambda a: math.log(a / math.sqrt(1 - a * a)) if a > 0 else -math.inf  # noqa: E731
    for i, t in enumerate(ts):
        v_u, v_c = v_fn(x, int(t))
        a = a_snap[i]
        x0_u, x0_c = a * x - math.sqrt(1 - a * a) * v_u, a * x - math.sqrt(1 - a * a) * v_c
        x0 = x0_u + released_cfg(int(t), num_steps) * (x0_c - x0_u)
        if i == num_steps - 1:
            return x0
        a, a_next = a_steps[i], a_steps[i + 1]
        h = lam(a_next) - lam(a)
        sigma_next = math.sqrt(1 - a_next**2)
        if a == 0:  # h = inf: e^-h = 0
            m1, m2, noise_scale = 0.0, -a_next, sigma_next
        else:
            m1 = sigma_next / math.sqrt(1 - a * a) * math.exp(-h)
            m2 = math.expm1(-2 * h) * a_next
            noise_scale = sigma_next * math.sqrt(1 - math.exp(-2 * h))
        first = m1 * x - m2 * x0 + noise_scale * next(draws).double()
        if old is None:
            x = first
        else:
            a_prev = a_steps[i - 1]
            if a_prev == 0:  # r = inf
                x0_d = x0
            else:
                r = (lam(a) - lam(a_prev)) / h
                x0_d = (1 + 1 / (2 * r)) * x0 - (1 / (2 * r)) * old
            x = m1 * x - m2 * x0_d + noise_scale * next(draws).double()
        old = x0
    raise AssertionError("unreachable")
