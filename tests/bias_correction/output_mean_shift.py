#!/usr/bin/python3
"""The shift of a layer's mean output that quantizing its weight causes, computed
from the layer's outputs themselves: E[W x] - E[W^ x] per output channel, the mean
taken over every input row (Gemm) or over every image and output position (Conv),
with NumPy in float64. This is what empirical bias correction (Nagel et al. 2019,
"Data-Free Quantization", section 4.2) adds to the bias.

usage: output_mean_shift.py DIR gemm
         DIR holds W.npy and Wq.npy (float32 [O, C]) and X.npy (float32 [N, C])
       output_mean_shift.py DIR conv STRIDE PAD [GROUPS]
         W.npy, Wq.npy float32 [O, C/GROUPS, kh, kw], X.npy float32 [N, C, H, W];
         square stride and zero padding on every side; GROUPS (default 1) as
         ONNX Conv's `group`: output channel o sees the input channels of group
         o // (O / GROUPS) only (GROUPS = C = O is a depthwise convolution)
Writes DIR/ref_shift.npy (float64 [O]).
"""
import sys

import numpy as np


def conv2d(x, w, stride, pad, groups=1):
    if groups > 1:
        # Each group is a convolution of its own input channels by its own output channels.
        cg, og = x.shape[1] // groups, w.shape[0] // groups
        return np.concatenate([conv2d(x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og], stride, pad)
                               for g in range(groups)], axis=1)
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]  # [n, c, oh, ow]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


def main():
    folder, mode = sys.argv[1], sys.argv[2]
    W = np.load(folder + "/W.npy").astype(np.float64)
    Wq = np.load(folder + "/Wq.npy").astype(np.float64)
    X = np.load(folder + "/X.npy").astype(np.float64)
    if mode == "gemm":
        shift = (X @ W.T).mean(axis=0) - (X @ Wq.T).mean(axis=0)
    else:
        stride, pad = int(sys.argv[3]), int(sys.argv[4])
        groups = int(sys.argv[5]) if len(sys.argv) > 5 else 1
        shift = (conv2d(X, W, stride, pad, groups).mean(axis=(0, 2, 3)) -
                 conv2d(X, Wq, stride, pad, groups).mean(axis=(0, 2, 3)))
    np.save(folder + "/ref_shift.npy", shift)


if __name__ == "__main__":
    main()
