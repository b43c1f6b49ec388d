"""The Python module against independent references: llama2.c's run.c goldens of
stories260K, the float64 goldens of the fixtures, real tokenizers' goldens (Hugging Face
tokenizers), and the C++ CLI's own output for the same calls."""

import json
import os
import queue
import struct
import subprocess
import sys
import tarfile
import threading
import time

import numpy as np
import pytest

import shardlm

DATA = os.environ["SHARDLM_TEST_DATA_DIR"]
MODEL = os.environ["SHARDLM_MODEL_DIR"]  # the embedded model's directory
CLI = os.environ["SHARDLM_CLI"]


def run_c_golden(name):
    """(prompt text, prompt ids, generated ids) of llama2.c's run.c on stories260K."""
    prompt = json.load(open(os.path.join(DATA, "stories260K/prompts.json")))["prompts"][name]
    lines = open(os.path.join(DATA, f"stories260K/{name}.ids.txt")).read().splitlines()
    ids = {line.split(":")[0]: [int(i) for i in line.split(":")[1].split()] for line in lines if ":" in line}
    return prompt, ids["PROMPT_IDS"], ids["GEN_IDS"]


def read_safetensors(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    types = {"I64": np.int64, "F32": np.float32}
    return {
        name: np.frombuffer(data[t["data_offsets"][0] : t["data_offsets"][1]], types[t["dtype"]]).reshape(t["shape"])
        for name, t in header.items()
        if name != "__metadata__"
    }


@pytest.fixture(scope="module")
def tokenizer():
    return shardlm.AutoTokenizer.from_pretrained(MODEL)


@pytest.fixture(scope="module")
def model():
    return shardlm.AutoModelForCausalLM.from_pretrained(MODEL)


@pytest.mark.parametrize("name", ["once_upon_a_time", "the_little_dog"])
def test_stories260k_matches_llama2c(tokenizer, model, name):
    prompt, prompt_ids, generated = run_c_golden(name)
    inputs = tokenizer(prompt, return_tensors="np")
    assert inputs["input_ids"].dtype == np.int64
    assert inputs["input_ids"].tolist() == [prompt_ids]
    assert inputs["attention_mask"].tolist() == [[1] * len(prompt_ids)]
    output = model.generate(**inputs, max_new_tokens=40, do_sample=False)
    assert isinstance(output, np.ndarray) and output.shape == (1, len(prompt_ids) + 40)
    assert output[0, len(prompt_ids) :].tolist() == generated[:40]


def test_the_acceptance_one_liner_equals_the_cli(tokenizer):
    program = (
        "import shardlm; t = shardlm.AutoTokenizer.from_pretrained(D); "
        "m = shardlm.AutoModelForCausalLM.from_pretrained(D); "
        "print(t.decode(m.generate(**t('Once upon a time', return_tensors='np'), max_new_tokens=20)[0]))"
    ).replace("D", repr(MODEL))
    text = subprocess.run([sys.executable, "-c", program], check=True, capture_output=True, text=True).stdout
    cli_ids = subprocess.run(
        [CLI, "generate", "-m", MODEL, "-p", "Once upon a time", "-n", "20", "-o", "ids"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    prompt_ids = tokenizer("Once upon a time")["input_ids"]
    expected = tokenizer.decode(prompt_ids + [int(i) for i in cli_ids.split(",")])
    assert text.rstrip("\n") == expected


@pytest.mark.parametrize("fixture", ["qwen3-tiny", "glm4-tiny", "llama3-tiny"])
def test_fixture_greedy_ids_and_logits(fixture):
    directory = os.path.join(DATA, "fixtures", fixture)
    golden = read_safetensors(os.path.join(directory, "golden.safetensors"))
    model = shardlm.AutoModelForCausalLM.from_pretrained(directory)
    prompt = golden["input_ids"]
    output = model.generate(input_ids=prompt[None, :], max_new_tokens=len(golden["greedy_ids"]), do_sample=False)
    assert output[0, len(prompt) :].tolist() == golden["greedy_ids"].tolist()
    logits = model.logits(prompt)
    assert logits.shape == golden["logits"].shape
    assert np.max(np.abs(logits - golden["logits"])) <= 1e-4 * max(1.0, np.max(np.abs(golden["logits"])))


def test_tokenizer_matches_hugging_face_goldens(tmp_path):
    family = os.path.join(DATA, "tokenizers", "qwen3")
    with tarfile.open(os.path.join(family, "tokenizer.tar.xz")) as archive:
        archive.extractall(tmp_path)
    tokenizer = shardlm.AutoTokenizer.from_pretrained(str(tmp_path))
    corpus = [json.loads(line) for line in open(os.path.join(DATA, "tokenizers", "corpus.jsonl"))]
    goldens = json.load(open(os.path.join(family, "goldens.json")))["library"]
    assert len(goldens) == len(corpus)
    for text, golden in zip(corpus, goldens):
        assert tokenizer(text)["input_ids"] == golden["ids"], text
        assert tokenizer.encode(text, add_special_tokens=False) == golden["ids_plain"], text
        assert tokenizer.decode(golden["ids"]) == golden["decoded"], text
        assert tokenizer.decode(golden["ids"], skip_special_tokens=True) == golden["decoded_skip"], text


def test_tokenizer_equals_the_cli(tokenizer):
    texts = ["The little dog ran home, and then the cat sat.", "Once upon a time"]
    lines = "".join(json.dumps(text) + "\n" for text in texts)
    cli = subprocess.run([CLI, "tokenize", "-m", MODEL, "--add-special-tokens"], input=lines, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert [json.loads(line)["ids"] for line in cli] == tokenizer(texts)["input_ids"]


def test_batch_of_different_lengths_equals_each_prompt_alone(tokenizer, model):
    # stories260K has no pad token: the rows are padded on the left by hand, as
    # padding_side="left" would, with attention_mask 0 over the padding.
    prompts = ["Once upon a time", "Lily", "One day, a big cat"]
    rows = tokenizer(prompts)["input_ids"]
    longest = max(len(row) for row in rows)
    assert len({len(row) for row in rows}) == 3
    input_ids = np.array([[0] * (longest - len(row)) + row for row in rows], dtype=np.int64)
    attention_mask = np.array([[0] * (longest - len(row)) + [1] * len(row) for row in rows], dtype=np.int64)
    together = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=12, do_sample=False)
    assert together.shape == (3, longest + 12)
    for row, prompt in enumerate(prompts):
        alone = model.generate(**tokenizer(prompt, return_tensors="np"), max_new_tokens=12, do_sample=False)
        assert together[row, -12:].tolist() == alone[0, -12:].tolist()
    assert tokenizer.batch_decode(together)[0].endswith(tokenizer.decode(together[0, -12:]))


def test_streamer_yields_the_generated_text(tokenizer, model):
    inputs = tokenizer("Once upon a time", return_tensors="np")
    streamer = shardlm.TextIteratorStreamer(tokenizer, skip_prompt=True, timeout=60)
    result = {}
    worker = threading.Thread(
        target=lambda: result.update(ids=model.generate(**inputs, max_new_tokens=16, do_sample=False, streamer=streamer))
    )
    worker.start()
    pieces = list(streamer)
    worker.join()
    assert len(pieces) > 1
    generated = result["ids"][0, inputs["input_ids"].shape[1] :]
    assert "".join(pieces) == tokenizer.decode(generated)

    # The same streamer again, prompt first (skip_prompt=False), read in this thread after
    # generate has ended; then an empty queue times out as transformers' does.
    again = shardlm.TextIteratorStreamer(tokenizer, timeout=0.05)
    output = model.generate(**inputs, max_new_tokens=8, do_sample=False, streamer=again)
    assert "".join(again) == tokenizer.decode(output[0])
    model.generate(**inputs, max_new_tokens=4, do_sample=False, streamer=again)
    assert "".join(again) == tokenizer.decode(model.generate(**inputs, max_new_tokens=4, do_sample=False)[0])
    with pytest.raises(queue.Empty):
        next(again)


def test_generate_releases_the_gil(tokenizer):
    # One kernel thread, so a core is left for the counting thread: it can count while
    # generate runs only if generate let go of the GIL.
    model = shardlm.AutoModelForCausalLM.from_pretrained(MODEL, threads=1)
    inputs = tokenizer(["Once upon a time"] * 4)
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(time.perf_counter())
            done.wait(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    start = time.perf_counter()
    model.generate(**inputs, max_new_tokens=400, do_sample=False, max_cache_len=512, disable_compile=True)
    end = time.perf_counter()
    done.set()
    counter.join()
    during = [tick for tick in ticks if start < tick < end]
    assert end - start > 0.05
    assert len(during) >= 10, f"{len(during)} ticks in {end - start:.3f} s of generate"


def test_threads_sharing_a_model_each_get_their_own_result(tokenizer, model):
    names = ["once_upon_a_time", "the_little_dog"] * 2
    results = [None] * len(names)

    def work(index):
        prompt, prompt_ids, _ = run_c_golden(names[index])
        output = model.generate(**tokenizer(prompt, return_tensors="np"), max_new_tokens=30, do_sample=False)
        results[index] = output[0, len(prompt_ids) :].tolist()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(names))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [run_c_golden(name)[2][:30] for name in names]


def test_chat_template_and_sampling_arguments(tokenizer, model):
    inputs = tokenizer("Once upon a time", return_tensors="np")
    first = model.generate(**inputs, max_new_tokens=10, do_sample=True, temperature=0.8, top_p=0.9, seed=7)
    again = model.generate(**inputs, max_new_tokens=10, do_sample=True, temperature=0.8, top_p=0.9, seed=7)
    assert first.tolist() == again.tolist()
    with pytest.raises(TypeError, match="no_such_argument"):
        model.generate(**inputs, no_such_argument=1)
    with pytest.raises(shardlm.Error, match="chat_template"):
        tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)


def test_errors_are_shardlm_errors_with_the_runtimes_message(tokenizer, model, tmp_path):
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(shardlm.Error, match="no-such-model"):
        shardlm.AutoModelForCausalLM.from_pretrained(missing)
    with pytest.raises(shardlm.Error, match="no-such-model"):
        shardlm.AutoTokenizer.from_pretrained(missing)
    too_long = tokenizer(" ".join(["Once upon a time"] * 40), return_tensors="np")
    with pytest.raises(shardlm.Error, match="max_cache_len|cache"):
        model.generate(**too_long, max_new_tokens=10, max_cache_len=32)
    with pytest.raises(ValueError, match="padding"):
        tokenizer(["Once upon a time", "The dog"], return_tensors="np")
    assert issubclass(shardlm.Error, RuntimeError)


def test_accelerator_and_model_properties(model):
    assert isinstance(shardlm.accelerator.is_available(), bool)
    assert shardlm.accelerator.device_count() >= 0
    assert model.architecture == "LlamaForCausalLM"
    assert model.device == "cpu"
    assert model.tp_size == 1 and model.weight_bytes > 0
    assert set(model.last_stats) >= {"decode_tokens_per_s", "compiles"}
