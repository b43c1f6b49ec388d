"""`shardlm serve` through the official openai client and plain HTTP on 127.0.0.1.

The model is random-weight and Qwen3-shaped with the real Qwen3 tokenizer and chat
template (run_api_tests.sh makes it), so greedy text is arbitrary but exact: every check
compares two independent ways of getting the same tokens."""

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import openai
import pytest

SHARDLM = os.environ["SHARDLM_BIN"]
MODEL = os.environ["SHARDLM_SERVE_MODEL"]


class Server:
    def __init__(self, *flags, launch=(), timeout=600):
        self.process = subprocess.Popen([*launch, SHARDLM, "serve", "--model", MODEL, "--served-model-name", "tiny",
                                         "--port", "0", *flags],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.match(r"listening on port (\d+)", line)
        assert match, f"no port: {line!r} {self.process.stderr.read()}"
        self.port = int(match.group(1))
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="none", max_retries=0,
                                    timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        connection.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        payload = response.read().decode()
        connection.close()
        return response.status, dict(response.getheaders()), payload

    def metrics(self):
        _, _, text = self.request("GET", "/metrics")
        return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\S+) (\S+)$", text, re.M)}

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def server():
    s = Server("--max-num-seqs", "8", "--max-model-len", "2048", "--max-waiting", "128")
    yield s
    assert s.stop() == 0


