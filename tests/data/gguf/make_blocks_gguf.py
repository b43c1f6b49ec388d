#!/usr/bin/env python3
"""Writes blocks.gguf, the GGUF reader's golden file, with Python's gguf package (the
writer and block decoders llama.cpp maintains, independent of shardlm's):
- one tensor per weight type shardlm reads (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q5_0), of
  random block bytes (every bit pattern of a quantized block is valid, so random bytes
  reach every scale and code; only the float16 scales are drawn finite), each followed
  by "<name>.expected": the same values dequantized by gguf.quants, as F32;
- metadata of every GGUF value type, arrays among them.
Run by hand; the output is committed. Pinned: gguf==0.19.0 numpy==2.4.6.
    python3 tests/data/gguf/make_blocks_gguf.py tests/data/gguf/blocks.gguf
"""
import sys

import gguf
import numpy as np

T = gguf.GGMLQuantizationType
# Byte offsets of the float16 scales inside one block, per type.
SCALE_OFFSETS = {T.Q8_0: [0], T.Q4_0: [0], T.Q5_0: [0], T.Q4_K: [0, 2], T.Q6_K: [208]}


def random_blocks(qtype, rows, columns, rng):
    block_elements, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(rows * columns // block_elements, block_bytes), dtype=np.uint8)
    for offset in SCALE_OFFSETS[qtype]:
        scales = (rng.standard_normal(blocks.shape[0]) * 0.05).astype(np.float16)
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, -1)


def main(path):
    rng = np.random.default_rng(20261206)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_string("general.name", "shardlm block golden")
    writer.add_uint32("test.uint32", 4000000000)
    writer.add_int32("test.int32", -7)
    writer.add_float32("test.float32", 0.5)
    writer.add_bool("test.bool", True)
    writer.add_uint64("test.uint64", 1 << 40)
    writer.add_int64("test.int64", -(1 << 40))
    writer.add_float64("test.float64", 0.25)
    writer.add_uint8("test.uint8", 200)
    writer.add_int8("test.int8", -100)
    writer.add_uint16("test.uint16", 60000)
    writer.add_int16("test.int16", -30000)
    writer.add_array("test.strings", ["a", "bc", "", "\u00e9t\u00e9"])
    writer.add_array("test.int32s", [1, -2, 3])
    writer.add_array("test.float32s", [0.5, -1.5])

    rows = 3
    floats = rng.standard_normal((rows, 64)).astype(np.float32)
    writer.add_tensor("f32", floats)
    writer.add_tensor("f16", floats.astype(np.float16))
    writer.add_tensor("f16.expected", floats.astype(np.float16).astype(np.float32))
    bf16 = (floats.view(np.uint32) >> 16).astype(np.uint16)  # truncated: exact in bfloat16
    writer.add_tensor("bf16", bf16.view(np.uint8).reshape(rows, -1), raw_dtype=T.BF16)
    writer.add_tensor("bf16.expected", (bf16.astype(np.uint32) << 16).view(np.float32))
    for qtype, columns in [(T.Q8_0, 64), (T.Q4_0, 64), (T.Q4_K, 512), (T.Q6_K, 512), (T.Q5_0, 64)]:
        name = qtype.name.lower()
        blocks = random_blocks(qtype, rows, columns, rng)
        writer.add_tensor(name, blocks, raw_dtype=qtype)
        expected = gguf.quants.dequantize(blocks, qtype).astype(np.float32)
        writer.add_tensor(name + ".expected", expected.reshape(rows, columns))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main(sys.argv[1])
