"""The Hugging Face Llama / Qwen2 forward pass in plain torch (transformers' semantics, no transformers
library), and a second implementation of it in float64 numpy written differently, used to check the
first. Weights are a dict named as in Hugging Face checkpoints; `cfg` is the config.json dict."""

import math

import numpy as np
import torch


def rope_inv_freq(cfg):
    """inv_freq as transformers' rope initialisation computes it (default, linear, llama3)."""
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    scaling = cfg.get("rope_scaling")
    if not scaling:
        return inv
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "linear":
        return inv / scaling["factor"]
    if kind == "llama3":
        factor = scaling["factor"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old_len = scaling["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled)
    raise ValueError(f"rope_scaling type {kind!r} is not implemented here")


def rms_norm(x, weight, eps):
    x32 = x.to(torch.float32)
    var = x32.pow(2).mean(-1, keepdim=True)
    return weight * (x32 * torch.rsqrt(var + eps)).to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(w, cfg, ids, hidden_out=None):
    """Logits [B, T, vocab] of int64 ids [B, T] (positions 0..T-1, causal), from the weights `w`
    named as in the checkpoint. If `hidden_out` is a list, the residual stream after the embedding
    and after each layer is appended to it."""
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = cfg["rms_norm_eps"]
    bsz, t = ids.shape
    pos = torch.arange(t, dtype=torch.int64).float()
    freqs = torch.outer(pos, rope_inv_freq(cfg))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((t, t), float("-inf")).triu(1)
    x = w["model.embed_tokens.weight"][ids]
    if hidden_out is not None:
        hidden_out.append(x)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def proj(name, n):
            y = h @ w[p + f"self_attn.{name}.weight"].T
            if p + f"self_attn.{name}.bias" in w:
                y = y + w[p + f"self_attn.{name}.bias"]
            return y.view(bsz, t, n, head_dim).transpose(1, 2)

        q, k, v = proj("q_proj", heads), proj("k_proj", kv_heads), proj("v_proj", kv_heads)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = heads // kv_heads   # query head j reads key/value head j // rep (transformers' repeat_kv)
        k = k[:, :, None].expand(bsz, kv_heads, rep, t, head_dim).reshape(bsz, heads, t, head_dim)
        v = v[:, :, None].expand(bsz, kv_heads, rep, t, head_dim).reshape(bsz, heads, t, head_dim)
        scores = (q @ k.transpose(2, 3)) * head_dim ** -0.5 + mask
        attn = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype) @ v
        attn = attn.transpose(1, 2).reshape(bsz, t, heads * head_dim)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        if hidden_out is not None:
            hidden_out.append(x)
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def slow_forward(w, cfg, ids):
    """A second implementation of the same forward pass, written differently, to check forward():
    float64 numpy, one sequence and one head at a time, rotary embeddings as the rotation of the
    complex numbers x[j] + i*x[j + head_dim/2], llama3 frequencies band by band, softmax by hand."""
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    half, eps = dim // 2, cfg["rms_norm_eps"]
    w = {k: v.double().numpy() for k, v in w.items()}
    freq = []
    for j in range(half):
        f = cfg["rope_theta"] ** (-2.0 * j / dim)
        s = cfg.get("rope_scaling") or {}
        kind = s.get("rope_type", s.get("type"))
        if kind == "linear":
            f /= s["factor"]
        elif kind == "llama3":
            old = s["original_max_position_embeddings"]
            wavelen = 2 * math.pi / f
            if wavelen > old / s["low_freq_factor"]:
                f /= s["factor"]
            elif wavelen >= old / s["high_freq_factor"]:
                smooth = (old / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
                f = (1 - smooth) * f / s["factor"] + smooth * f
        freq.append(f)
    freq = np.array(freq)

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    def rotate(x, t):   # x [T, dim]
        z = (x[:, :half] + 1j * x[:, half:]) * np.exp(1j * np.outer(np.arange(t), freq))
        return np.concatenate([z.real, z.imag], axis=1)

    out = []
    for row in ids.tolist():
        t = len(row)
        x = w["model.embed_tokens.weight"][row]
        for layer in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            h = norm(x, w[p + "input_layernorm.weight"])
            qkv = {n: h @ w[p + f"self_attn.{n}.weight"].T + w.get(p + f"self_attn.{n}.bias", 0.0)
                   for n in ("q_proj", "k_proj", "v_proj")}
            attn = np.zeros((t, heads * dim))
            for head in range(heads):
                kvh = head * kv_heads // heads
                q = rotate(qkv["q_proj"][:, head * dim:(head + 1) * dim], t)
                k = rotate(qkv["k_proj"][:, kvh * dim:(kvh + 1) * dim], t)
                v = qkv["v_proj"][:, kvh * dim:(kvh + 1) * dim]
                for i in range(t):
                    sc = k[:i + 1] @ q[i] / math.sqrt(dim)
                    e = np.exp(sc - sc.max())
                    attn[i, head * dim:(head + 1) * dim] = (e / e.sum()) @ v[:i + 1]
            x = x + attn @ w[p + "self_attn.o_proj.weight"].T
            h = norm(x, w[p + "post_attention_layernorm.weight"])
            g = h @ w[p + "mlp.gate_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        head_w = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
        out.append(norm(x, w["model.norm.weight"]) @ head_w.T)
    return np.stack(out)


def weight_shapes(cfg):
    """Every tensor of the checkpoint, in transformers' state-dict order, with its shape."""
    hid, inter, voc = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or hid // heads
    bias = cfg.get("attention_bias") or cfg["model_type"] == "qwen2"
    shapes = {"model.embed_tokens.weight": (voc, hid)}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes[p + "self_attn.q_proj.weight"] = (heads * head_dim, hid)
        if bias:
            shapes[p + "self_attn.q_proj.bias"] = (heads * head_dim,)
        shapes[p + "self_attn.k_proj.weight"] = (kv_heads * head_dim, hid)
        if bias:
            shapes[p + "self_attn.k_proj.bias"] = (kv_heads * head_dim,)
        shapes[p + "self_attn.v_proj.weight"] = (kv_heads * head_dim, hid)
        if bias:
            shapes[p + "self_attn.v_proj.bias"] = (kv_heads * head_dim,)
        shapes[p + "self_attn.o_proj.weight"] = (hid, heads * head_dim)
        shapes[p + "mlp.gate_proj.weight"] = (inter, hid)
        shapes[p + "mlp.up_proj.weight"] = (inter, hid)
        shapes[p + "mlp.down_proj.weight"] = (hid, inter)
        shapes[p + "input_layernorm.weight"] = (hid,)
        shapes[p + "post_attention_layernorm.weight"] = (hid,)
    shapes["model.norm.weight"] = (hid,)
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (voc, hid)
    return shapes
