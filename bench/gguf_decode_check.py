#!/usr/bin/env python3
"""Compares build/bench/gguf_decode's per-tensor sums (shardlm's decoding, on stdin) with
Python gguf's decoding of the same GGUF file, tensor by tensor, and prints one line per
weight type: how many tensors agree within 1e-5 of their sum of squares.
    build/bench/gguf_decode FILE.gguf | python3 bench/gguf_decode_check.py FILE.gguf
Needs gguf and numpy (bench/gemma3_gguf.sh installs them, pinned, into a venv)."""
import collections
import json
import sys

import gguf
import numpy as np


def main(path):
    ours = {row["name"]: row for row in map(json.loads, sys.stdin)}
    agree, total, worst = collections.Counter(), collections.Counter(), collections.defaultdict(float)
    for tensor in gguf.GGUFReader(path).tensors:
        kind = tensor.tensor_type.name
        total[kind] += 1
        row = ours.get(tensor.name)
        if row is None or row.get("unreadable"):
            continue
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float64)
        sum_, squares = float(values.sum()), float((values * values).sum())
        scale = max(squares, 1e-30)
        error = max(abs(row["sum"] - sum_) / np.sqrt(scale * values.size), abs(row["squares"] - squares) / scale)
        worst[kind] = max(worst[kind], error)
        agree[kind] += error < 1e-5
    for kind in sorted(total):
        print(f"{kind}: {agree[kind]} of {total[kind]} tensors decode as Python gguf does "
              f"(largest relative difference of the sums {worst[kind]:.1e})")
    return 0 if sum(agree.values()) == sum(total.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
