#!/usr/bin/python3
"""Builds the language-model fixtures of issue 21: a tiny Llama-architecture model trained here on text
found on the machine, written as Hugging Face folders, each with a reference computed by a plain torch
implementation of the Hugging Face forward pass written here (llama_torch.py; no `transformers` library).

    /usr/bin/python3 tests/llm/make_llama.py OUT_DIR
    /usr/bin/python3 tests/llm/make_llama.py --check-tokenizer NODE_MODULES

OUT_DIR gets four folders, each a Hugging Face checkpoint folder (config.json, generation_config.json,
tokenizer.json, tokenizer_config.json, safetensors) plus `reference/`:

  llama_f32/              LlamaForCausalLM, float32, untied lm_head, no rope scaling, model.safetensors
  llama_bf16/             the same weights rounded to bfloat16, two shards + model.safetensors.index.json
  llama_tied_ropescaled/  tie_word_embeddings (no lm_head.weight), rope_scaling of type llama3
  qwen2_f32/              Qwen2ForCausalLM: q/k/v biases, rope_theta 1e6, no head_dim in config.json
  llama_k256/             LlamaForCausalLM with hidden 256, intermediate 512, head_dim 64: every weight row
                          a multiple of 256, as GGUF's k-quant super-blocks need (trained K256_STEPS steps)

reference/ holds eval.txt (held-out text), eval_ids.npy (int64 [N, T]: the first N*T tokens of
eval.txt's encoding without special tokens, row after row), logits.npy (float32 [N, T, vocab]: the
torch forward of each row on its own, positions 0..T-1), hidden_states.npy (float32 [layers+1, N, T,
hidden]: the residual stream after the embedding and after each decoder layer, before the final norm)
and perplexity.json ({"perplexity", "nll_mean", "tokens"}: next-token negative log-likelihood over
every row, log-softmax in float64 of the float32 logits, N*(T-1) tokens). The bf16 folder's reference
is computed from the bf16-rounded weights widened to float32. Each folder's logits are first checked
against slow_forward(), a second implementation in float64 numpy written differently (the script stops
above a relative L2 of 1e-5), and for causality (the first half of a row alone gives the same logits).

Corpus: the top-level Python standard-library sources under /usr/lib/python3.11 and the licence texts
of /usr/share/common-licenses, in sorted name order, the first CHUNK_BYTES of each file; every
HOLDOUT_EVERY-th standard-library file is held out for evaluation. The tokenizer is a byte-level BPE
(GPT-2 pre-tokenization, 256 byte tokens, MERGES learned here on the training text, two special
tokens) written as tokenizer.json in the Hugging Face format; the text is tokenized by the Python
implementation in byte_bpe.py. With --check-tokenizer (nothing is written then), the ids of about
EVAL_CHECK_LINES lines of the corpus, a few lines of accents, CJK, emoji and whitespace runs, and the
whole evaluation text are compared with those of npm @huggingface/tokenizers installed in NODE_MODULES
(node must be on PATH; tests/llm/check_tokenizer.sh installs the pinned version and runs this).

Training runs with a fixed seed on one thread for a fixed number of steps. Folders already written
with the same settings and the same scripts are kept (OUT_DIR/llm_fixture.json records them).
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import struct
import sys
import time

import numpy as np
import torch

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
from byte_bpe import Tokenizer, check_tokenizer_with_npm, train_bpe  # noqa: E402
from llama_torch import forward, slow_forward, weight_shapes  # noqa: E402

SOURCES = ["make_llama.py", "byte_bpe.py", "llama_torch.py"]

SEED = 20261127
PY_DIR = "/usr/lib/python3.11"
LICENSE_DIR = "/usr/share/common-licenses"
CHUNK_BYTES = 12000
HOLDOUT_EVERY = 10
MERGES = 254                      # 256 bytes + 254 merges + 2 special tokens = 512
SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>"]
VOCAB = 256 + MERGES + len(SPECIAL_TOKENS)
EVAL_ROWS, EVAL_LEN = 4, 64
EVAL_CHECK_LINES = 400

BASE = dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
            max_position_embeddings=512, vocab_size=VOCAB, tie_word_embeddings=False,
            bos_token_id=256 + MERGES, eos_token_id=256 + MERGES + 1, attention_bias=False)
TRAIN_STEPS, TRAIN_BATCH, TRAIN_LEN, TRAIN_LR = 450, 8, 64, 4e-3
TUNE_STEPS = 40
K256 = dict(hidden_size=256, intermediate_size=512, head_dim=64)
K256_STEPS = 120
LLAMA3_SCALING = {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                  "original_max_position_embeddings": 64, "rope_type": "llama3"}
TRANSFORMERS_LAYOUT = "4.46.0"   # the transformers release whose config.json layout is written


# ---------------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------------

def read_text(path):
    with open(path, "rb") as f:
        data = f.read(CHUNK_BYTES)
    # Cut at the last newline so that no file contributes half a line or half a UTF-8 sequence.
    cut = data.rfind(b"\n")
    data = data[:cut + 1] if cut >= 0 else data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def corpus():
    """(training texts, held-out texts), deterministic."""
    train, held = [], []
    py = sorted(n for n in os.listdir(PY_DIR) if n.endswith(".py"))
    for i, name in enumerate(py):
        text = read_text(os.path.join(PY_DIR, name))
        if text:
            (held if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1 else train).append(text)
    for name in sorted(os.listdir(LICENSE_DIR)):
        path = os.path.join(LICENSE_DIR, name)
        if os.path.isfile(path) and not os.path.islink(path):
            text = read_text(path)
            if text:
                train.append(text)
    if len(train) < 50 or len(held) < 3:
        sys.exit(f"make_llama.py: too little text under {PY_DIR} and {LICENSE_DIR}")
    return train, held


def init_weights(cfg, gen):
    w = {}
    for name, shape in weight_shapes(cfg).items():
        if name.endswith("norm.weight"):
            w[name] = torch.ones(shape)
        elif name.endswith(".bias"):
            w[name] = torch.zeros(shape)
        else:
            w[name] = torch.randn(shape, generator=gen) * 0.02
    return w


def train(w, cfg, stream, steps, lr, gen, label):
    """AdamW on random windows of the token stream, cosine decay after a short warm-up."""
    params = {k: v.clone().requires_grad_(True) for k, v in w.items()}
    opt = torch.optim.AdamW(params.values(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    data = torch.tensor(stream, dtype=torch.int64)
    warm = max(1, steps // 20)
    start = time.time()
    for step in range(steps):
        scale = (step + 1) / warm if step < warm else 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
        for group in opt.param_groups:
            group["lr"] = lr * scale
        at = torch.randint(0, len(data) - TRAIN_LEN - 1, (TRAIN_BATCH,), generator=gen)
        batch = torch.stack([data[a:a + TRAIN_LEN + 1] for a in at.tolist()])
        logits = forward(params, cfg, batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["vocab_size"]), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            print(f"{label}: step {step} loss {loss.item():.4f} ({time.time() - start:.1f} s)", flush=True)
    return {k: v.detach().clone() for k, v in params.items()}


# ---------------------------------------------------------------------------------------------------
# Writers: safetensors, config.json, the folder with its reference
# ---------------------------------------------------------------------------------------------------

DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16"}


def safetensors_bytes(tensors):
    """A safetensors image: u64 LE header length, the JSON header (keys sorted, `__metadata__` first,
    padded with spaces so the data starts 8-byte aligned), the tensors' bytes in header order."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def write_file(path, data):
    """Whole-file write through a temporary file renamed into place."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_json(path, obj, sort_keys=True):
    write_file(path, (json.dumps(obj, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n").encode())


def config_json(cfg, dtype_name):
    if cfg["model_type"] == "qwen2":
        keys = ["attention_dropout", "bos_token_id", "eos_token_id", "hidden_act", "hidden_size",
                "initializer_range", "intermediate_size", "max_position_embeddings", "max_window_layers",
                "model_type", "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "rms_norm_eps",
                "rope_scaling", "rope_theta", "sliding_window", "tie_word_embeddings", "use_cache",
                "use_sliding_window", "vocab_size"]
        arch = "Qwen2ForCausalLM"
    else:
        keys = ["attention_bias", "attention_dropout", "bos_token_id", "eos_token_id", "head_dim", "hidden_act",
                "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings", "mlp_bias",
                "model_type", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
                "pretraining_tp", "rms_norm_eps", "rope_scaling", "rope_theta", "tie_word_embeddings",
                "use_cache", "vocab_size"]
        arch = "LlamaForCausalLM"
    defaults = dict(attention_dropout=0.0, hidden_act="silu", initializer_range=0.02, mlp_bias=False,
                    pretraining_tp=1, use_cache=True, max_window_layers=cfg["num_hidden_layers"],
                    sliding_window=4096, use_sliding_window=False)
    out = {"architectures": [arch]}
    for k in keys:
        out[k] = cfg[k] if k in cfg else defaults[k]
    out["torch_dtype"] = dtype_name
    out["transformers_version"] = TRANSFORMERS_LAYOUT
    return out


def write_folder(out_dir, name, cfg, w, tok, tok_json, eval_text, eval_ids, dtype=torch.float32, shards=1):
    folder = os.path.join(out_dir, name)
    tmp = folder + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "reference"))
    stored = {k: v.to(dtype) for k, v in w.items()}
    assert set(stored) == set(weight_shapes(cfg))
    if shards == 1:
        write_file(os.path.join(tmp, "model.safetensors"), safetensors_bytes(stored))
    else:
        # transformers fills shards in state-dict order; here: the embedding and the first half of the
        # layers in the first shard, the rest in the second.
        order = list(weight_shapes(cfg))
        first_tail = f"model.layers.{cfg['num_hidden_layers'] // 2}."
        cut = next(i for i, n in enumerate(order) if n.startswith(first_tail))
        parts = [order[:cut], order[cut:]]
        weight_map = {}
        for s, names in enumerate(parts):
            fname = f"model-{s + 1:05d}-of-{len(parts):05d}.safetensors"
            write_file(os.path.join(tmp, fname), safetensors_bytes({n: stored[n] for n in names}))
            weight_map.update({n: fname for n in names})
        total = sum(t.numel() * t.element_size() for t in stored.values())
        write_json(os.path.join(tmp, "model.safetensors.index.json"),
                   {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    write_json(os.path.join(tmp, "config.json"), config_json(cfg, "bfloat16" if dtype == torch.bfloat16 else "float32"))
    write_json(os.path.join(tmp, "generation_config.json"),
               {"_from_model_config": True, "bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
                "transformers_version": TRANSFORMERS_LAYOUT})
    write_json(os.path.join(tmp, "tokenizer.json"), tok_json, sort_keys=False)
    write_json(os.path.join(tmp, "tokenizer_config.json"), tok.tokenizer_config_json())
    # The reference: the stored weights widened to float32.
    ref_w = {k: v.to(torch.float32) for k, v in stored.items()}
    ids = torch.tensor(eval_ids, dtype=torch.int64)
    hidden = []
    with torch.no_grad():
        logits = forward(ref_w, cfg, ids, hidden)
    # The reference against the second implementation, and causality: a prefix alone gives the same logits.
    slow = slow_forward(ref_w, cfg, ids)
    check = float(np.linalg.norm(logits.double().numpy() - slow) / np.linalg.norm(slow))
    with torch.no_grad():
        prefix = forward(ref_w, cfg, ids[:, :ids.shape[1] // 2])
    causal = float((prefix - logits[:, :ids.shape[1] // 2]).abs().max())
    if check > 1e-5 or causal > 1e-4:
        sys.exit(f"make_llama.py: {name}: the reference disagrees with its check "
                 f"(relative L2 {check:.3g} against the float64 implementation, prefix difference {causal:.3g})")
    logits64 = logits.double()
    nll = -torch.log_softmax(logits64[:, :-1], dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    nll_mean = nll.mean().item()
    ppl = {"perplexity": math.exp(nll_mean), "nll_mean": nll_mean, "tokens": int(nll.numel())}
    ref = os.path.join(tmp, "reference")
    np.save(os.path.join(ref, "eval_ids.npy"), ids.numpy())
    np.save(os.path.join(ref, "logits.npy"), logits.numpy().astype(np.float32))
    np.save(os.path.join(ref, "hidden_states.npy"), torch.stack(hidden).numpy().astype(np.float32))
    write_json(os.path.join(ref, "perplexity.json"), ppl)
    write_file(os.path.join(ref, "eval.txt"), eval_text.encode("utf-8"))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    print(f"{name}: perplexity {ppl['perplexity']:.4f} over {ppl['tokens']} tokens (uniform would be {VOCAB}); "
          f"against the float64 check: relative L2 {check:.2e}; prefix vs whole row: {causal:.1e}")
    return ppl


# ---------------------------------------------------------------------------------------------------

FOLDERS = ["llama_f32", "llama_bf16", "llama_tied_ropescaled", "qwen2_f32", "llama_k256"]


def settings_stamp():
    digest = hashlib.sha256()
    for name in SOURCES:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), "rb") as f:
            digest.update(f.read())
    return {"scripts_sha256": digest.hexdigest(), "torch": torch.__version__, "numpy": np.__version__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--check-tokenizer", metavar="NODE_MODULES",
                    help="only compare the tokenizer with npm @huggingface/tokenizers installed there")
    args = ap.parse_args()
    if bool(args.out_dir) == bool(args.check_tokenizer):
        ap.error("give either OUT_DIR or --check-tokenizer NODE_MODULES")
    out = os.path.abspath(args.out_dir or ".")
    record_path = os.path.join(out, "llm_fixture.json")
    stamp = settings_stamp()
    if not args.check_tokenizer and os.path.exists(record_path):
        with open(record_path) as f:
            record = json.load(f)
        if record.get("stamp") == stamp and all(os.path.isdir(os.path.join(out, n)) for n in FOLDERS):
            os.utime(record_path)   # newer than the script, for the build tool that asked
            print("llm fixtures: up to date")
            return
    begin = time.time()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)

    train_texts, held_texts = corpus()
    merges = train_bpe(train_texts, MERGES)
    if len(merges) != MERGES:
        sys.exit(f"make_llama.py: learned only {len(merges)} merges")
    tok = Tokenizer(merges, SPECIAL_TOKENS, BASE["max_position_embeddings"])
    tok_json = tok.tokenizer_json()
    print(f"corpus: {len(train_texts)} training files ({sum(map(len, train_texts))} chars), "
          f"{len(held_texts)} held out; tokenizer: {MERGES} merges ({time.time() - begin:.1f} s)", flush=True)

    stream = []
    for text in train_texts:
        stream.extend(tok.encode(text))
    # Evaluation text: whole lines of the held-out files until the encoding has N*T tokens.
    need = EVAL_ROWS * EVAL_LEN
    eval_lines = []
    for line in "".join(held_texts).splitlines(keepends=True):
        eval_lines.append(line)
        if len(tok.encode("".join(eval_lines))) >= need:
            break
    eval_text = "".join(eval_lines)
    eval_ids = np.array(tok.encode(eval_text)[:need], dtype=np.int64).reshape(EVAL_ROWS, EVAL_LEN)
    print(f"training tokens: {len(stream)} ({len(''.join(train_texts).encode()) / len(stream):.2f} bytes/token); "
          f"eval: {len(eval_text)} chars", flush=True)

    if args.check_tokenizer:
        lines = [l for l in "".join(held_texts + train_texts[::7]).splitlines() if l.strip()]
        step = max(1, len(lines) // EVAL_CHECK_LINES)
        sample = lines[::step][:EVAL_CHECK_LINES]
        sample += ["naïve café, 東京, emoji 🙂, tabs\t\tand   spaces  ", "it's we've they'll I'd   \n\n x",
                   "x = 12345 + 3.14e-10  # 数字 ١٢٣", "    def f(self):\n        return 'don't'\n",
                   "Ünïcödé\u00a0nbsp\u2003em-space\r\n\r\n\tend ", eval_text]
        count, bad = check_tokenizer_with_npm(tok, tok_json, sample, args.check_tokenizer)
        print(f"tokenizer check against @huggingface/tokenizers: {count} texts, {len(bad)} mismatches")
        sys.exit(1 if bad else 0)
    os.makedirs(out, exist_ok=True)

    cfg = dict(BASE, model_type="llama")
    w = train(init_weights(cfg, gen), cfg, stream, TRAIN_STEPS, TRAIN_LR, gen, "llama")
    results = {}
    results["llama_f32"] = write_folder(out, "llama_f32", cfg, w, tok, tok_json, eval_text, eval_ids)
    results["llama_bf16"] = write_folder(out, "llama_bf16", cfg, w, tok, tok_json, eval_text, eval_ids,
                                         dtype=torch.bfloat16, shards=2)

    tied_cfg = dict(cfg, tie_word_embeddings=True, rope_scaling=LLAMA3_SCALING)
    # One matrix for both ends: start from the mean of the two, then adapt to the tying and the scaled rope.
    tied_w = {k: v for k, v in w.items() if k != "lm_head.weight"}
    tied_w["model.embed_tokens.weight"] = (w["model.embed_tokens.weight"] + w["lm_head.weight"]) / 2
    tied_w = train(tied_w, tied_cfg, stream, TUNE_STEPS, TRAIN_LR / 2, gen, "llama tied, llama3 rope")
    results["llama_tied_ropescaled"] = write_folder(out, "llama_tied_ropescaled", tied_cfg, tied_w, tok, tok_json,
                                                    eval_text, eval_ids)

    qwen_cfg = dict(cfg, model_type="qwen2", rope_theta=1000000.0, rms_norm_eps=1e-6)
    del qwen_cfg["head_dim"], qwen_cfg["attention_bias"]
    qwen_w = dict(w)
    for name, shape in weight_shapes(qwen_cfg).items():
        if name.endswith(".bias"):
            qwen_w[name] = torch.randn(shape, generator=gen) * 0.5
    qwen_w = train(qwen_w, qwen_cfg, stream, TUNE_STEPS, TRAIN_LR / 4, gen, "qwen2")
    results["qwen2_f32"] = write_folder(out, "qwen2_f32", qwen_cfg, qwen_w, tok, tok_json, eval_text, eval_ids)

    k_cfg = dict(cfg, **K256)
    k_w = train(init_weights(k_cfg, gen), k_cfg, stream, K256_STEPS, TRAIN_LR / 2, gen, "llama k256")
    results["llama_k256"] = write_folder(out, "llama_k256", k_cfg, k_w, tok, tok_json, eval_text, eval_ids)

    write_json(record_path, {"stamp": stamp, "perplexity": {k: v["perplexity"] for k, v in results.items()},
                             "vocab_size": VOCAB, "seconds": round(time.time() - begin, 1)})
    print(f"llm fixtures written in {time.time() - begin:.1f} s")


if __name__ == "__main__":
    main()
