#!/usr/bin/python3
"""Runs python3-onnx's full checker (with strict shape inference) on each ONNX
file given; exits 1 naming the first that fails."""
import sys

import onnx

for path in sys.argv[1:]:
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
    except Exception as e:  # the checker raises several exception types
        print(f"{path}: {e}", file=sys.stderr)
        sys.exit(1)