def generate_ids(prompt_ids, max_new_tokens):
    out = subprocess.run([SHARDLM, "generate", "--model", MODEL, "--input-ids", ",".join(map(str, prompt_ids)),
                          "--max-new-tokens", str(max_new_tokens), "--greedy", "--output", "json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_models_health_and_unknown_model(server):
    assert [m.id for m in server.client.models.list().data] == ["tiny"]
    assert server.request("GET", "/health")[0] == 200
    with pytest.raises(openai.NotFoundError):
        server.client.completions.create(model="other", prompt="x", max_tokens=2)


def test_greedy_completion_equals_shardlm_generate(server):
    ids = [785, 6722, 315, 9625, 374]
    expected = generate_ids(ids, 12)
    got = server.client.completions.create(model="tiny", prompt=ids, max_tokens=12, temperature=0)
    assert got.choices[0].text == expected["text"]
    assert got.usage.prompt_tokens == len(ids)
    assert got.usage.completion_tokens == len(expected["generated_ids"])
    assert got.usage.total_tokens == len(ids) + len(expected["generated_ids"])
    streamed = server.client.completions.create(model="tiny", prompt=ids, max_tokens=12, temperature=0, stream=True,
                                                stream_options={"include_usage": True})
    chunks = list(streamed)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == expected["text"]
    assert chunks[-1].usage.completion_tokens == got.usage.completion_tokens


def test_chat_renders_the_template_as_transformers_does(server):
    goldens = json.load(open(os.environ["SHARDLM_CHAT_GOLDENS"]))["chats"]
    cases = [c for c in goldens if c["template"] == "qwen3" and c["add_generation_prompt"] and not c["tools"]
             and not c["documents"] and c["name"].split("/")[1] in ("system_user", "multi_turn")]
    assert cases
    for case in cases:
        kwargs = case["extra_variables"] or None
        chat = server.client.chat.completions.create(model="tiny", messages=case["messages"], max_tokens=8,
                                                     temperature=0, extra_body={"chat_template_kwargs": kwargs} if kwargs else None)
        # The golden rendering (transformers), sent as a plain prompt: the same tokens follow.
        plain = server.request("POST", "/v1/completions", {"prompt": case["expected"], "max_tokens": 8,
                                                           "temperature": 0})
        assert plain[0] == 200, plain
        assert chat.choices[0].message.content == json.loads(plain[2])["choices"][0]["text"], case["name"]
        assert chat.usage.prompt_tokens == json.loads(plain[2])["usage"]["prompt_tokens"]
        stream = server.client.chat.completions.create(model="tiny", messages=case["messages"], max_tokens=8,
                                                       temperature=0, stream=True,
                                                       extra_body={"chat_template_kwargs": kwargs} if kwargs else None)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == chat.choices[0].message.content


def test_logprobs_of_decoding_equal_the_prompts_scored_by_prefill(server):
    ids = [40, 1079, 264, 1273, 13, 576]
    got = server.client.completions.create(model="tiny", prompt=ids, max_tokens=4, temperature=0, logprobs=3)
    lp = got.choices[0].logprobs
    assert len(lp.token_logprobs) == 4
    for token_logprob, top in zip(lp.token_logprobs, lp.top_logprobs):
        assert abs(max(top.values()) - token_logprob) < 1e-5  # greedy takes the best
        assert sum(2.718281828 ** v for v in top.values()) <= 1.0 + 1e-5
    # The generated tokens appended to the prompt, scored by echo: the same log-softmax values.
    tokens = generate_ids(ids, 4)["generated_ids"]
    echoed = server.client.completions.create(model="tiny", prompt=ids + tokens, max_tokens=1, temperature=0,
                                              logprobs=0, echo=True)
    scored = echoed.choices[0].logprobs.token_logprobs
    assert scored[0] is None
    for k in range(4):
        assert abs(scored[len(ids) + k] - lp.token_logprobs[k]) < 2e-3, (k, scored, lp.token_logprobs)
    chat = server.client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=3, temperature=0, logprobs=True, top_logprobs=2)
    content = chat.choices[0].logprobs.content
    assert len(content) == 3 and all(len(c.top_logprobs) == 2 for c in content)


def test_stop_strings_are_cut_and_n_with_a_seed_repeats(server):
    ids = [785, 6722, 315, 9625, 374]
    full = server.client.completions.create(model="tiny", prompt=ids, max_tokens=16, temperature=0,
                                            extra_body={"ignore_eos": True}).choices[0].text
    stop = full[len(full) // 2:len(full) // 2 + 2]
    cut = full[:full.index(stop)]
    for stream in (False, True):
        got = server.client.completions.create(model="tiny", prompt=ids, max_tokens=16, temperature=0, stop=[stop],
                                               extra_body={"ignore_eos": True}, stream=stream)
        text = "".join(c.choices[0].text for c in got if c.choices) if stream else got.choices[0].text
        assert text == cut
    first = server.client.completions.create(model="tiny", prompt="Once", max_tokens=6, temperature=0.9, n=3, seed=5)
    again = server.client.completions.create(model="tiny", prompt="Once", max_tokens=6, temperature=0.9, n=3, seed=5)
    assert [c.index for c in first.choices] == [0, 1, 2]
    assert [c.text for c in first.choices] == [c.text for c in again.choices]
    assert 3 <= first.usage.completion_tokens <= 18
    assert first.usage.completion_tokens == again.usage.completion_tokens


def test_bad_input_gets_the_right_status_and_names_the_field(server):
    cases = [
        ("/v1/completions", "{broken", 400, None),
        ("/v1/completions", {"prompt": "x", "max_tokens": "ten"}, 400, "max_tokens"),
        ("/v1/completions", {"prompt": "x", "max_tokens": -5}, 400, "max_tokens"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 5000}, 400, "max_tokens"),
        ("/v1/completions", {"prompt": "x", "temperature": "hot"}, 400, "temperature"),
        ("/v1/completions", {"prompt": [10 ** 9]}, 400, "prompt"),
        ("/v1/completions", {"prompt": "x", "n": 10 ** 6}, 400, "n"),
        ("/v1/chat/completions", {"messages": "hi"}, 400, "messages"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "model": "gpt-9"}, 404, "model"),
        ("/v1/nothing", {}, 404, None),
    ]
    for path, body, status, param in cases:
        got_status, _, text = server.request("POST", path, body)
        error = json.loads(text)["error"]
        assert got_status == status, (body, text)
        assert error["message"] and error["param"] == param, (body, text)
    big = json.dumps({"prompt": "a" * (9 << 20)})
    assert server.request("POST", "/v1/completions", big)[0] == 413
    assert server.request("POST", "/v1/completions", "[" * 100000)[0] == 400
    with pytest.raises(openai.BadRequestError):
        server.client.completions.create(model="tiny", prompt="x" * 10, max_tokens=100000)


