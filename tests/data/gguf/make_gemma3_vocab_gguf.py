#!/usr/bin/env python3
"""Writes gemma3-vocab.gguf: the vocabulary of the real Gemma 3 270M GGUF (the file
bench/gemma3_gguf.sh fetches; a SentencePiece vocabulary, tokenizer.ggml.model "llama",
as llama.cpp's converter wrote it: tokens, scores, token types, special ids, add_bos_token,
add_space_prefix false) copied field by field, with the 270M's hyper-parameters and no
tensors; and gemma3-vocab.llama_cpp.txt: llama.cpp 0.5.0's tokenization of every line of
tests/data/tokenizers/corpus.jsonl with that file (special tokens parsed, no BOS), one
comma-separated line each. Both are committed xz-compressed (gemma3-vocab.tar.xz).
Run by hand. Pinned: gguf==0.19.0 numpy==2.4.6.
    python3 tests/data/gguf/make_gemma3_vocab_gguf.py GEMMA3_GGUF OUT_DIR LLAMA_CPP_TOKENIZE
(LLAMA_CPP_TOKENIZE: llama_cpp_tokenize.cpp beside this script, built.)
"""
import os
import subprocess
import sys

import gguf
import numpy as np


def copy_field(writer, field):
    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        item = field.types[1]
        if item == gguf.GGUFValueType.STRING:
            values = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        else:
            values = [field.parts[i][0].item() for i in field.data]
        writer.add_array(field.name, values)
    elif kind == gguf.GGUFValueType.STRING:
        writer.add_string(field.name, bytes(field.parts[field.data[0]]).decode("utf-8"))
    else:
        writer.add_key_value(field.name, field.parts[field.data[0]][0].item(), kind)


def main(source, out_dir, tokenize):
    reader = gguf.GGUFReader(source)
    path = f"{out_dir}/gemma3-vocab.gguf"
    writer = gguf.GGUFWriter(path, "gemma3")
    for name, field in reader.fields.items():
        if name.startswith("gemma3.") or name.startswith("tokenizer."):
            copy_field(writer, field)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizers", "corpus.jsonl")
    with open(corpus, "rb") as lines, open(f"{out_dir}/gemma3-vocab.llama_cpp.txt", "wb") as out:
        subprocess.run([tokenize, path], stdin=lines, stdout=out, stderr=subprocess.DEVNULL, check=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
