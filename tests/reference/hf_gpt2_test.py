#!/usr/bin/python3
"""The Hugging Face GPT-2 test: a GPT-2 in Hugging Face's layout (transformers'
GPT2Model names and Conv1D [in, out] weights, with the causal-mask buffers
older files carry) loads into artel, whose logits equal those of a GPT-2
computed here the way transformers computes it, straight over those tensors
(Conv1D: x @ W + b, GELU's tanh approximation "gelu_new"), with --gelu tanh;
with the exact GELU (nanoGPT's, artel's default) they equal the same forward
with the exact GELU, what nanoGPT's from_pretrained computes. And artel's
export of what it loaded is bit-identical to the file.

  /usr/bin/python3 tests/reference/hf_gpt2_test.py build/tests/hf_gpt2_dump

Prints the largest relative logit difference per case; exits 1 on a mismatch,
2 when it cannot run (no torch, no artel program).
"""
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "torch"))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("hf_gpt2_test: no torch (hint: apt-get install python3-torch)", file=sys.stderr)
    sys.exit(2)

from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

TOLERANCE = 1e-5  # relative to the logits' scale, float32 on both sides


def random_hf_gpt2(L, H, C, V, T, prefix, seed):
    """Hugging Face's tensors of a GPT-2: Conv1D weights [in, out], masks as buffers."""
    g = torch.Generator().manual_seed(seed)
    w = lambda *s: torch.randn(*s, generator=g) * 0.1  # noqa: E731
    t = {prefix + "wte.weight": w(V, C), prefix + "wpe.weight": w(T, C),
         prefix + "ln_f.weight": 1 + w(C), prefix + "ln_f.bias": w(C)}
    for i in range(L):
        p = f"{prefix}h.{i}."
        t.update({p + "ln_1.weight": 1 + w(C), p + "ln_1.bias": w(C), p + "ln_2.weight": 1 + w(C), p + "ln_2.bias": w(C),
                  p + "attn.c_attn.weight": w(C, 3 * C), p + "attn.c_attn.bias": w(3 * C),
                  p + "attn.c_proj.weight": w(C, C), p + "attn.c_proj.bias": w(C),
                  p + "mlp.c_fc.weight": w(C, 4 * C), p + "mlp.c_fc.bias": w(4 * C),
                  p + "mlp.c_proj.weight": w(4 * C, C), p + "mlp.c_proj.bias": w(C),
                  p + "attn.bias": torch.tril(torch.ones(T, T)).view(1, 1, T, T)})
    return t


def hf_logits(t, ids, L, H, prefix, gelu):
    """GPT-2's forward over Hugging Face's tensors; gelu "none" (erf) or "tanh" (transformers')."""
    conv1d = lambda x, name: x @ t[name + ".weight"] + t[name + ".bias"]  # noqa: E731
    B, T = ids.shape
    C = t[prefix + "wte.weight"].shape[1]
    x = t[prefix + "wte.weight"][ids] + t[prefix + "wpe.weight"][:T]
    for i in range(L):
        p = f"{prefix}h.{i}."
        h = F.layer_norm(x, (C,), t[p + "ln_1.weight"], t[p + "ln_1.bias"], eps=1e-5)
        q, k, v = conv1d(h, p + "attn.c_attn").split(C, dim=2)
        q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(t[p + "attn.bias"][:, :, :T, :T] == 0, float("-inf")).softmax(-1)
        x = x + conv1d((att @ v).transpose(1, 2).reshape(B, T, C), p + "attn.c_proj")
        h = F.layer_norm(x, (C,), t[p + "ln_2.weight"], t[p + "ln_2.bias"], eps=1e-5)
        x = x + conv1d(F.gelu(conv1d(h, p + "mlp.c_fc"), approximate=gelu), p + "mlp.c_proj")
    x = F.layer_norm(x, (C,), t[prefix + "ln_f.weight"], t[prefix + "ln_f.bias"], eps=1e-5)
    return x @ t[prefix + "wte.weight"].T  # the head tied to wte


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        print("usage: hf_gpt2_test.py HF_GPT2_DUMP (an executable)", file=sys.stderr)
        sys.exit(2)
    failures = 0
    cases = [("GPT2Model names", 2, 4, 64, 100, 32, "", 1), ("GPT2LMHeadModel names", 1, 2, 32, 50, 16, "transformer.", 2)]
    with tempfile.TemporaryDirectory(prefix="artel-hf-gpt2-") as d:
        for name, L, H, C, V, T, prefix, seed in cases:
            t = random_hf_gpt2(L, H, C, V, T, prefix, seed)
            ids = torch.randint(0, V, (3, T - 5), generator=torch.Generator().manual_seed(seed))
            model, inp, out, back = (os.path.join(d, f) for f in ("model", "ids", "logits", "back"))
            write_safetensors(model, t, {"format": "pt"})
            for gelu, approximate in [("tanh", "tanh"), ("exact", "none")]:
                write_safetensors(inp, {"ids": ids}, {"n_layer": str(L), "n_head": str(H), "n_embd": str(C),
                                                     "block_size": str(T), "vocab_size": str(V), "gelu": gelu})
                run = subprocess.run([sys.argv[1], model, inp, out, back], capture_output=True, text=True)
                if run.returncode != 0:
                    print(f"{name}: artel failed: {run.stderr.strip()}")
                    failures += 1
                    continue
                artel = read_safetensors(out)[0]["logits"].double()
                ref = hf_logits(t, ids, L, H, prefix, approximate).double()
                err = (artel - ref).abs().max().item() / ref.abs().max().item()
                exported = read_safetensors(back)[0]
                kept = {k[len(prefix):]: v for k, v in t.items() if not k.endswith(".attn.bias")}
                same = exported.keys() == kept.keys() and all(torch.equal(exported[k], kept[k]) for k in kept)
                what = "transformers' GPT-2 (tanh GELU)" if gelu == "tanh" else "the same with the exact GELU"
                print(f"{name} (L {L} H {H} C {C} V {V}, ids {tuple(ids.shape)}), --gelu {gelu}: logits against "
                      f"{what}: relative difference {err:.2e}; export of what artel loaded "
                      f"{'bit-identical' if same else 'DIFFERS'} ({len(kept)} tensors)")
                failures += (not err <= TOLERANCE) + (not same)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