def wait_until_idle(server, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = server.metrics()
        if m["shardlm_num_requests_running"] == 0 and m["shardlm_num_requests_waiting"] == 0:
            return m
        time.sleep(0.05)
    raise AssertionError(f"still busy: {server.metrics()}")


def test_a_client_that_disconnects_frees_its_slot(server):
    body = json.dumps({"prompt": [1, 2, 3], "max_tokens": 2000 - 3, "ignore_eos": True, "stream": True})
    # The gauge is read by another request, which a loaded machine (tests in parallel) may
    # answer only after this one has generated all its tokens: then it proves nothing, and
    # runs again.
    for _ in range(5):
        wait_until_idle(server)
        sock = socket.create_connection(("127.0.0.1", server.port))
        try:
            sock.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
            received = b""
            while b"data:" not in received:
                received += sock.recv(4096)
            running = server.metrics()["shardlm_num_requests_running"]
        finally:
            sock.close()
        wait_until_idle(server)
        if running == 1:
            return
    pytest.fail("the request was never seen running while its client was connected")


def test_prefix_cache_reuses_a_shared_1000_token_prefix(server):
    prefix = [(i * 7919) % 150000 + 10 for i in range(1000)]

    def first_token_time(ids):
        start = time.perf_counter()
        stream = server.client.completions.create(model="tiny", prompt=ids, max_tokens=2, temperature=0, stream=True,
                                                  stream_options={"include_usage": True})
        chunks = iter(stream)
        next(chunks)
        ttft = time.perf_counter() - start
        usage = [c.usage for c in chunks if c.usage][0]
        return ttft, usage.prompt_tokens_details.cached_tokens

    cold, _ = first_token_time(prefix + [11, 12, 13])
    warm, cached = first_token_time(prefix + [21, 22, 23, 24])
    assert cached >= 992
    print(f"time to first token: {cold * 1e3:.1f} ms cold, {warm * 1e3:.1f} ms with {cached} cached tokens")
    # On this tiny model the client and HTTP take most of a warm request's time; the 5x of
    # the issue is for a model whose prefill dominates (docs/SERVING.md).
    assert warm < cold, (cold, warm)


def test_64_concurrent_streams_each_equal_their_solo_run(server):
    requests = [{"prompt": [(r * 31 + t * 17) % 150000 + 5 for t in range(3 + (r * 37) % 300)],
                 "max_tokens": 4 + (r * 13) % 40, "temperature": 0, "ignore_eos": True} for r in range(64)]
    solo = [json.loads(server.request("POST", "/v1/completions", r)[2])["choices"][0]["text"] for r in requests]
    before = wait_until_idle(server)
    results = [None] * 64

    def run(i):
        r = requests[i]
        stream = server.client.completions.create(model="tiny", stream=True, prompt=r["prompt"],
                                                  max_tokens=r["max_tokens"], temperature=0,
                                                  extra_body={"ignore_eos": True})
        results[i] = "".join(c.choices[0].text for c in stream if c.choices)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == solo
    after = wait_until_idle(server)
    assert after['shardlm_requests_total{status="200"}'] - before['shardlm_requests_total{status="200"}'] == 64
    assert after["shardlm_generation_tokens_total"] - before["shardlm_generation_tokens_total"] == \
        sum(r["max_tokens"] for r in requests)
    assert after["shardlm_compiles_total"] == before["shardlm_compiles_total"]
    # The engine's own counters: every prompt token prefilled or found in a slot's cache,
    # every token after the first decoded once (the first comes from the prefill's logits).
    delta = {name: after[name] - before[name] for name in after if name.startswith("shardlm_")}
    assert delta["shardlm_engine_prefill_tokens_total"] + delta["shardlm_prefix_cache_hit_tokens_total"] == \
        sum(len(r["prompt"]) for r in requests)
    assert delta["shardlm_engine_decode_tokens_total"] == sum(r["max_tokens"] - 1 for r in requests)
    assert delta["shardlm_engine_prefill_seconds_total"] > 0 and delta["shardlm_engine_decode_seconds_total"] > 0


def test_a_full_queue_answers_503_with_retry_after():
    s = Server("--max-num-seqs", "1", "--max-waiting", "0", "--max-model-len", "2048")
    try:
        long = threading.Thread(target=s.request, args=("POST", "/v1/completions",
                                                        {"prompt": [1, 2], "max_tokens": 1500, "ignore_eos": True}))
        long.start()
        deadline = time.time() + 10
        while s.metrics()["shardlm_num_requests_running"] < 1 and time.time() < deadline:
            time.sleep(0.02)
        status, headers, text = s.request("POST", "/v1/completions", {"prompt": [1], "max_tokens": 2})
        assert status == 503 and "Retry-After" in headers, text
        long.join()
    finally:
        assert s.stop() == 0


def test_sigterm_lets_running_requests_finish_then_exits():
    s = Server("--max-num-seqs", "2")
    result = {}
    worker = threading.Thread(target=lambda: result.update(
        response=s.request("POST", "/v1/completions", {"prompt": [1, 2], "max_tokens": 400, "ignore_eos": True})))
    worker.start()
    deadline = time.time() + 10
    while s.metrics()["shardlm_num_requests_running"] < 1 and time.time() < deadline:
        time.sleep(0.02)
    s.process.send_signal(signal.SIGTERM)
    worker.join(timeout=60)
    assert s.process.wait(timeout=60) == 0
    status, _, text = result["response"]
    assert status == 200 and json.loads(text)["usage"]["completion_tokens"] == 400


# Tensor parallelism: `shardlm launch` starts two ranks over Open MPI; rank 0 serves and
# plans every step, rank 1 follows.
TP_LAUNCH = (SHARDLM, "launch", "--nproc-per-node", "2", "--")


def ranks_of(launcher_pid):
    """The pids of a launcher's MPI ranks (its descendants), by OMPI_COMM_WORLD_RANK."""
    parents, environs = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
            environs[int(entry)] = open(f"/proc/{entry}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])

    def descends(pid):
        while pid in parents and pid > 1:
            pid = parents[pid]
            if pid == launcher_pid:
                return True
        return False

    return {int(v.split(b"=")[1]): pid for pid, environ in environs.items() if descends(pid)
            for v in environ if v.startswith(b"OMPI_COMM_WORLD_RANK=")}


def alive(pid):
    try:
        os.kill(pid, 0)
        return not open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, FileNotFoundError):
        return False


@contextlib.contextmanager
def tp_server(*flags):
    """A two-rank server; a failing test still leaves no rank behind to hold a core."""
    s = Server("--tp-size", "2", *flags, launch=TP_LAUNCH, timeout=120)
    ranks = ranks_of(s.process.pid)
    try:
        yield s, ranks
    finally:
        for pid in ranks.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        s.process.wait(timeout=60)


def test_tensor_parallel_server_equals_tp1_and_stops_cleanly():
    with tp_server("--max-num-seqs", "4", "--max-model-len", "1024") as (s, ranks):
        check_tensor_parallel_server(s, ranks)


def check_tensor_parallel_server(s, ranks):
    assert sorted(ranks) == [0, 1], ranks
    prompts = [[785, 6722, 315, 9625, 374], [(t * 7) % 150000 + 3 for t in range(70)], [11, 12], [400] * 33]
    expected = [generate_ids(p, 10 + i) for i, p in enumerate(prompts)]
    results = [None] * len(prompts)

    def run(i):
        got = s.client.completions.create(model="tiny", prompt=prompts[i], max_tokens=10 + i, temperature=0)
        results[i] = got.choices[0].text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [e["text"] for e in expected]
    streamed = s.client.completions.create(model="tiny", prompt=prompts[0], max_tokens=10, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == expected[0]["text"]
    assert s.stop() == 0
    assert not any(alive(pid) for pid in ranks.values())


def test_tensor_parallel_server_ends_when_a_rank_is_killed():
    with tp_server("--max-num-seqs", "2", "--max-model-len", "2048") as (s, ranks):
        check_job_ends_when_a_rank_is_killed(s, ranks)


def check_job_ends_when_a_rank_is_killed(s, ranks):
    outcome = {}

    def long_request():
        try:
            outcome["response"] = s.request("POST", "/v1/completions",
                                            {"prompt": [1, 2], "max_tokens": 1500, "ignore_eos": True})
        except (OSError, http.client.HTTPException) as error:
            outcome["error"] = error

    worker = threading.Thread(target=long_request, daemon=True)
    worker.start()
    deadline = time.time() + 10
    while s.metrics()["shardlm_num_requests_running"] < 1 and time.time() < deadline:
        time.sleep(0.02)
    start = time.time()
    os.kill(ranks[1], signal.SIGKILL)
    status = s.process.wait(timeout=30)
    took = time.time() - start
    stderr = s.process.stderr.read()
    print(f"the job ended {took:.1f} s after rank 1 was killed, status {status}")
    assert status != 0
    assert "rank 1" in stderr, stderr[-2000:]
    worker.join(timeout=10)
    assert "error" in outcome, outcome  # the client sees its connection drop, not a reply
    # mpirun may exit while a rank it killed is still being torn down: allow it a moment.
    deadline = time.time() + 5
    while any(alive(pid) for pid in ranks.values()) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in ranks.values()), [pid for pid in ranks.values() if alive(pid)]
