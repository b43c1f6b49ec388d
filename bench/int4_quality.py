#!/usr/bin/env python3
"""int4 (--quantize int4) against its unquantized reference on one model: top-1 agreement and
logit error (max |int4 - reference| / max |reference|) over the positions of a text, through
shardlm's Python module (build/python). The reference is the model with --dtype as given
(bfloat16 for the real Gemma 3 270M GGUF, whose Q4_K_M blocks decode to floats first).
    PYTHONPATH=build/python python3 bench/int4_quality.py MODEL TEXT_FILE [TOKENS (512)] [DTYPE (bfloat16)]
"""
import sys

import numpy as np
import shardlm


def main(model, text_file, tokens=512, dtype="bfloat16"):
    tokenizer = shardlm.AutoTokenizer.from_pretrained(model)
    with open(text_file) as f:
        ids = tokenizer.encode(f.read())[: int(tokens)]
    reference = np.asarray(shardlm.AutoModelForCausalLM.from_pretrained(model, dtype=dtype).logits([ids]))
    quantized = np.asarray(shardlm.AutoModelForCausalLM.from_pretrained(model, quantize="int4").logits([ids]))
    reference, quantized = reference.reshape(len(ids), -1), quantized.reshape(len(ids), -1)
    top1 = float(np.mean(reference.argmax(-1) == quantized.argmax(-1)))
    error = float(np.abs(quantized - reference).max() / np.abs(reference).max())
    print(f"{model}: int4 against {dtype} over {len(ids)} positions: top-1 agreement {top1:.3f}, logit error {error:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
