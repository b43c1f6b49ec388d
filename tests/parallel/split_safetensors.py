#!/usr/bin/env python3
"""Split DIR/model.safetensors into two shards with a model.safetensors.index.json, as
transformers' save_pretrained writes a sharded checkpoint (standard library only).
Usage: split_safetensors.py SOURCE_DIR OUT_DIR"""
import json
import os
import shutil
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        data = f.read()
    metadata = header.pop("__metadata__", None)
    return header, data, metadata


def write(path, tensors, data, metadata):
    header, parts, offset = {}, [], 0
    for name, info in tensors:
        begin, end = info["data_offsets"]
        header[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [offset, offset + end - begin]}
        parts.append(data[begin:end])
        offset += end - begin
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(parts))


def main(source, out):
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(source):
        if name != "model.safetensors":
            shutil.copy(os.path.join(source, name), out)
    header, data, metadata = read(os.path.join(source, "model.safetensors"))
    tensors = sorted(header.items())
    half = len(tensors) // 2
    shards = {"model-00001-of-00002.safetensors": tensors[:half], "model-00002-of-00002.safetensors": tensors[half:]}
    weight_map = {}
    for shard, part in shards.items():
        write(os.path.join(out, shard), part, data, metadata)
        weight_map.update({name: shard for name, _ in part})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": len(data)}, "weight_map": weight_map}, f, indent=2)


if __name__ == "__main__":
    main(*sys.argv[1:3])
