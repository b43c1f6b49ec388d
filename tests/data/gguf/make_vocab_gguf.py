#!/usr/bin/env python3
"""Writes qwen3-vocab.gguf: Qwen3's real vocabulary (tests/data/tokenizers/qwen3) as
llama.cpp's convert_hf_to_gguf.py writes it (tokenizer.ggml.model "gpt2", pre "qwen2",
every id up to the vocabulary size with unused ids as [PADn] of type UNUSED, merges, token
types, special ids, chat template), with a Qwen3's hyper-parameters and no tensors, and
qwen3-vocab.llama_cpp.txt: llama.cpp 0.5.0's tokenization of every line of
tests/data/tokenizers/corpus.jsonl with that file (special tokens parsed, no BOS), one
comma-separated line each. Both are committed xz-compressed (qwen3-vocab.tar.xz).
Run by hand. Pinned: gguf==0.19.0 numpy==2.4.6.
    python3 tests/data/gguf/make_vocab_gguf.py QWEN3_TOKENIZER_DIR OUT_DIR LLAMA_CPP_TOKENIZE
(LLAMA_CPP_TOKENIZE: llama_cpp_tokenize.cpp beside this script, built.)
"""
import json
import os
import subprocess
import sys

import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
from llama_cpp_gguf import add_vocabulary  # noqa: E402

VOCAB_SIZE = 151936  # Qwen3's embedding rows: ids past the tokenizer's are [PADn]


def main(tokenizer_dir, out_dir, tokenize):
    path = f"{out_dir}/qwen3-vocab.gguf"
    writer = gguf.GGUFWriter(path, "qwen3")
    writer.add_context_length(40960)
    writer.add_embedding_length(1024)
    writer.add_block_count(28)
    writer.add_feed_forward_length(3072)
    writer.add_head_count(16)
    writer.add_head_count_kv(8)
    writer.add_key_length(128)
    writer.add_value_length(128)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1000000.0)
    add_vocabulary(writer, f"{tokenizer_dir}/tokenizer.json", VOCAB_SIZE)
    with open(f"{tokenizer_dir}/tokenizer_config.json") as f:
        writer.add_chat_template(json.load(f)["chat_template"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizers", "corpus.jsonl")
    with open(corpus, "rb") as lines, open(f"{out_dir}/qwen3-vocab.llama_cpp.txt", "wb") as out:
        subprocess.run([tokenize, path], stdin=lines, stdout=out, stderr=subprocess.DEVNULL, check=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
