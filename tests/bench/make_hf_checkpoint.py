#!/usr/bin/python3
"""Writes a Llama-architecture Hugging Face folder of random bf16 weights, for the memory and speed
benchmarks of large checkpoints (docs/benchmarks.md). Nothing is downloaded; the weights are seeded
Gaussian noise scaled like an initialised model, so the folder opens, runs and quantizes like a real
checkpoint of that shape (its outputs mean nothing).

    /usr/bin/python3 tests/bench/make_hf_checkpoint.py OUT_DIR [--preset 1b|3b|7b] [--layers N] [--shard-gb G]

Presets (bf16 sizes): 1b ~ 2.2 GB (hidden 2048, 16 layers), 3b ~ 6.4 GB (hidden 3072, 26 layers),
7b ~ 13.5 GB (Llama-2-7B's shapes: hidden 4096, 32 layers, intermediate 11008, vocab 32000).
Tensors are generated and written one at a time, so memory stays near the largest tensor.
"""

import argparse
import json
import os
import struct

import numpy as np

PRESETS = {
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=32000),
    "3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=26, num_attention_heads=24,
               num_key_value_heads=8, vocab_size=32000),
    "7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=32, vocab_size=32000),
}


def shapes(c):
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    d = h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * d
    out = [("model.embed_tokens.weight", (v, h))]
    for n in range(c["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out += [(p + "input_layernorm.weight", (h,)), (p + "self_attn.q_proj.weight", (h, h)),
                (p + "self_attn.k_proj.weight", (kv, h)), (p + "self_attn.v_proj.weight", (kv, h)),
                (p + "self_attn.o_proj.weight", (h, h)), (p + "post_attention_layernorm.weight", (h,)),
                (p + "mlp.gate_proj.weight", (i, h)), (p + "mlp.up_proj.weight", (i, h)),
                (p + "mlp.down_proj.weight", (h, i))]
    out += [("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    return out


def bf16_bytes(rng, shape):
    if len(shape) == 1:
        x = np.ones(shape, dtype=np.float32)
    else:
        x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16   # round to nearest even
    return rounded.astype(np.uint16).tobytes()


def write_shard(path, entries, rng):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in entries:
        size = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in entries:
            f.write(bf16_bytes(rng, shape))
    os.replace(path + ".tmp", path)
    return offset


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="1b")
    ap.add_argument("--shard-gb", type=float, default=2.0)
    ap.add_argument("--layers", type=int, help="the preset's layer count otherwise (3b with 28 layers: 6.03 GB)")
    args = ap.parse_args()
    c = dict(PRESETS[args.preset], architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu",
             rms_norm_eps=1e-5, rope_theta=10000.0, max_position_embeddings=4096, tie_word_embeddings=False,
             torch_dtype="bfloat16", bos_token_id=1, eos_token_id=2)
    if args.layers:
        c["num_hidden_layers"] = args.layers
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(20261127)
    shards, current, size = [], [], 0
    for name, shape in shapes(c):
        n = int(np.prod(shape)) * 2
        if current and size + n > args.shard_gb * 2**30:
            shards.append(current)
            current, size = [], 0
        current.append((name, shape))
        size += n
    shards.append(current)
    weight_map, total = {}, 0
    for k, entries in enumerate(shards):
        file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(os.path.join(args.out_dir, file), entries, rng)
        weight_map.update({name: file for name, _ in entries})
        print(f"{file}: {len(entries)} tensors", flush=True)
    with open(os.path.join(args.out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    print(f"{args.out_dir}: {args.preset}, {total / 2**30:.2f} GiB of bf16 weights in {len(shards)} shards")


if __name__ == "__main__":
    main()
