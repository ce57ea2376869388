"""Reading and writing safetensors files with plain Python and torch (the `safetensors` package is
not a Debian package): the format of src/artel/nn/safetensors.h.

  8-byte little-endian header length N, N bytes of JSON
    {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
     "__metadata__": {"key": "value"}}
  then the data; offsets count from the first byte after the header.

  tensors, metadata = read_safetensors("runs/gpt/init.safetensors")
  write_safetensors("model.safetensors", tensors, {"format": "pt"})
"""
import json
import struct

import torch

_DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64,
           "BF16": torch.bfloat16}


def read_safetensors(path):
    """-> ({name: tensor}, {key: value}). Raises ValueError naming the file and the problem."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header of {n} bytes runs past the end of the file ({len(raw)} bytes)")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = bytearray(raw[8 + n:])                                  # writable, so frombuffer shares it quietly
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, e in header.items():
        if e["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {e['dtype']}, not one of {sorted(_DTYPES)}")
        dtype, shape = _DTYPES[e["dtype"]], list(e["shape"])
        begin, end = e["data_offsets"]
        numel = 1
        for d in shape:
            numel *= d
        itemsize = torch.tensor([], dtype=dtype).element_size()
        if end - begin != numel * itemsize or end > len(data):
            raise ValueError(f"{path}: tensor {name} {e['dtype']}{shape} does not fit data_offsets [{begin}, {end}]")
        t = torch.frombuffer(data, dtype=dtype, count=numel, offset=begin) if numel else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(shape).clone()
    return tensors, metadata



def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (contiguous, in name order) and string metadata."""
    names = {v: k for k, v in _DTYPES.items()}
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
