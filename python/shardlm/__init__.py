"""shardlm: Hugging Face causal language models from a native C++ runtime, with transformers' names.

    import shardlm
    tokenizer = shardlm.AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
    model = shardlm.AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", dtype="bfloat16")
    inputs = tokenizer("The French Bread Law states", return_tensors="np")
    print(tokenizer.decode(model.generate(**inputs, max_new_tokens=50)[0]))

Errors from the runtime are raised as shardlm.Error (a RuntimeError) with its message.
"""

from ._native import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DistributedConfig,
    Error,
    JobError,
    TextIteratorStreamer,
    accelerator,
)

__all__ = [
    "AutoModelForCausalLM",
    "AutoTokenizer",
    "DistributedConfig",
    "Error",
    "JobError",
    "TextIteratorStreamer",
    "accelerator",
]
