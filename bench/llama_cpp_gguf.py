#!/usr/bin/env python3
"""Writes the bench model (a Qwen3-shaped HF checkpoint, bfloat16 safetensors) as a GGUF
file that llama.cpp loads, for bench/llama_cpp_side_by_side.sh: the same weights, bytes
for bytes, in both runtimes.

    pip install gguf numpy          # by hand: CI never runs this
    python3 bench/llama_cpp_gguf.py MODEL_DIR OUT.gguf [TOKENIZER_JSON]

Written here rather than with llama.cpp's convert_hf_to_gguf.py, which needs torch and a
tokenizer: the bench model has none, and llama-bench feeds random token ids, so the file
declares no vocabulary ("none") beyond its size, unless a Qwen3 tokenizer.json is given
(llama-server, bench/serve_side_by_side.sh, decodes what it streams). Matrices stay bf16 as stored; 1-D norm
weights become f32, as llama.cpp's own converter writes them (its CPU add/mul kernels do
not take bf16 operands). llama-quantize makes the F16 and Q8_0 files from this one.
"""
import json
import os
import struct
import sys

try:
    import gguf
    import numpy as np
except ImportError as missing:
    sys.exit(f"llama_cpp_gguf.py needs Python's gguf and numpy (pip install gguf numpy): {missing}")

# HF's per-layer tensor names (after model.layers.N.) by GGUF's (after blk.N.).
LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def read_safetensors(path):
    """The file's bytes, and name -> (shape, byte offset) of its bf16 tensors."""
    with open(path, "rb") as f:
        data = f.read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_bytes])
    header.pop("__metadata__", None)
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "BF16":
            sys.exit(f"{path}: tensor {name} is {entry['dtype']}; this writer takes bfloat16 checkpoints only")
        tensors[name] = (entry["shape"], 8 + header_bytes + entry["data_offsets"][0])
    return data, tensors


def add_vocabulary(writer, tokenizer_path, vocab_size):
    """A Qwen2-family byte-level BPE vocabulary from tokenizer.json, as llama.cpp's converter
    writes it: every id up to vocab_size (unused ids as [PADn]), merges, token types."""
    with open(tokenizer_path) as f:
        tokenizer = json.load(f)
    model = tokenizer["model"]
    if model.get("type") != "BPE":
        sys.exit(f"{tokenizer_path}: a BPE tokenizer is needed, not {model.get('type')}")
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [gguf.TokenType.UNUSED] * vocab_size
    for token, index in model["vocab"].items():
        if index < vocab_size:
            tokens[index], types[index] = token, gguf.TokenType.NORMAL
    for added in tokenizer.get("added_tokens", []):
        if added["id"] < vocab_size:
            tokens[added["id"]] = added["content"]
            types[added["id"]] = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_add_bos_token(False)
    specials = {a["content"]: a["id"] for a in tokenizer.get("added_tokens", [])}
    if "<|endoftext|>" in specials:
        writer.add_eos_token_id(specials["<|endoftext|>"])
        writer.add_pad_token_id(specials["<|endoftext|>"])


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: llama_cpp_gguf.py MODEL_DIR OUT.gguf [TOKENIZER_JSON]")
    model_dir, output = sys.argv[1], sys.argv[2]
    for name in ("config.json", "model.safetensors"):
        if not os.path.isfile(f"{model_dir}/{name}"):
            sys.exit(f"{model_dir}: no {name} (a checkpoint directory holds both)")
    with open(f"{model_dir}/config.json") as f:
        config = json.load(f)
    if config.get("model_type") != "qwen3" or not config.get("tie_word_embeddings", False):
        sys.exit(f"{model_dir}/config.json: this writer takes tied-embedding Qwen3 checkpoints only")
    data, tensors = read_safetensors(f"{model_dir}/model.safetensors")

    writer = gguf.GGUFWriter(output, "qwen3")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_key_length(config["head_dim"])
    writer.add_value_length(config["head_dim"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(config["rope_theta"])
    if len(sys.argv) == 4:  # llama-server detokenizes what it streams: it needs the vocabulary
        add_vocabulary(writer, sys.argv[3], config["vocab_size"])
    else:
        writer.add_tokenizer_model("none")
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)

    def add(gguf_name, hf_name):
        if hf_name not in tensors:
            sys.exit(f"{model_dir}/model.safetensors: no tensor {hf_name}")
        shape, offset = tensors[hf_name]
        bits = np.frombuffer(data, dtype=np.uint16, count=int(np.prod(shape)), offset=offset).reshape(shape)
        if bits.ndim == 1:
            writer.add_tensor(gguf_name, (bits.astype(np.uint32) << 16).view(np.float32))
        else:
            writer.add_tensor(gguf_name, bits, raw_shape=list(shape), raw_dtype=gguf.GGMLQuantizationType.BF16)

    add("token_embd.weight", "model.embed_tokens.weight")  # tied: llama.cpp reuses it as the output
    add("output_norm.weight", "model.norm.weight")
    for layer in range(config["num_hidden_layers"]):
        for gguf_name, hf_name in LAYER_TENSORS.items():
            add(f"blk.{layer}.{gguf_name}.weight", f"model.layers.{layer}.{hf_name}.weight")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
