#!/usr/bin/env python3
"""Writes llama-k-quant.gguf: a random Llama whose every matrix row is a whole number of
256-value super-blocks (hidden 256, intermediate 768, 4 heads of 64 over 2 KV heads, 2
layers, 320 tokens, untied head), written in F32 as llama.cpp's converter writes one (its
names, q/k rows permuted) and quantized by llama.cpp's llama-quantize to Q4_K_M: Q4_K
and Q6_K matrices, F32 norms. Then llama-k-quant.json: a prompt, and transformers' greedy
continuation and logits of it on the file's weights dequantized (from_pretrained(dir,
gguf_file=...), run in float64), and llama.cpp's greedy continuation on the file itself.
Run by hand; the outputs are committed. Pinned: gguf==0.19.0 numpy==2.4.6 torch==2.15.0
transformers==5.23.0 accelerate==1.16.0, llama.cpp 0.5.0.
    python3 tests/data/gguf/make_k_quant_gguf.py tests/data/gguf LLAMA_QUANTIZE LLAMA_CPP_GREEDY
"""
import json
import os
import subprocess
import sys
import tempfile

import gguf
import numpy as np
import torch
import transformers

HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, LAYERS, VOCAB = 256, 768, 4, 2, 2, 320
HEAD_DIM = HIDDEN // HEADS
PROMPT = [1, 17, 250, 3, 99, 140, 7, 301, 64, 12]
STEPS = 24


def permute(weights, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rows from halves to pairs."""
    return weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def write_f32(path):
    random = np.random.default_rng(2026)

    def matrix(rows, columns):
        return (random.standard_normal((rows, columns)) * columns**-0.5).astype(np.float32)

    def norm():
        return (1 + 0.1 * random.standard_normal(HIDDEN)).astype(np.float32)

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("llama-k-quant")
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(INTERMEDIATE)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(VOCAB)
    writer.add_tokenizer_model("none")
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tensor("token_embd.weight", matrix(VOCAB, HIDDEN) * 16)
    writer.add_tensor("output_norm.weight", norm())
    writer.add_tensor("output.weight", matrix(VOCAB, HIDDEN))
    for layer in range(LAYERS):
        shapes = {"attn_q": (HIDDEN, HIDDEN), "attn_k": (KV_HEADS * HEAD_DIM, HIDDEN),
                  "attn_v": (KV_HEADS * HEAD_DIM, HIDDEN), "attn_output": (HIDDEN, HIDDEN),
                  "ffn_gate": (INTERMEDIATE, HIDDEN), "ffn_up": (INTERMEDIATE, HIDDEN),
                  "ffn_down": (HIDDEN, INTERMEDIATE)}
        for name, (rows, columns) in shapes.items():
            weight = matrix(rows, columns)
            if name == "attn_q":
                weight = permute(weight, HEADS)
            if name == "attn_k":
                weight = permute(weight, KV_HEADS)
            writer.add_tensor(f"blk.{layer}.{name}.weight", np.ascontiguousarray(weight))
        writer.add_tensor(f"blk.{layer}.attn_norm.weight", norm())
        writer.add_tensor(f"blk.{layer}.ffn_norm.weight", norm())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(out, quantize, greedy):
    output = os.path.join(out, "llama-k-quant.gguf")
    with tempfile.TemporaryDirectory() as work:
        write_f32(os.path.join(work, "f32.gguf"))
        subprocess.run([quantize, os.path.join(work, "f32.gguf"), output, "Q4_K_M"], check=True, capture_output=True)
    types = sorted({t.tensor_type.name for t in gguf.GGUFReader(output).tensors})
    assert types == ["F32", "Q4_K", "Q6_K"], types
    directory, name = os.path.split(os.path.abspath(output))
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    model = model.double().eval()
    with torch.no_grad():
        logits = model(torch.tensor([PROMPT])).logits[0].tolist()
        ids = model.generate(torch.tensor([PROMPT]), max_new_tokens=STEPS, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0, len(PROMPT):].tolist()
    llama = subprocess.run([greedy, output, str(STEPS), ",".join(map(str, PROMPT))], check=True, capture_output=True,
                           text=True).stdout.strip()
    llama_ids = [int(i) for i in llama.split(",")]
    with open(os.path.join(out, "llama-k-quant.json"), "w") as f:
        json.dump({"input_ids": PROMPT, "transformers_greedy_ids": ids, "llama_cpp_0_5_0_greedy_ids": llama_ids,
                   "transformers_logits": logits}, f)
        f.write("\n")
    same = next((i for i, (a, b) in enumerate(zip(ids, llama_ids)) if a != b), len(ids))
    print(f"{types}; transformers and llama.cpp agree on the first {same} of {STEPS} ids")


if __name__ == "__main__":
    main(*sys.argv[1:4])
