"""Writes llama_outlier: llama_f32 with activation outlier channels made by a reparametrization that
leaves the function unchanged (docs/algorithms.md, "Language model with activation outliers").

usage: make_outlier.py LLM_DIR

Large language models have a few input channels whose activations are far larger than the rest
(the "salient" channels AWQ protects); the 2-layer llama_f32 trained here has none. This script
makes them the way they arise: for each RMSNorm that feeds linears (every layer's input_layernorm,
read by q/k/v_proj, and post_attention_layernorm, read by gate/up_proj), the K channels whose norm
output has the largest mean |x| over llama_f32's reference/eval_ids.npy (4 rows of 64 tokens,
disjoint from heldout/calib.txt and heldout/eval.txt) get the norm's weight multiplied by C and
the matching input columns of the linears that read that norm divided by C. The rule (K = 4 of 64
channels, C = 32) was fixed before anything was measured on the result. C is a power of two, so
both products are exact in float32 and the model computes the same function: the script checks
that its logits on eval_ids.npy equal llama_f32's reference logits to float rounding (it stops
otherwise). The residual stream does not change (reference/hidden_states.npy is llama_f32's).

LLM_DIR/llama_outlier gets llama_f32's files with model.safetensors rewritten, reference/ with the
new logits and perplexity, and outlier.json naming the channels and C.
"""

import json
import os
import shutil
import struct
import sys

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402

import llama_torch  # noqa: E402
from make_llama import safetensors_bytes, write_file, write_json  # noqa: E402

K = 4          # outlier channels per norm
C = 32.0       # the factor: a power of two, so that the reparametrization is exact in float32
NORM_READERS = {"input_layernorm": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
                "post_attention_layernorm": ["mlp.gate_proj", "mlp.up_proj"]}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit(f"make_outlier.py: {path}: tensor {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[base + begin:base + end], dtype="<f4")
                                     .reshape(info["shape"]).copy())
    return out


def norm_outputs(w, cfg, ids):
    """The output of every RMSNorm the forward pass runs, in order (layer 0 input, layer 0 post-attention, ...)."""
    recorded = []
    plain = llama_torch.rms_norm

    def recording(x, weight, eps):
        y = plain(x, weight, eps)
        recorded.append(y)
        return y

    llama_torch.rms_norm = recording
    try:
        with torch.no_grad():
            logits = llama_torch.forward(w, cfg, ids)
    finally:
        llama_torch.rms_norm = plain
    return logits, recorded


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2])
    llm_dir = sys.argv[1]
    source = os.path.join(llm_dir, "llama_f32")
    with open(os.path.join(source, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    w = read_safetensors(os.path.join(source, "model.safetensors"))
    ids = torch.from_numpy(np.load(os.path.join(source, "reference", "eval_ids.npy")))
    reference = np.load(os.path.join(source, "reference", "logits.npy"))

    _, outputs = norm_outputs(w, cfg, ids)
    chosen = {}
    out_w = {k: v.clone() for k, v in w.items()}
    index = 0
    for layer in range(cfg["num_hidden_layers"]):
        for norm, readers in NORM_READERS.items():
            mean_abs = outputs[index].abs().reshape(-1, cfg["hidden_size"]).double().mean(0)
            index += 1
            channels = sorted(int(c) for c in torch.argsort(mean_abs, descending=True)[:K])
            name = f"model.layers.{layer}.{norm}.weight"
            chosen[name] = {"channels": channels, "mean_abs": [round(float(mean_abs[c]), 6) for c in channels],
                            "median_mean_abs": round(float(mean_abs.median()), 6)}
            out_w[name][channels] *= C
            for reader in readers:
                out_w[f"model.layers.{layer}.{reader}.weight"][:, channels] /= C

    logits, _ = norm_outputs(out_w, cfg, ids)
    logits = logits.numpy()
    difference = float(np.abs(logits - reference).max())
    relative = float(np.linalg.norm(logits.astype(np.float64) - reference) / np.linalg.norm(reference))
    if relative > 1e-6:
        sys.exit(f"make_outlier.py: the reparametrized model's logits differ from llama_f32's (relative L2 "
                 f"{relative:.3g}, max |difference| {difference:.3g})")

    folder = os.path.join(llm_dir, "llama_outlier")
    tmp = folder + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp)
    order = list(llama_torch.weight_shapes(cfg))
    write_file(os.path.join(tmp, "model.safetensors"), safetensors_bytes({n: out_w[n] for n in order}))
    logits64 = torch.from_numpy(logits).double()
    nll = -torch.log_softmax(logits64[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    nll_mean = nll.mean().item()
    np.save(os.path.join(tmp, "reference", "logits.npy"), logits.astype(np.float32))
    write_json(os.path.join(tmp, "reference", "perplexity.json"),
               {"perplexity": float(np.exp(nll_mean)), "nll_mean": nll_mean, "tokens": int(nll.numel())})
    write_json(os.path.join(tmp, "outlier.json"),
               {"factor": C, "channels_per_norm": K,
                "rule": "per RMSNorm feeding linears, the K channels of largest mean |output| over "
                        "llama_f32/reference/eval_ids.npy; norm weight * factor, the readers' input columns / factor",
                "norms": chosen, "max_abs_logit_difference": difference})
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    print(f"make_outlier.py: llama_outlier: {K} channels per norm times {C:g}; logits against llama_f32's: "
          f"max |difference| {difference:.3g}, relative L2 {relative:.3g}")


if __name__ == "__main__":
    main()
