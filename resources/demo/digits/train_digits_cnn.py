#!/usr/bin/python3
"""Trains the demo model: a small CNN on scikit-learn's bundled 8x8 handwritten digits.

Writes, next to this script:
  digits_cnn.onnx    the trained float model (opset 13, input "input" [N, 1, 8, 8] float32,
                     output "logits" [N, 10] float32, dynamic batch axis)
  digits_calib.npz   calibration set: "input" [n, 1, 8, 8] float32, "labels" [n] int64
  digits_eval.npz    labelled evaluation set, same arrays

This is a developer step: the outputs are committed and CI never retrains. It needs the
Debian packages python3-torch, python3-sklearn, python3-onnx and python3-numpy; run it with
/usr/bin/python3. No download happens: the digits ship inside scikit-learn.

Data and preprocessing (the app must feed the model exactly this):
  * sklearn.datasets.load_digits(): 1797 grayscale 8x8 images, integer pixels 0..16, labels 0..9.
  * pixel / 16.0, as float32, so every value lies in [0, 1]; no mean/std normalisation.
  * layout NCHW: [N, 1, 8, 8], row-major, image row first (as in load_digits().images).
Split (stratified by label, fixed seed, disjoint):
  * evaluation  = 450 images (25 %), then from the rest
  * calibration = 270 images (15 % of the total),
  * training    = the remaining 1077 images (60 %).
  Each set is stored in ascending order of its original load_digits index.

Training: Adam (lr 2e-3, weight decay 1e-4), cosine schedule over 60 epochs, batch 32,
cross-entropy. Training batches only are augmented by shifting each image by a random
whole pixel (-1, 0 or +1 in each direction, zero fill); calibration and evaluation images
are never shifted.

Determinism: seeds for Python, NumPy and torch; torch.use_deterministic_algorithms(True);
one thread; shuffling from a seeded torch.Generator. The .npz files are written with a
fixed zip timestamp, so re-running gives byte-identical .npz files; the ONNX file is
identical as long as the same torch build runs the same (single-threaded) arithmetic.

The exported graph is checked with onnx.checker and then run by a small NumPy evaluator
of the node types it contains (onnx.reference is not in Debian 12's python3-onnx 1.12),
whose logits must match torch's.
"""
import collections
import io
import pathlib
import random
import zipfile

import numpy as np
import onnx
import onnx.numpy_helper
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

SEED = 20261122
EVAL_SIZE = 450
CALIB_SIZE = 270
EPOCHS = 60
BATCH_SIZE = 32
LEARNING_RATE = 2e-3
WEIGHT_DECAY = 1e-4
OPSET = 13
HERE = pathlib.Path(__file__).resolve().parent
ZIP_TIMESTAMP = (2026, 1, 1, 0, 0, 0)


