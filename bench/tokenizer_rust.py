#!/usr/bin/env python3
"""The Rust `tokenizers` library on the text tokenizer_bench encodes, single-threaded.

    python bench/tokenizer_rust.py --tokenizer tokenizer.json --text lines.txt

Run by `tokenizer_bench --python PYTHON` so both figures come from the same run.
"""
import argparse
import os
import time

# The library parallelizes batches with rayon; pin it to one thread before import.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_CPUS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--shardlm-mb-per-s", type=float, default=None)
    args = parser.parse_args()

    start = time.perf_counter()
    tok = tokenizers.Tokenizer.from_file(args.tokenizer)
    load = time.perf_counter() - start
    with open(args.text, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    size = sum(len(line.encode("utf-8")) + 1 for line in lines)

    tok.encode_batch(lines, add_special_tokens=False)  # warm the cache, as tokenizer_bench does
    start = time.perf_counter()
    tok.encode_batch(lines, add_special_tokens=False)
    seconds = time.perf_counter() - start
    rust = size / 1e6 / seconds
    print(f"rust:       {rust:.2f} MB/s (tokenizers {tokenizers.__version__}, 1 thread), load {load * 1e3:.1f} ms")
    if args.shardlm_mb_per_s:
        print(f"speedup:    {args.shardlm_mb_per_s / rust:.2f}x")


if __name__ == "__main__":
    main()
