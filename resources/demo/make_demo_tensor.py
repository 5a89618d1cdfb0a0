#!/usr/bin/python3
"""Writes resources/demo/conv3x3_weight.npy: the demo tensor of the README's first command.

A 3x3 convolution weight [64, 32, 3, 3] shaped like trained ones: per-output-channel
spreads that differ by an order of magnitude (what makes per-channel scales pay), and
heavy-tailed values with a few outliers per channel (what makes clipping methods differ).
Seeded, so the file is the same on every run.
"""
import pathlib

import numpy as np

rng = np.random.default_rng(20261122)
out_channels, in_channels, k = 64, 32, 3
fan_in = in_channels * k * k
channel_std = np.sqrt(2.0 / fan_in) * rng.lognormal(mean=0.0, sigma=0.8, size=out_channels)
values = rng.standard_t(df=4, size=(out_channels, fan_in)) * channel_std[:, None] / np.sqrt(2.0)
weight = values.reshape(out_channels, in_channels, k, k).astype(np.float32)
np.save(pathlib.Path(__file__).with_name("conv3x3_weight.npy"), weight)
