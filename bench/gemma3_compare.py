#!/usr/bin/env python3
"""The real Gemma 3 270M Q4_K_M GGUF, shardlm against two references, prompt by prompt:
  float     transformers on the same weights dequantized to float32
            (from_pretrained(dir, gguf_file=...), as transformers loads a GGUF)
  llama.cpp llama.cpp 0.5.0 on the Q4_K_M file itself (tests/data/gguf/llama_cpp_greedy.cpp)
For each prompt: whether shardlm's tokenization equals llama.cpp's
(tests/data/gguf/llama_cpp_tokenize.cpp); how many leading tokens of shardlm's greedy
continuation (48 tokens, f32 activations) agree with each reference's; and where they part,
the float reference's logit margin between the two tokens, on the common prefix (a parting at
a near-tie is expected, at a wide margin it is a bug). f32 activations: the AVX-512 table
where this CPU has it (the AVX512-BF16 and AMX tables' prefill over the file's Q8_0 and
Q5_0 weights, run as int8, rounds the activations to int8 or bf16 as llama.cpp's does) and a
float32 KV cache; the last column is the leading agreement with the float reference of
shardlm as it runs by default. Run by bench/gemma3_gguf.sh.
    python3 bench/gemma3_compare.py GGUF SHARDLM LLAMA_CPP_GREEDY LLAMA_CPP_TOKENIZE
"""
import json
import os
import re
import subprocess
import sys

import torch
import transformers

STEPS = 48
LEADING = 16

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Q: What is 17 multiplied by 23?\nA:",
    "Here is a list of the planets of the solar system, in order from the Sun:\n1.",
    "La tour Eiffel a été construite en",
    "<start_of_turn>user\nWrite a haiku about autumn leaves.<end_of_turn>\n<start_of_turn>model\n",
    "The three laws of thermodynamics state that",
    "import numpy as np\n\n# Compute the mean and standard deviation of an array\nx = np.array([1, 2, 3, 4])\n",
]


def long_prompt():
    # Longer than the 512-token sliding window: the GPL's preamble and first sections
    # (Debian's base-files ship it), cut at a paragraph.
    with open("/usr/share/common-licenses/GPL-3") as f:
        text = f.read()
    return text[: text.index("  1. Source Code.")] + "  1. Source Code.\n\n  The \"source code\" for a work means"


def run(command, stdin=None):
    return subprocess.run(command, input=stdin, check=True, capture_output=True, text=True).stdout


def shardlm_ids(shardlm, gguf, text):
    line = run([shardlm, "tokenize", "-m", gguf], json.dumps(text) + "\n")
    return json.loads(line)["ids"]


def llama_cpp_ids(tokenize, gguf, text):
    line = run([tokenize, gguf], json.dumps(text) + "\n").strip()
    return [int(i) for i in line.split(",")] if line else []


def leading(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def f32_activations(shardlm):
    """The environment that keeps shardlm's activations f32 (see the module's docstring)."""
    tables = run([shardlm, "devices"])
    return dict(os.environ, SHARDLM_CPU_KERNELS="avx512") if re.search(r"avx512[,)]", tables) else None


def generate(shardlm, gguf, ids, *flags, env=None):
    command = [shardlm, "generate", "-m", gguf, "--input-ids", ids, "-n", str(STEPS), "--greedy", "--output", "ids"]
    out = subprocess.run(command + list(flags), check=True, capture_output=True, text=True, env=env).stdout
    return [int(i) for i in out.strip().split(",")]


def main(gguf, shardlm, greedy, tokenize):
    directory, name = os.path.split(os.path.abspath(gguf))
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval()
    prompts = PROMPTS + [long_prompt()]
    rows, float_wins = [], 0
    for index, text in enumerate(prompts):
        ours_text_ids = shardlm_ids(shardlm, gguf, text)
        same_tokens = ours_text_ids == llama_cpp_ids(tokenize, gguf, text)
        prompt = [2] + ours_text_ids  # BOS, as the vocabulary's add_bos_token says
        ids = ",".join(map(str, prompt))
        ours = generate(shardlm, gguf, ids, "--kv-cache-dtype", "float32", env=f32_activations(shardlm))
        ours_by_default = generate(shardlm, gguf, ids)
        llama = [int(i) for i in run([greedy, gguf, str(STEPS), ids]).strip().split(",")]
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), max_new_tokens=STEPS, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
        reference = out[0, len(prompt):].tolist()

        def margin(other):  # the float model's logit gap between the two tokens where they part
            n = leading(ours, other)
            if n >= min(len(ours), len(other)):
                return None
            with torch.no_grad():
                logits = model(torch.tensor([prompt + ours[:n]])).logits[0, -1]
            return float(abs(logits[ours[n]] - logits[other[n]]))

        float_agree, llama_agree = leading(ours, reference), leading(ours, llama)
        float_wins += float_agree >= LEADING
        rows.append({"prompt": index + 1, "prompt_tokens": len(prompt), "tokenization_equals_llama_cpp": same_tokens,
                     "agree_with_float": float_agree, "float_margin_at_parting": margin(reference),
                     "agree_with_llama_cpp": llama_agree, "margin_at_parting_from_llama_cpp": margin(llama),
                     "float_agrees_with_llama_cpp": leading(reference, llama),
                     "by_default_agree_with_float": leading(ours_by_default, reference)})
        print(json.dumps(rows[-1]), flush=True)
    print(f"shardlm equals the float reference on the first {LEADING} tokens of {float_wins} of {len(prompts)} "
          f"prompts; tokenization equals llama.cpp's on "
          f"{sum(r['tokenization_equals_llama_cpp'] for r in rows)} of {len(prompts)}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
