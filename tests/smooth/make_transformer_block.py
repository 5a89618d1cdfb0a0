#!/usr/bin/python3
"""A small pre-LayerNorm transformer block with LLM-like activation outliers,
for the SmoothQuant figures (tst_smoothquant, docs/algorithms.md).

Nothing is trained: the block is PyTorch's default random initialization
(torch.manual_seed(0), CPU) with the LayerNorms' gamma drawn from U(0.8, 1.2)
and beta from N(0, 0.05), and then, as the SmoothQuant paper observes in
real LLMs, a few hidden channels carry activations far larger than the rest:
the LayerNorm weights (gamma) of 4 of the 64 channels (0, 13, 29, 50) are
multiplied by 40 in both LayerNorms of the block, and the same channels of the
input embeddings by 8. The block:
    h = x + Wo * Attention(LN1(x) Wq, LN1(x) Wk, LN1(x) Wv)   (4 heads of 16)
    y = h + W2 * GELU(LN2(h) W1)                               (64 -> 256 -> 64)
    out = LNf(y) Wh                                            (64 -> 64)
exported to ONNX opset 17 (LayerNormalization; nn.Linear as MatMul + Add).
The data are random token embeddings x [N, 16, 64] (normal, then the outlier
channels times 8): 64 calibration and 64 evaluation sequences.

usage: make_transformer_block.py DIR
  writes DIR/block.onnx, DIR/block_calib.npz and DIR/block_eval.npz (array x).
"""
import os
import sys

import numpy as np
import torch
from torch import nn

D, HEADS, T, FF = 64, 4, 16, 256
OUTLIERS = [0, 13, 29, 50]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.q = nn.Linear(D, D)
        self.k = nn.Linear(D, D)
        self.v = nn.Linear(D, D)
        self.o = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, FF)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(FF, D)
        self.lnf = nn.LayerNorm(D)
        self.head = nn.Linear(D, D)

    def forward(self, x):
        b, t, _ = x.shape
        a = self.ln1(x)
        split = lambda z: z.reshape(b, t, HEADS, D // HEADS).transpose(1, 2)
        q, k, v = split(self.q(a)), split(self.k(a)), split(self.v(a))
        att = torch.softmax(q @ k.transpose(-1, -2) / (D // HEADS) ** 0.5, dim=-1)
        h = x + self.o((att @ v).transpose(1, 2).reshape(b, t, D))
        y = h + self.fc2(self.act(self.fc1(self.ln2(h))))
        return self.head(self.lnf(y))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    block = Block().eval()
    with torch.no_grad():
        # Trained LayerNorms are not ones and zeros (and the exporter would merge equal ones into one
        # initializer that three LayerNorms read, which no single LayerNorm could then take 1/s into).
        for ln in (block.ln1, block.ln2, block.lnf):
            ln.weight.uniform_(0.8, 1.2)
            ln.bias.normal_(0.0, 0.05)
        for ln in (block.ln1, block.ln2):
            ln.weight[OUTLIERS] *= 40.0
    gen = torch.Generator().manual_seed(1)

    def data(n):
        x = torch.randn(n, T, D, generator=gen)
        x[:, :, OUTLIERS] *= 8.0
        return x

    calib, evaluation = data(64), data(64)
    np.savez(os.path.join(out, "block_calib.npz"), x=calib.numpy())
    np.savez(os.path.join(out, "block_eval.npz"), x=evaluation.numpy())
    torch.onnx.export(block, (calib[:1],), os.path.join(out, "block.onnx"), opset_version=17,
                      input_names=["x"], output_names=["out"], dynamic_axes={"x": {0: "n"}, "out": {0: "n"}})


if __name__ == "__main__":
    main()
