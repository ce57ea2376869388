#!/usr/bin/env python3
"""Gradient compression across hosts (issue 24), from `artel train` runs on
scripts/cluster.sh's hosts (network namespaces joined by tbf-limited links):

  step   the data-parallel step with --grad-compression none | bf16 | powersgd,
         on hosts of --ranks (2,2) at each --rate: median step and sync ms, bytes handed
         to the gradient collectives per step (metrics.jsonl's grad_bytes), and
         the speed-up over none. --workload w2 (the default GPT) or gpt2
         (--preset gpt2 on --tokens B x T, 4 x 256 by default, of the bundled
         text's bytes);
  algo   the same step uncompressed with the gradient all-reduce forced to
         native (MPI's own, flat) and to hierarchical (host-local over shared
         memory, 1/g across hosts), at each --rate, in --rounds interleaved
         rounds: each round's medians, then the medians over rounds and the
         range of the rounds' speed-ups;
  loss   W2's validation loss after --steps (1000) steps, each compression
         against none, on the cluster at the first --rate.

Usage: python3 tools/grad_compression.py [--artel build/artel] [--out runs/compression]
         [--rates 1gbit,10gbit] [--ranks 2,2] [--workload w2|gpt2] [--tokens BxT] [--steps N] [--rounds R]
         [step] [algo] [loss]
Needs root (network namespaces). Every run's metrics.jsonl stays under --out.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = ["none", "bf16", "powersgd"]


def token_file(out):
    """The bundled text's bytes as uint16 token ids (nanoGPT's raw layout), as `artel bench`'s gpt2 workload uses."""
    path = os.path.join(out, "bytes.bin")
    if not os.path.exists(path):
        text = open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), "rb").read()
        with open(path, "wb") as f:
            f.write(b"".join(b.to_bytes(2, "little") for b in text))
    return path


def workload_args(a):
    if a.workload == "w2":
        return ["--zero", "0"]
    batch, block = a.tokens.split("x")
    return ["--preset", "gpt2", "--data", token_file(a.out), "--block-size", block, "--batch-size", batch,
            "--zero", "0", "--eval-batches", "1", "--warmup-steps", "1"]


def hosts(a):
    """'2 hosts x 2 ranks', or '3 hosts (2,1,2 ranks)' where they differ."""
    counts = a.ranks.split(",")
    if len(set(counts)) == 1:
        return f"{len(counts)} hosts x {counts[0]} ranks"
    return f"{len(counts)} hosts ({a.ranks} ranks)"


def run(a, out, rate, args):
    cmd = ["bash", os.path.join(ROOT, "scripts", "cluster.sh"), "--ranks", a.ranks, "--rate", rate, "--",
           a.artel, "train", "--backend", "mpi", "--timeout", "600", "--generate", "0", "--out", out] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}")
    return [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]


def steps_of(records, skip):
    return [r for r in records if "step_ms" in r and r["step"] > skip]


def step(a):
    steps = a.steps or (60 if a.workload == "w2" else 8)
    skip = steps // 3  # warm-up, and PowerSGD's uncompressed first steps
    print(f"# {a.workload}, data parallel on {hosts(a)}, {steps} steps, medians of steps {skip + 1}..{steps}")
    print(f"# {'rate':>7} {'compression':>12} {'step ms':>9} {'sync ms':>9} {'grad bytes':>12} {'speed-up':>9}")
    for rate in a.rates.split(","):
        base = None
        for case in CASES:
            extra = ["--powersgd-start-step", str(skip // 2)] if case == "powersgd" else []
            out = os.path.join(a.out, f"{a.workload}_{rate}_{case}")
            rec = steps_of(run(a, out, rate, workload_args(a) +
                               ["--steps", str(steps), "--grad-compression", case] + extra), skip)
            ms = statistics.median(r["step_ms"] for r in rec)
            sync = statistics.median(r["t_sync_ms"] for r in rec)
            base = base or ms
            print(f"  {rate:>7} {case:>12} {ms:9.1f} {sync:9.1f} {rec[-1]['grad_bytes']:12d} {base / ms:8.2f}x")


def algo(a):
    steps = a.steps or (60 if a.workload == "w2" else 8)
    skip = steps // 3
    tokens = f" at {a.tokens} tokens a rank" if a.workload == "gpt2" else ""
    print(f"# {a.workload}{tokens}, data parallel on {hosts(a)}, {steps} steps, medians of steps "
          f"{skip + 1}..{steps}, {a.rounds} round(s) of native then hierarchical")
    print(f"# {'rate':>7} {'round':>6} {'all-reduce':>13} {'step ms':>9} {'sync ms':>9} {'speed-up':>9}")
    for rate in a.rates.split(","):
        ms = {"native": [], "hierarchical": []}
        sync = {"native": [], "hierarchical": []}
        for r in range(1, a.rounds + 1):
            for name in ms:
                out = os.path.join(a.out, f"{a.workload}_{rate}_{name}")
                rec = steps_of(run(a, out, rate, workload_args(a) +
                                   ["--steps", str(steps), "--grad-all-reduce", name]), skip)
                ms[name].append(statistics.median(x["step_ms"] for x in rec))
                sync[name].append(statistics.median(x["t_sync_ms"] for x in rec))
                print(f"  {rate:>7} {'#' + str(r):>6} {name:>13} {ms[name][-1]:9.1f} {sync[name][-1]:9.1f} "
                      f"{ms['native'][-1] / ms[name][-1]:8.2f}x", flush=True)
        if a.rounds > 1:
            ups = [n / h for n, h in zip(ms["native"], ms["hierarchical"])]
            for name in ms:
                med = statistics.median(ms[name])
                print(f"  {rate:>7} {'median':>6} {name:>13} {med:9.1f} {statistics.median(sync[name]):9.1f} "
                      f"{statistics.median(ms['native']) / med:8.2f}x")
            print(f"# {rate}: hierarchical's speed-up per round {min(ups):.2f}x .. {max(ups):.2f}x")


def loss(a):
    steps = a.steps or 1000
    rate = a.rates.split(",")[0]
    print(f"# W2 validation loss after {steps} steps, {hosts(a)} at {rate}")
    base = None
    for case in CASES:
        out = os.path.join(a.out, f"loss_{case}")
        rec = run(a, out, rate, ["--zero", "0", "--steps", str(steps), "--grad-compression", case])
        val = [r["val_loss"] for r in rec if "val_loss" in r][-1]
        base = base or val
        print(f"  {case:>9}: val_loss {val:.4f} ({100 * (val - base) / base:+.2f}% against none)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--artel", default=os.path.join(ROOT, "build", "artel"))
    p.add_argument("--out", default="runs/compression")
    p.add_argument("--rates", default="1gbit,10gbit")
    p.add_argument("--workload", default="w2", choices=["w2", "gpt2"])
    p.add_argument("--tokens", default="4x256", help="gpt2: batch x block per rank")
    p.add_argument("--ranks", default="2,2", help="ranks on each host (scripts/cluster.sh --ranks)")
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--rounds", type=int, default=1, help="algo: interleaved rounds of native and hierarchical")
    p.add_argument("parts", nargs="*", default=["step", "algo", "loss"])
    a = p.parse_args()
    a.artel = os.path.abspath(a.artel)
    os.makedirs(a.out, exist_ok=True)
    a.out = os.path.abspath(a.out)
    for part in a.parts:
        {"step": step, "algo": algo, "loss": loss}[part](a)


if __name__ == "__main__":
    main()