def seed_everything():
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def load_splits():
    """Returns {"train"|"calib"|"eval": (inputs [n,1,8,8] float32, labels [n] int64)}."""
    digits = load_digits()
    images = (digits.images.astype(np.float64) / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    index = np.arange(len(labels))
    rest, evaluation = train_test_split(index, test_size=EVAL_SIZE, stratify=labels, random_state=SEED)
    train, calibration = train_test_split(rest, test_size=CALIB_SIZE, stratify=labels[rest], random_state=SEED + 1)
    splits = {"train": np.sort(train), "calib": np.sort(calibration), "eval": np.sort(evaluation)}
    seen = np.concatenate(list(splits.values()))
    assert len(seen) == len(labels) and len(np.unique(seen)) == len(labels), "splits overlap or miss images"
    return {name: (np.ascontiguousarray(images[ix]), labels[ix]) for name, ix in splits.items()}


class DigitsCNN(nn.Module):
    """Conv 1->16, Conv 16->32 + MaxPool, Conv 32->32, Gemm 512->64, Gemm 64->10, ReLU between."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(collections.OrderedDict([
            ("conv1", nn.Conv2d(1, 16, kernel_size=3, padding=1)),    # [N,16,8,8]
            ("relu1", nn.ReLU()),
            ("conv2", nn.Conv2d(16, 32, kernel_size=3, padding=1)),   # [N,32,8,8]
            ("relu2", nn.ReLU()),
            ("pool", nn.MaxPool2d(kernel_size=2)),                    # [N,32,4,4]
            ("conv3", nn.Conv2d(32, 32, kernel_size=3, padding=1)),   # [N,32,4,4]
            ("relu3", nn.ReLU()),
        ]))
        self.classifier = nn.Sequential(collections.OrderedDict([
            ("flatten", nn.Flatten()),                                # [N,512]
            ("fc1", nn.Linear(32 * 4 * 4, 64)),
            ("relu", nn.ReLU()),
            ("fc2", nn.Linear(64, 10)),                               # logits
        ]))

    def forward(self, x):
        return self.classifier(self.features(x))


def accuracy(model, inputs, labels):
    with torch.no_grad():
        logits = model(torch.from_numpy(inputs))
    return float((logits.argmax(dim=1).numpy() == labels).mean())


def shift_batch(x, generator):
    """Augmentation: moves each image by a random whole-pixel offset in {-1, 0, 1}^2, zero fill."""
    padded = nn.functional.pad(x, (1, 1, 1, 1))
    offsets = torch.randint(0, 3, (len(x), 2), generator=generator)
    out = torch.empty_like(x)
    for dy in range(3):
        for dx in range(3):
            chosen = (offsets[:, 0] == dy) & (offsets[:, 1] == dx)
            out[chosen] = padded[chosen, :, dy:dy + 8, dx:dx + 8]
    return out


def train(model, inputs, labels, splits):
    x, y = torch.from_numpy(inputs), torch.from_numpy(labels)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(SEED)
    for epoch in range(1, EPOCHS + 1):
        model.train()
        order = torch.randperm(len(y), generator=generator)
        total = 0.0
        for start in range(0, len(y), BATCH_SIZE):
            batch = order[start:start + BATCH_SIZE]
            optimizer.zero_grad()
            loss = loss_fn(model(shift_batch(x[batch], generator)), y[batch])
            loss.backward()
            optimizer.step()
            total += float(loss) * len(batch)
        schedule.step()
        if epoch % 10 == 0 or epoch == 1:
            model.eval()
            print(f"epoch {epoch:3d}  loss {total / len(y):.4f}  "
                  f"train {accuracy(model, *splits['train']):.4f}  calib {accuracy(model, *splits['calib']):.4f}")
    model.eval()


def write_npz(path, arrays):
    """Like numpy.savez (stored .npy members), but with a fixed timestamp so the bytes are reproducible."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=ZIP_TIMESTAMP)
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            archive.writestr(info, buffer.getvalue())


# ---- a minimal NumPy evaluator for the exported graph (verification only) ----

def _conv(x, w, b, attrs):
    if any(d != 1 for d in attrs.get("dilations", [1, 1])) or attrs.get("group", 1) != 1:
        raise NotImplementedError("Conv with dilation or groups")
    pads = attrs.get("pads", [0, 0, 0, 0])
    sh, sw = attrs.get("strides", [1, 1])
    kh, kw = w.shape[2:]
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (x.shape[2] - kh) // sh + 1
    ow = (x.shape[3] - kw) // sw + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw].astype(np.float64)
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.float64))
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    return out


def _maxpool(x, attrs):
    kh, kw = attrs["kernel_shape"]
    sh, sw = attrs.get("strides", [kh, kw])
    if any(attrs.get("pads", [0, 0, 0, 0])) or attrs.get("ceil_mode", 0):
        raise NotImplementedError("MaxPool with padding or ceil_mode")
    oh = (x.shape[2] - kh) // sh + 1
    ow = (x.shape[3] - kw) // sw + 1
    out = np.full((x.shape[0], x.shape[1], oh, ow), -np.inf)
    for i in range(kh):
        for j in range(kw):
            out = np.maximum(out, x[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw])
    return out


