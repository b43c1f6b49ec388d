#!/usr/bin/env python3
"""Writes the expected outputs the tokenizer tests compare against.

The expectations come only from the reference libraries (the Rust `tokenizers` package
and transformers' AutoTokenizer), never from shardlm. See README.md for the command and
the versions that produced the committed files.
"""
import argparse
import io
import json
import lzma
import os
import random
import sys
import tarfile
import tempfile

import tokenizers
import transformers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ["stories260K", "qwen3", "llama3", "llama3_1", "gemma3", "deepseek_v3"]


def materialize(name, scratch):
    """A directory holding the tokenizer files of `name` (unpacking tokenizer.tar.xz)."""
    src = os.path.join(HERE, name)
    archive = os.path.join(src, "tokenizer.tar.xz")
    if not os.path.exists(archive):
        return src
    out = os.path.join(scratch, name)
    os.makedirs(out, exist_ok=True)
    with lzma.open(archive) as xz, tarfile.open(fileobj=io.BytesIO(xz.read())) as tar:
        tar.extractall(out)
    for extra in ("special_tokens_map.json",):
        if os.path.exists(os.path.join(src, extra)):
            with open(os.path.join(src, extra), "rb") as f, open(os.path.join(out, extra), "wb") as g:
                g.write(f.read())
    return out


def random_id_sequences(vocab_size, count, seed):
    rng = random.Random(seed)
    seqs = []
    for _ in range(count):
        n = rng.randint(1, 24)
        seqs.append([rng.randrange(vocab_size) for _ in range(n)])
    # Low ids are byte tokens and specials in several of these vocabularies.
    for _ in range(count // 2):
        n = rng.randint(1, 12)
        seqs.append([rng.randrange(min(vocab_size, 300)) for _ in range(n)])
    return seqs


BATCH_OPTIONS = [
    {"padding": True},
    {"padding": True, "padding_side": "left"},
    {"padding": True, "padding_side": "right"},
    {"padding": "max_length", "max_length": 24, "truncation": True},
    {"truncation": True, "max_length": 5},
    {"truncation": True, "max_length": 5, "add_special_tokens": False},
    {"padding": "longest", "truncation": True, "max_length": 8, "truncation_side": "left"},
]


def batch_cases(auto, corpus):
    """Padding, truncation and attention masks of AutoTokenizer's __call__ on a batch."""
    batch = [corpus[i] for i in (7, 30, 62, 140, 200, 310)]
    cases = []
    for options in BATCH_OPTIONS:
        kwargs = dict(options)
        side = kwargs.pop("truncation_side", None)
        saved = auto.truncation_side
        if side:
            auto.truncation_side = side
        try:
            enc = auto(batch, **kwargs)
            cases.append({"texts": batch, "options": options, "input_ids": enc["input_ids"],
                          "attention_mask": enc["attention_mask"]})
        except Exception as e:  # e.g. padding without a pad token
            cases.append({"texts": batch, "options": options, "error": f"{type(e).__name__}: {e}"})
        finally:
            auto.truncation_side = saved
    return cases


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", default=NAMES)
    args = parser.parse_args()
    with open(os.path.join(HERE, "corpus.jsonl"), encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f if line.strip()]
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.only:
            directory = materialize(name, scratch)
            lib = tokenizers.Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
            auto = AutoTokenizer.from_pretrained(directory)
            out = {
                "tokenizer": name,
                "tokenizers_version": tokenizers.__version__,
                "transformers_version": transformers.__version__,
                "auto_class": type(auto).__name__,
                "corpus_size": len(corpus),
                "library": [],
                "auto": [],
                "random_decodes": [],
            }
            for text in corpus:
                ids = lib.encode(text, add_special_tokens=True).ids
                out["library"].append({
                    "ids": ids,
                    "ids_plain": lib.encode(text, add_special_tokens=False).ids,
                    "decoded": lib.decode(ids, skip_special_tokens=False),
                    "decoded_skip": lib.decode(ids, skip_special_tokens=True),
                })
                ids = auto(text, add_special_tokens=True)["input_ids"]
                out["auto"].append({
                    "ids": ids,
                    "ids_plain": auto(text, add_special_tokens=False)["input_ids"],
                    "decoded": auto.decode(ids, skip_special_tokens=False),
                    "decoded_skip": auto.decode(ids, skip_special_tokens=True),
                })
            for seq in random_id_sequences(lib.get_vocab_size(with_added_tokens=True), 60, seed=len(name)):
                out["random_decodes"].append({
                    "ids": seq,
                    "library": lib.decode(seq, skip_special_tokens=False),
                    "library_skip": lib.decode(seq, skip_special_tokens=True),
                    "auto": auto.decode(seq, skip_special_tokens=False),
                    "auto_skip": auto.decode(seq, skip_special_tokens=True),
                })
            out["batches"] = batch_cases(auto, corpus)
            path = os.path.join(HERE, name, "goldens.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
                f.write("\n")
            diff = sum(1 for a, b in zip(out["library"], out["auto"]) if a != b)
            print(f"{name}: {len(corpus)} strings, auto differs from library on {diff}", file=sys.stderr)


if __name__ == "__main__":
    main()
