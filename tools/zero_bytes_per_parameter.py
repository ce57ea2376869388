"""Trains one GPT of about 50 M parameters on 4 workers at --zero 0, 1, 2 and 3
and compares each worker's memory report (metrics.jsonl's last line) with the
ZeRO paper's terms for fp32 weights, gradients and AdamW state, with
Ψ = parameters and N = 4 workers:

  stage 0: 16Ψ        stage 1: 8Ψ + 8Ψ/N
  stage 2: 4Ψ + 12Ψ/N stage 3: 16Ψ/N, plus the working set of the units gathered

  /usr/bin/python3 tools/zero_bytes_per_parameter.py [--artel build/artel] [--steps 2]

Prints a line per stage: the largest worker's bytes per parameter for
weights + gradients + optimizer state, the paper's, and their ratio; exits 1
when one is off by more than --tolerance (10%).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 4
GPT = ("--model gpt --data {root}/data/tinyshakespeare.txt --n-layer 8 --n-head 12 --n-embd 720 --block-size 64 "
       "--batch-size 1 --generate 0 --eval-batches 1 --threads 1 --timeout 600 --steps {steps} --nproc 4")


def paper(stage, psi, gathered):
    """Bytes of the ZeRO paper's terms; stage 3 plus the worker's gathered working set."""
    return {0: 16 * psi, 1: 8 * psi + 8 * psi / N, 2: 4 * psi + 12 * psi / N, 3: 16 * psi / N + gathered}[stage]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--artel", default=os.path.join(ROOT, "build", "artel"))
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--tolerance", type=float, default=0.10)
    args = ap.parse_args()
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for stage in range(4):
            out = os.path.join(tmp, f"zero{stage}")
            cmd = [args.artel, "train"] + GPT.format(root=ROOT, steps=args.steps).split() + [
                "--zero", str(stage), "--out", out]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
            psi = int(r.stdout.split(" parameters")[0].split(",", 1)[1].replace(",", "").split()[-1])
            with open(os.path.join(out, "metrics.jsonl")) as f:
                memory = json.loads(f.read().splitlines()[-1])["memory"]
            w = max(memory, key=lambda m: m["parameters"] + m["gradients"] + m["optimizer_state"])
            held = w["parameters"] + w["gradients"] + w["optimizer_state"]
            expected = paper(stage, psi, w["gathered"])
            ratio = held / expected
            worst = max(worst, abs(ratio - 1))
            print(f"zero {stage}: {held / psi:6.2f} bytes/parameter (weights {w['parameters'] / psi:.2f} + gradients "
                  f"{w['gradients'] / psi:.2f} + optimizer {w['optimizer_state'] / psi:.2f}), paper "
                  f"{expected / psi:5.2f} (gathered {w['gathered'] / psi:.2f}), ratio {ratio:.3f}; activations {w['activations'] / 2**20:.1f} MiB, "
                  f"resident {w['peak_resident'] / 2**20:.0f} MiB; Ψ = {psi:,}", flush=True)
    sys.exit(1 if worst > args.tolerance else 0)


if __name__ == "__main__":
    main()
