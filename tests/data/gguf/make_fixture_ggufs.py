#!/usr/bin/env python3
"""Writes GGUF twins of two golden fixtures, as llama.cpp's convert_hf_to_gguf.py writes
them (its names, metadata keys and, for Llama, its permutation of q_proj and k_proj rows
into interleaved rope pairs), F32 throughout, no vocabulary ("none"):
  qwen3-tiny.gguf  Qwen3: q/k norms, head_dim 32 != hidden / heads, GQA, tied embeddings
  llama-tiny.gguf  Llama: permuted q/k, untied output
llama.cpp 0.5.0 on these files gives each fixture's golden greedy_ids: `--check PROGRAM`
reruns that comparison (PROGRAM: llama_cpp_greedy.cpp beside this script, built).
With `--quantize LLAMA_QUANTIZE` (llama.cpp's llama-quantize) it also writes
  llama-tiny-q8_0.gguf  the Llama twin quantized to Q8_0 by llama.cpp
and with --check, llama-tiny-q8_0.json: llama.cpp's greedy continuation of the fixture's
prompt on that file, which shardlm's must equal.
Run by hand; the outputs are committed. Pinned: gguf==0.19.0 numpy==2.4.6.
    python3 tests/data/gguf/make_fixture_ggufs.py tests/data/fixtures tests/data/gguf \
      [--check PROGRAM] [--quantize LLAMA_QUANTIZE]
"""
import json
import os
import struct
import subprocess
import sys

import gguf
import numpy as np

# llama.cpp's per-layer names (after blk.N.) to transformers' (after model.layers.N.).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
from llama_cpp_gguf import LAYER_TENSORS  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    header.pop("__metadata__", None)
    tensors = {}
    for name, entry in header.items():
        assert entry["dtype"] == "F32", f"{path}: {name} is {entry['dtype']}"
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[8 + size + begin : 8 + size + end], dtype=np.float32).reshape(entry["shape"])
    return tensors


def permute(weights, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rows from halves to pairs."""
    return weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def convert(fixture_dir, output):
    with open(f"{fixture_dir}/config.json") as f:
        config = json.load(f)
    arch = config["model_type"]
    tensors = read_safetensors(f"{fixture_dir}/model.safetensors")
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    writer = gguf.GGUFWriter(output, arch)
    writer.add_name(os.path.basename(fixture_dir))
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(config["rope_theta"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_tokenizer_model("none")
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(config["eos_token_id"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tensor("token_embd.weight", tensors["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", tensors["model.norm.weight"])
    if "lm_head.weight" in tensors:
        writer.add_tensor("output.weight", tensors["lm_head.weight"])
    for layer in range(config["num_hidden_layers"]):
        for gguf_name, hf_name in LAYER_TENSORS.items():
            name = f"model.layers.{layer}.{hf_name}.weight"
            if name not in tensors:
                continue
            weight = tensors[name]
            if arch == "llama" and gguf_name == "attn_q":
                weight = permute(weight, heads)
            if arch == "llama" and gguf_name == "attn_k":
                weight = permute(weight, kv_heads)
            writer.add_tensor(f"blk.{layer}.{gguf_name}.weight", np.ascontiguousarray(weight))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def greedy_ids_of_llama_cpp(program, model, prompt, count):
    """PROGRAM MODEL COUNT IDS prints llama.cpp's greedy continuation, comma-separated
    (llama_cpp_greedy.cpp: llama_decode, argmax of llama_get_logits_ith), since llama.cpp's
    own tools detokenize and these files have no vocabulary."""
    ids = ",".join(str(int(i)) for i in prompt)
    output = subprocess.run([program, model, str(count), ids], check=True, capture_output=True, text=True).stdout
    return [int(i) for i in output.strip().split(",")]


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    options = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    program, quantize = options.get("--check"), options.get("--quantize")
    for name in ("qwen3-tiny", "llama-tiny"):
        output = f"{out}/{name}.gguf"
        convert(f"{fixtures}/{name}", output)
        if program:
            golden = read_golden(f"{fixtures}/{name}/golden.safetensors")
            ids = greedy_ids_of_llama_cpp(program, output, golden["input_ids"], len(golden["greedy_ids"]))
            same = sum(a == b for a, b in zip(ids, golden["greedy_ids"]))
            print(f"{name}: llama.cpp's greedy ids equal the golden's at {same} of {len(golden['greedy_ids'])}")
    if quantize:
        quantized = f"{out}/llama-tiny-q8_0.gguf"
        subprocess.run([quantize, f"{out}/llama-tiny.gguf", quantized, "Q8_0"], check=True, capture_output=True)
        if program:
            golden = read_golden(f"{fixtures}/llama-tiny/golden.safetensors")
            ids = greedy_ids_of_llama_cpp(program, quantized, golden["input_ids"], len(golden["greedy_ids"]))
            with open(f"{out}/llama-tiny-q8_0.json", "w") as f:
                json.dump({"input_ids": golden["input_ids"], "llama_cpp_greedy_ids": ids}, f)
                f.write("\n")


def read_golden(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    result = {}
    for name in ("input_ids", "greedy_ids"):
        begin, end = header[name]["data_offsets"]
        result[name] = np.frombuffer(data[8 + size + begin : 8 + size + end], dtype=np.int64).tolist()
    return result


if __name__ == "__main__":
    main()
