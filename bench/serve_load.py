#!/usr/bin/env python3
"""A streaming load on OpenAI-compatible servers (`shardlm serve`, llama.cpp's llama-server),
alternating the servers at each concurrency, for bench/serve_side_by_side.sh. Standard
library only.

Each request is a /v1/completions stream of a distinct random token-id prompt (so no
prompt cache helps), greedy, with ignore_eos so that every request yields exactly
--max-tokens tokens. At concurrency c, c clients each send --requests-per-client
requests back to back (more, where the level would hold fewer than --min-requests).
Reported per server and concurrency: output tok/s (generated tokens over the wall time of
the level), time to first token p50/p99, and the generated tokens as each server counts
them (usage, or llama-server's timings); for a server with shardlm's engine counters in
/metrics, the seconds and tokens of its prefill and decode steps in each level.

    python3 bench/serve_load.py --server shardlm=http://127.0.0.1:8000 \\
        --server llama.cpp=http://127.0.0.1:8001 --concurrency 1,4,16,64
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse


def stream_completion(url, prompt, max_tokens, timeout):
    """(time to first token s, tokens, usage or None, total s) of one streamed completion."""
    parsed = urllib.parse.urlparse(url)
    body = json.dumps({"model": "bench", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    start = time.perf_counter()
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
    connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise RuntimeError(f"{url}: HTTP {response.status}: {response.read()[:500]!r}")
    first, usage, timings = None, None, None
    for raw in response:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        event = json.loads(data)
        usage = event.get("usage") or usage
        timings = event.get("timings") or timings
        if event.get("choices") and first is None:
            first = time.perf_counter() - start
    connection.close()
    # An event may carry several tokens, or none (text held back inside a UTF-8 sequence):
    # the count is the server's own.
    tokens = usage["completion_tokens"] if usage else timings["predicted_n"] if timings else None
    if tokens is None:
        raise RuntimeError(f"{url}: the stream reported neither usage nor timings")
    return first, tokens, usage, time.perf_counter() - start


def engine_counters(url):
    """shardlm's engine counters from /metrics (seconds and tokens in prefill and decode), or
    None for a server without them."""
    parsed = urllib.parse.urlparse(url)
    try:
        connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    except (OSError, http.client.HTTPException):
        return None
    counters = {}
    for line in text.splitlines():
        if line.startswith("shardlm_engine_"):
            name, value = line.split()
            counters[name[len("shardlm_engine_"):-len("_total")]] = float(value)
    return counters or None


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def run_level(url, concurrency, args, seed):
    rng = random.Random(seed)
    per_client = max(args.requests_per_client, -(-args.min_requests // concurrency))
    prompts = [[rng.randrange(1000, 100000) for _ in range(args.prompt_tokens)]
               for _ in range(concurrency * per_client)]
    results, errors = [], []
    lock = threading.Lock()

    def client(index):
        for r in range(per_client):
            try:
                result = stream_completion(url, prompts[index * per_client + r], args.max_tokens,
                                           args.timeout)
                with lock:
                    results.append(result)
            except Exception as error:  # reported below: a lost request fails the run
                with lock:
                    errors.append(repr(error))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    before = engine_counters(url)
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        sys.exit(f"{url} at concurrency {concurrency}: {len(errors)} requests failed, first: {errors[0]}")
    tokens = sum(r[1] for r in results)
    expected = len(prompts) * args.max_tokens
    if tokens != expected:
        sys.exit(f"{url} at concurrency {concurrency}: {tokens} tokens generated, {expected} expected")
    ttfts = [r[0] for r in results]
    level = {"tok_s": tokens / wall, "ttft_p50": percentile(ttfts, 50), "ttft_p99": percentile(ttfts, 99),
             "wall_s": wall, "tokens": tokens}
    after = engine_counters(url)
    if before and after:
        level["engine"] = {name: after[name] - before.get(name, 0) for name in after}
    return level


def prefix_reuse(url, args):
    """TTFT of a 1,000-token prompt cold, then of another sharing all but its last tokens."""
    rng = random.Random(99)
    prefix = [rng.randrange(1000, 100000) for _ in range(args.prefix_tokens)]
    cold = stream_completion(url, prefix + [11, 12, 13], 2, args.timeout)
    warm = stream_completion(url, prefix + [21, 22, 23, 24], 2, args.timeout)
    cached = ((warm[2] or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    return cold[0], warm[0], cached


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", action="append", required=True, help="NAME=URL (repeat; alternated)")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--requests-per-client", type=int, default=1)
    parser.add_argument("--min-requests", type=int, default=4,
                        help="at least this many requests a level (clients send more each): one request alone is "
                             "too short a sample on a noisy machine")
    parser.add_argument("--prefix-tokens", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", help="also write every figure here")
    args = parser.parse_args()
    servers = [s.split("=", 1) for s in args.server]
    figures = {"levels": [], "prefix": {}}
    for name, url in servers:  # warm-up: first requests pay page faults and lazy set-up
        stream_completion(url, list(range(1000, 1000 + args.prompt_tokens)), 4, args.timeout)
    names = [name for name, _ in servers]
    print("| time (UTC) | concurrency | " + " | ".join(f"{n} tok/s | {n} TTFT p50 / p99 (s)" for n in names) +
          " | " + " ÷ ".join(names[:2]) + " tok/s |")
    print("|---|---|" + "---|---|" * len(names) + "---|")
    for level, concurrency in enumerate(int(c) for c in args.concurrency.split(",")):
        row = {}
        # Alternate which server goes first, so a drift in the machine's speed splits evenly.
        order = servers if level % 2 == 0 else servers[::-1]
        for name, url in order:
            row[name] = run_level(url, concurrency, args, seed=concurrency)
        figures["levels"].append({"concurrency": concurrency, **row})
        cells = " | ".join(f"{row[n]['tok_s']:.1f} | {row[n]['ttft_p50']:.2f} / {row[n]['ttft_p99']:.2f}" for n in names)
        ratio = row[names[0]]["tok_s"] / row[names[1]]["tok_s"] if len(names) > 1 else 1.0
        print(f"| {time.strftime('%H:%M', time.gmtime())} | {concurrency} | {cells} | {ratio:.2f} |", flush=True)
    engine_rows = [(level["concurrency"], name, level[name]) for level in figures["levels"] for name in names
                   if "engine" in level[name]]
    if engine_rows:  # where a level's wall time went, by the server's own counters
        print()
        print("| concurrency | server | wall (s) | prefill steps (s) | prompt tokens fed | decode steps (s) | "
              "tokens decoded | steps |")
        print("|---|---|---|---|---|---|---|---|")
        for concurrency, name, level in engine_rows:
            e = level["engine"]
            print(f"| {concurrency} | {name} | {level['wall_s']:.1f} | {e['prefill_seconds']:.1f} | "
                  f"{e['prefill_tokens']:.0f} | {e['decode_seconds']:.1f} | {e['decode_tokens']:.0f} | {e['steps']:.0f} |")
    print()
    print(f"| server | {args.prefix_tokens}-token prompt TTFT cold (s) | sharing all but its end (s) | ratio | cached_tokens |")
    print("|---|---|---|---|---|")
    for name, url in servers:
        cold, warm, cached = prefix_reuse(url, args)
        figures["prefix"][name] = {"cold_s": cold, "warm_s": warm, "cached_tokens": cached}
        print(f"| {name} | {cold:.3f} | {warm:.3f} | {cold / warm:.1f} | {cached if cached is not None else 'not reported'} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