def _gemm(a, b, c, attrs):
    if attrs.get("transA", 0):
        a = a.T
    if attrs.get("transB", 0):
        b = b.T
    out = attrs.get("alpha", 1.0) * (a.astype(np.float64) @ b.astype(np.float64))
    if c is not None:
        out = out + attrs.get("beta", 1.0) * c.astype(np.float64)
    return out


def run_onnx_numpy(model, inputs):
    values = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    values[model.graph.input[0].name] = inputs
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        args = [values[name] if name else None for name in node.input]
        if node.op_type == "Conv":
            out = _conv(args[0], args[1], args[2] if len(args) > 2 else None, attrs)
        elif node.op_type == "Relu":
            out = np.maximum(args[0], 0)
        elif node.op_type == "MaxPool":
            out = _maxpool(args[0], attrs)
        elif node.op_type == "Flatten":
            axis = attrs.get("axis", 1)
            out = args[0].reshape(int(np.prod(args[0].shape[:axis])), -1)
        elif node.op_type == "Gemm":
            out = _gemm(args[0], args[1], args[2] if len(args) > 2 else None, attrs)
        else:
            raise NotImplementedError(f"op {node.op_type} in node {node.name}")
        values[node.output[0]] = out
    return values[model.graph.output[0].name]


def export(model, example, path):
    torch.onnx.export(
        model, torch.from_numpy(example), str(path), opset_version=OPSET,
        input_names=["input"], output_names=["logits"],
        dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
        do_constant_folding=True, export_params=True)
    exported = onnx.load(str(path))
    onnx.checker.check_model(exported, full_check=True)
    return exported


def main():
    seed_everything()
    splits = load_splits()
    for name, (x, y) in splits.items():
        print(f"{name:5s}: {len(y):4d} images, per class {np.bincount(y, minlength=10).tolist()}")

    model = DigitsCNN()
    for name, module in model.named_modules():
        params = sum(p.numel() for p in module.parameters(recurse=False))
        if params:
            print(f"  {name:20s} {params:6d} parameters")
    print(f"  {'total':20s} {sum(p.numel() for p in model.parameters()):6d} parameters")

    train(model, *splits["train"], splits)
    for name, (x, y) in splits.items():
        top1 = accuracy(model, x, y)
        print(f"float top-1 {name:5s}: {top1 * 100:.2f} % ({int(round(top1 * len(y)))}/{len(y)})")

    onnx_path = HERE / "digits_cnn.onnx"
    exported = export(model, splits["eval"][0][:2], onnx_path)
    print("ONNX nodes:", ", ".join(f"{n.name} ({n.op_type})" for n in exported.graph.node))
    for name in ("calib", "eval"):
        x, _ = splits[name]
        with torch.no_grad():
            expected = model(torch.from_numpy(x)).numpy()
        got = run_onnx_numpy(exported, x)
        diff = float(np.abs(got - expected).max())
        print(f"ONNX (NumPy evaluator) vs torch logits on {name}: max |diff| {diff:.3g}")
        assert diff < 1e-5 * max(1.0, float(np.abs(expected).max())), "exported graph does not reproduce torch's logits"
        assert (got.argmax(axis=1) == expected.argmax(axis=1)).all()

    write_npz(HERE / "digits_calib.npz", {"input": splits["calib"][0], "labels": splits["calib"][1]})
    write_npz(HERE / "digits_eval.npz", {"input": splits["eval"][0], "labels": splits["eval"][1]})
    for name in ("digits_cnn.onnx", "digits_calib.npz", "digits_eval.npz"):
        print(f"wrote {name}: {(HERE / name).stat().st_size} bytes")


if __name__ == "__main__":
    main()
