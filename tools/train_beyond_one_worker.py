"""Trains a GPT that no single worker can hold, the way issue 21 asks:

  - every worker gets a memory limit C (--memory-per-worker: a cgroup of its own);
  - the GPT's fp32 training state, 16 bytes per parameter (weights, gradients,
    AdamW's two moments), is at least 3 C;
  - 4 workers at --zero 3 --recompute full train it for --steps steps under the
    limit and write a sharded checkpoint at --checkpoint-at;
  - 8 workers resume from that checkpoint (the same global batch) and their losses
    are compared with the 4-worker run's for the steps after it;
  - the same model at --zero 1 under the same limit is refused before it starts,
    with the planner's numbers (artel plan's memory model), and with
    --no-memory-check starts and stops with the one-line out-of-memory error.

  /usr/bin/python3 tools/train_beyond_one_worker.py [--artel build/artel] [--limit 3G]

Prints each run's command, losses and memory report; exits 1 when a check fails.
Needs about 25 GB of disk under --dir and 12 GB of memory; about 15 minutes on 2 cores.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT = ("--model gpt --data {root}/data/tinyshakespeare.txt --n-layer 48 --n-head 16 --n-embd 1040 --block-size 64 "
       "--generate 0 --eval-batches 1 --eval-every 0 --threads 1 --timeout 1800 --zero {zero} --recompute full")
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def size_bytes(text):
    t = text.upper().removesuffix("IB").removesuffix("B")
    return int(float(t[:-1]) * UNITS[t[-1]]) if t[-1] in UNITS else int(t)


def run(cmd, expect_ok=True):
    print("$ " + " ".join(cmd), flush=True)
    start = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(f"  exit {r.returncode} after {time.time() - start:.0f} s", flush=True)
    if expect_ok and r.returncode != 0:
        sys.exit(f"failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r


def losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return {row["step"]: row["loss"] for row in rows if "loss" in row and "step" in row}, rows


def memory_lines(stdout):
    lines = stdout.splitlines()
    at = next((i for i, l in enumerate(lines) if "memory: peak MiB per worker" in l), None)
    return lines[at:] if at is not None else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--artel", default=os.path.join(ROOT, "build", "artel"))
    ap.add_argument("--limit", default="3G", help="--memory-per-worker of every run")
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--checkpoint-at", type=int, default=20)
    ap.add_argument("--dir", default="/tmp/artel-beyond-one-worker")
    ap.add_argument("--keep", action="store_true", help="keep --dir afterwards")
    args = ap.parse_args()
    limit = size_bytes(args.limit)
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    ok = True
    try:
        gpt = lambda zero: GPT.format(root=ROOT, zero=zero).split()
        # 4 workers x 2 rows = the global batch of 8 workers x 1 row.
        four = os.path.join(args.dir, "four")
        r = run([args.artel, "train"] + gpt(3) + ["--nproc", "4", "--batch-size", "2", "--steps", str(args.steps),
                "--checkpoint-every", str(args.checkpoint_at), "--keep-checkpoints", "0",
                "--memory-per-worker", args.limit, "--out", four])
        psi = int(r.stdout.split(" parameters")[0].split(",", 1)[1].replace(",", "").split()[-1])
        print(f"parameters {psi:,}: 16 bytes each = {16 * psi / 2**30:.2f} GiB = {16 * psi / limit:.2f} x the "
              f"{limit / 2**30:.2f} GiB limit per worker")
        ok &= 16 * psi >= 3 * limit
        print("\n".join(memory_lines(r.stdout)))
        held, _ = losses(four)

        # 8 workers resume from the checkpoint of step --checkpoint-at.
        eight = os.path.join(args.dir, "eight")
        ckpt = f"ckpt-{args.checkpoint_at:08d}"
        os.makedirs(os.path.join(eight, "checkpoints"))
        shutil.copytree(os.path.join(four, "checkpoints", ckpt), os.path.join(eight, "checkpoints", ckpt),
                        copy_function=os.link)
        r = run([args.artel, "train"] + gpt(3) + ["--nproc", "8", "--batch-size", "1", "--steps", str(args.steps),
                "--resume", "--memory-per-worker", args.limit, "--out", eight])
        print("\n".join(memory_lines(r.stdout)))
        resumed, _ = losses(eight)
        worst = 0.0
        print("step  4 workers     8 workers (resumed)  difference")
        for step in range(args.checkpoint_at + 1, args.steps + 1):
            a, b = held[step], resumed[step]
            worst = max(worst, abs(a - b))
            print(f"{step:4d}  {a:.7f}     {b:.7f}            {a - b:+.2e}")
        print(f"largest difference {worst:.2e}")
        ok &= worst <= 1e-4 and len(resumed) == args.steps - args.checkpoint_at

        # The same model at --zero 1 under the same limit: refused up front by
        # the planner, then, forced past it, out of memory while it runs.
        zero1 = gpt(1) + ["--nproc", "4", "--batch-size", "2", "--steps", "2", "--memory-per-worker", args.limit,
                          "--out", os.path.join(args.dir, "zero1")]
        r = run([args.artel, "train"] + zero1, expect_ok=False)
        refused = [l for l in r.stderr.splitlines() if "the planner predicts" in l]
        print("\n".join(refused) if refused else r.stderr[-2000:])
        ok &= r.returncode != 0 and bool(refused)
        r = run([args.artel, "train"] + zero1 + ["--no-memory-check"], expect_ok=False)
        oom = [l for l in r.stderr.splitlines() + r.stdout.splitlines() if "out of memory" in l]
        print("\n".join(oom[:2]) if oom else r.stderr[-2000:])
        ok &= r.returncode != 0 and bool(oom)
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)
    print("all checks hold" if ok else "a check failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
