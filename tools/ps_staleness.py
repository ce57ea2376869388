#!/usr/bin/env python3
"""The parameter server's measured figures (issue 22), from `artel train` runs:

  equal      BSP (--staleness 0, 4 workers, 2 servers) against data parallelism
             (--nproc 4) on the same global batch: the largest weight difference,
             W1 and W2;
  table      convergence against staleness s in {0, 1, 2, 4, 8, inf}, 4 workers and
             2 servers: W1 validation accuracy after 10 epochs, W2 validation loss
             after 1000 steps, each run's staleness histogram and samples/s;
  straggler  worker 3 slowed 2x (ARTEL_TEST_SLOW=3:2), and a straggler that
             moves, one worker slowed 2x at a time (turns:2): wall time until
             W1 (4 workers x 256, so that computing, not moving the 2.7 MB of
             weights, is most of a step) first reaches 0.96 validation
             accuracy under BSP, SSP s=3, ASP.
             Each of the 6 processes gets an equal share of the cores
             (--cpus-per-worker cores/6), as on machines of their own: else a
             sleeping straggler's core goes to the others and hides it.
             --rounds N runs N interleaved rounds (SSP's step count varies
             with the order pushes arrive) and prints the medians;
  sparse     the word-level LM (a 14,565-row table): bytes per worker per step
             with the table pulled and pushed by rows against whole, and the
             weights of both against data parallelism.

Usage: python3 tools/ps_staleness.py [--artel build/artel] [--out runs/ps] [--rounds N] [equal table straggler sparse]
Prints a table per part; every run's metrics.jsonl stays under --out.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys

STALENESS = ["0", "1", "2", "4", "8", "inf"]


def run(artel, out, args, env=None):
    cmd = [artel, "train", "--out", out, "--timeout", "120"] + args
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}")
    return [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]


def weights(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = blob[8 + n + b:8 + n + e]
        out[name] = struct.unpack(f"<{len(raw) // 4}f", raw)
    return out


def max_diff(a, b):
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    return max(max(abs(x - y) for x, y in zip(wa[k], wb[k])) for k in wa)


def ps_summary(lines):
    return next(l["parameter_server"] for l in lines if "parameter_server" in l)


def rate(lines):
    rates = [l.get("samples_per_s", l.get("tokens_per_s")) for l in lines if "loss" in l]
    return statistics.median(rates[len(rates) // 4:])


def histogram(ps):
    total = {}
    for w in ps["workers"]:
        for k, v in w["staleness_histogram"].items():
            total[int(k)] = total.get(int(k), 0) + v
    shown = " ".join(f"{k}:{total[k]}" for k in sorted(total) if k <= 8)
    beyond = sum(v for k, v in total.items() if k > 8)
    return shown + (f" >8:{beyond} (max {max(total)})" if beyond else "")


W1 = ["--model", "mlp"]
W2 = ["--model", "gpt", "--batch-size", "3", "--generate", "0"]
PS = ["--nproc", "4", "--ps-servers", "2"]


def equal(a, out):
    print("BSP (4 workers, 2 servers) against data parallelism (4 workers), same global batch")
    for name, model, steps in [("W1", W1, "100"), ("W2", W2, "200")]:
        dp = os.path.join(out, f"equal-{name}-dp")
        bsp = os.path.join(out, f"equal-{name}-bsp")
        run(a, dp, model + ["--nproc", "4", "--steps", steps])
        run(a, bsp, model + PS + ["--staleness", "0", "--steps", steps])
        print(f"  {name}: {steps} steps, largest |weight difference| {max_diff(dp + '/final.safetensors', bsp + '/final.safetensors'):.3g}")


def table(a, out):
    print("staleness  W1 val_acc (10 epochs)  samples/s  histogram            | W2 val_loss (1000 steps)  tokens/s  histogram")
    for s in STALENESS:
        w1 = run(a, os.path.join(out, f"table-w1-s{s}"), W1 + PS + ["--staleness", s, "--epochs", "10"])
        w2 = run(a, os.path.join(out, f"table-w2-s{s}"), W2 + PS + ["--staleness", s, "--steps", "1000",
                                                                    "--eval-every", "0"])
        e1 = [l for l in w1 if "val_accuracy" in l][-1]
        e2 = [l for l in w2 if "val_loss" in l and "loss" not in l][-1]
        print(f"{s:>9}  {e1['val_accuracy']:22.4f}  {rate(w1):9.0f}  {histogram(ps_summary(w1)):20} | "
              f"{e2['val_loss']:24.4f}  {rate(w2):8.0f}  {histogram(ps_summary(w2))}")


def straggler(a, out, rounds):
    share = f"{len(os.sched_getaffinity(0)) / 6:.3f}"  # 4 workers and 2 servers, each a machine of its own
    for slow, what in [("3:2", "worker 3 slowed 2x"), ("turns:2", "one worker at a time slowed 2x (step k: worker (k-1) mod 4)")]:
        print(f"{what}: W1 (4 workers x 256, 2 servers, {share} cores each), wall time to 0.96 validation accuracy")
        times = {s: [] for s in ["0", "3", "inf"]}
        for r in range(rounds):  # interleaved: each round runs all three
            for s in times:
                lines = run(a, os.path.join(out, f"straggler-{slow.replace(':', '')}-s{s}-r{r + 1}"),
                            W1 + PS + ["--staleness", s, "--batch-size", "256", "--steps", "400", "--eval-every", "10",
                                       "--cpus-per-worker", share],
                            env={"ARTEL_TEST_SLOW": slow})
                hit = next((l for l in lines if l.get("val_accuracy", 0) >= 0.96), None)
                times[s].append(hit["elapsed_s"] if hit else None)
                where = f"{hit['elapsed_s']:.2f} s (step {hit['step']})" if hit else "never (400 steps)"
                print(f"  round {r + 1}, staleness {s:>3}: {where}; histogram {histogram(ps_summary(lines))}", flush=True)
        bsp, ssp = times["0"], times["3"]
        ratios = [b / s for b, s in zip(bsp, ssp) if b and s]
        if ratios:
            print(f"  SSP s=3 against BSP: rounds {' '.join(f'{x:.2f}x' for x in ratios)}", end="")
            if None not in bsp + ssp:
                print(f"; medians {statistics.median(bsp):.2f} s against {statistics.median(ssp):.2f} s, "
                      f"{statistics.median(bsp) / statistics.median(ssp):.2f}x", end="")
            print()


def sparse(a, out):
    print("wordlm (4 workers x 16 x 32 words, 2 servers, BSP, 20 steps): bytes per worker per step")
    model = ["--model", "wordlm", "--steps", "20", "--eval-every", "0"]
    dp = os.path.join(out, "sparse-dp")
    run(a, dp, model + ["--nproc", "4"])
    for rows in ["true", "false"]:
        d = os.path.join(out, f"sparse-{rows}")
        ps = ps_summary(run(a, d, model + PS + ["--ps-sparse", rows]))
        mib = 1 << 20
        print(f"  --ps-sparse {rows:5}: {ps['bytes_sent_per_step'] / mib:.2f} MiB up, "
              f"{ps['bytes_received_per_step'] / mib:.2f} MiB down; largest |weight difference| against data "
              f"parallelism {max_diff(dp + '/final.safetensors', d + '/final.safetensors'):.3g}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--artel", default="build/artel")
    p.add_argument("--out", default="runs/ps")
    p.add_argument("--rounds", type=int, default=1, help="straggler: interleaved rounds, with the medians")
    p.add_argument("parts", nargs="*", default=["equal", "table", "straggler", "sparse"])
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for part in args.parts:
        parts = {"equal": equal, "table": table, "sparse": sparse,
                 "straggler": lambda a, out: straggler(a, out, args.rounds)}
        parts[part](os.path.abspath(args.artel), args.out)


if __name__ == "__main__":
    main()
