"""The peer of bench/device/check.sh: Hugging Face transformers on the same GPU, the same
config (random weights via from_config), bfloat16, static cache with the compiled forward
that generate() uses for it. Also measures the GPU's bf16 matrix peak with torch.matmul
(an 8192^3 product), the figure shardlm's prefill is compared with. Writes one JSON object.

    python3 bench/device/transformers_peer.py --config bench/qwen3-0.6b-config.json --output peer.json
"""
import argparse
import json
import time

import torch
import transformers


def timed(function, repetitions):
    function()  # warm-up: compiles
    function()
    torch.cuda.synchronize()
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        function()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def matmul_peak_tflops():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    seconds = timed(lambda: torch.matmul(a, b), 10)
    return 2 * 8192**3 / seconds / 1e12


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()

    result = {"transformers": transformers.__version__, "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name(0), "bf16_matmul_tflops": matmul_peak_tflops()}
    print(json.dumps(result), flush=True)

    config = transformers.AutoConfig.for_model(**json.load(open(args.config)))
    model = transformers.AutoModelForCausalLM.from_config(config).to(device="cuda", dtype=torch.bfloat16).eval()
    vocab = config.vocab_size

    def generate(batch, prompt_tokens, new_tokens):
        ids = torch.randint(0, vocab, (batch, prompt_tokens), device="cuda")
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, do_sample=False, cache_implementation="static",
                           pad_token_id=0)

    for batch in (1, 8):
        # Decode time: a generation of new_tokens minus one of a single token (the prefill).
        whole = timed(lambda: generate(batch, args.prompt_tokens, args.new_tokens), 3)
        first = timed(lambda: generate(batch, args.prompt_tokens, 1), 3)
        result[f"decode_b{batch}_tok_s"] = batch * (args.new_tokens - 1) / (whole - first)
        print(json.dumps(result), flush=True)
    prefill = timed(lambda: generate(1, 2048, 1), 3)
    result["prefill_2048_tok_s"] = 2048 / prefill
    print(json.dumps(result), flush=True)
    json.dump(result, open(args.output, "w"))


if __name__ == "__main__":
    main()
