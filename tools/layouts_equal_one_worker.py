"""Trains the same run under every dp x tp x pp layout and reports how far each
layout's final weights are from one worker's (the equivalence table of
docs/ARCHITECTURE.md). Each layout sees the same global batch in the same
(sequential) order from the same seed, so the differences are float rounding.

  /usr/bin/python3 tools/layouts_equal_one_worker.py [--artel build/artel] [--steps 5]

Prints one line per run: model, layout, --zero, max |weight difference| and
the tensor where it is largest; exits 1 if any exceeds --tolerance.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch"))
from safetensors_io import read_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The bundled tinyshakespeare (vocabulary 65, padded under --tp); 4 blocks and
# 4 heads, so pp 4 and tp 4 both divide.
GPT = ("--model gpt --data {root}/data/tinyshakespeare.txt --n-layer 4 --n-head 4 --n-embd 32 --block-size 32 "
       "--generate 0 --eval-batches 1 --grad-clip 1.0")
SMALL = "--model {model} --eval-batches 1"
COMMON = "--data-order sequential --seed 5 --threads 1 --timeout 120 --steps {steps}"

# (model, layout flags, workers, data-parallel degree)
GPT_LAYOUTS = [("--tp 2", 2, 1), ("--tp 4", 4, 1), ("--pp 2", 2, 1), ("--pp 4", 4, 1), ("--tp 2 --pp 2", 4, 1),
               ("--pp 2", 4, 2), ("--tp 2", 4, 2), ("--pp 2 --schedule interleaved --chunks 2", 2, 1),
               ("--pp 2 --schedule interleaved --chunks 2", 4, 2), ("--tp 2 --sequence-parallel", 2, 1),
               ("--tp 4 --sequence-parallel", 4, 1), ("--tp 2 --pp 2 --sequence-parallel", 4, 1),
               ("--tp 2 --sequence-parallel", 4, 2)]
SMALL_LAYOUTS = [("mlp", "--pp 2", 2), ("cnn", "--pp 2", 2), ("cnn", "--pp 2 --schedule interleaved --chunks 2", 2),
                 ("mlp", "--tp 2 --sequence-parallel", 2)]


def train(artel, flags, out):
    cmd = [artel, "train"] + flags.split() + ["--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return read_safetensors(os.path.join(out, "final.safetensors"))[0]


def max_difference(ref, got):
    if set(ref) != set(got):
        return float("inf"), f"tensors differ: {sorted(set(ref) ^ set(got))}"
    worst, where = 0.0, ""
    for name, t in ref.items():
        if t.shape != got[name].shape:
            return float("inf"), f"{name}: shape {list(got[name].shape)}, one worker {list(t.shape)}"
        d = (t - got[name]).abs().max().item() if t.numel() else 0.0
        if d >= worst:
            worst, where = d, name
    return worst, where


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artel", default=os.path.join(ROOT, "build", "artel"))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=8, help="global batch (rows)")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    common = COMMON.format(steps=args.steps)
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="artel-layouts-") as tmp:
        def report(model, layout, zero, ref, got):
            nonlocal worst
            d, where = max_difference(ref, got)
            worst = max(worst, d)
            print(f"{model:4s} {layout:50s} --zero {zero}  max |weight difference| {d:.3g}  ({where})", flush=True)

        gpt = GPT.format(root=ROOT) + " " + common
        one = train(args.artel, f"{gpt} --batch-size {args.batch_size}", os.path.join(tmp, "gpt-one"))
        for layout, n, dp in GPT_LAYOUTS:
            for zero in (0, 1):
                name = f"dp {dp} x {layout.replace('--', '').strip()}" if dp > 1 else layout.replace("--", "")
                flags = (f"{gpt} --batch-size {args.batch_size // dp} --nproc {n} {layout} --micro-batches 2 "
                         f"--zero {zero}")
                report("gpt", name, zero, one, train(args.artel, flags, os.path.join(tmp, f"gpt-{n}-{dp}-{zero}-{len(layout)}")))
        for model, layout, n in SMALL_LAYOUTS:
            small = SMALL.format(model=model) + " " + common + " --batch-size 16"
            ref = train(args.artel, small, os.path.join(tmp, f"{model}-one"))
            got = train(args.artel, f"{small} --nproc {n} {layout} --micro-batches 2", os.path.join(tmp, f"{model}-pp-{len(layout)}"))
            report(model, layout.replace("--", ""), 1, ref, got)
    print(f"largest: {worst:.3g} (tolerance {args.tolerance:g})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
