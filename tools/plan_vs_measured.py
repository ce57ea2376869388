#!/usr/bin/env python3
"""The planner against artel itself: predicted and measured step time and peak
memory of layouts of W2, the 50M GPT and GPT-2 on this machine.

For each layout it runs `artel plan --json` on a cluster file that `artel plan
calibrate` wrote (this machine's measured rates) and `artel train` for a few
steps, then prints one row per layout — predicted step, measured median step
(metrics.jsonl's step_ms after a warm-up), their error, predicted and measured
memory of the worker that needs most — and at the end the median and worst
step-time error, Kendall's tau of the two rankings and the memory errors.
The issue's targets: median step error <= 10%, worst <= 25%, tau >= 0.8,
peak memory within 10%.

Memory is compared two ways: the planner's total (its kinds plus the
calibrated runtime: the program, its libraries and data) against the
process's peak resident set (VmHWM), and the planner's kinds alone
(parameters, gradients, optimizer state, activations, communication) against
the run's memory report of the same kinds.

The machine may be shared: each row also shows the cores the run got, its
processes' CPU seconds over its wall time, against the cores it asked for
(workers x threads, capped at the machine's). A run that got fewer was slowed
by other work, which the planner cannot know (a pipeline's workers also idle
in its bubble, so there fewer says less).

    cmake --build build --target artel_cli
    ./build/artel plan calibrate --out /tmp/this_machine.json --workers 4
    nice -n 19 python3 tools/plan_vs_measured.py --artel build/artel --cluster /tmp/this_machine.json

With --harness-rate RATE it runs the layouts of 4 workers on the 2-host
harness (scripts/cluster.sh --ranks 2,2, MPI between the hosts at RATE),
against a cluster file calibrated on it:

    ./build/artel plan calibrate --out /tmp/harness_1g.json --workers 2 --hosts 2 \
        --hosts-command "bash scripts/cluster.sh --rate 1gbit --ranks {ranks} --"
    python3 tools/plan_vs_measured.py --cluster /tmp/harness_1g.json --harness-rate 1gbit

The planner gives each worker a steady share of its host's cores. On the
harness, 4 ranks share this machine's 2 cores, and a rank that waits (in a
pipeline's bubble, or for a tp peer) hands its time to the others, which
real hosts cannot do. --cpus-per-rank F holds each rank to F cores' worth of
time (`artel launch --cpus-per-worker F` around it, inside its host), so a
waiting rank's share goes unused as on a host of its own; --own-cores also
keeps each host's ranks on cores of their own (scripts/cluster.sh).

With --search MODEL it checks `artel plan --search` instead: it ranks every
layout of W2 or GPT-2 that `artel train` runs on --workers workers at
--global-batch, prints the top 5, trains the top 3 and says whether the
predicted best is the measured best or within 5% of it (the issue's target).
The top 3 run in --rounds interleaved rounds (default 3) and each counts its
median round.

    python3 tools/plan_vs_measured.py --cluster /tmp/this_machine.json --search w2 --workers 2 --global-batch 24
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

# The 50M GPT of `artel bench train`'s gpt-50m (train_bench.cpp's bench_config).
GPT_50M = ["--n-layer", "8", "--n-head", "12", "--n-embd", "720"]

# model -> (plan's model flags, train's model flags, steps, warm-up steps)
MODELS = {
    "w2": (["--model", "gpt"], [], 24, 6),
    "gpt-50m": (GPT_50M + ["--seq", "256"], GPT_50M + ["--block-size", "256"], 8, 3),
    # --warmup-steps 0: the preset's 2,000 warm-up steps do not fit a 5-step run's cosine schedule.
    "gpt2": (["--preset", "gpt2", "--seq", "256"], ["--preset", "gpt2", "--block-size", "256", "--warmup-steps", "0"],
             5, 2),
}

# (model, workers, batch a replica per step, layout flags both commands take).
# dp = workers / (tp * pp); --zero is given to both (artel train's default is 1, the planner's 0).
LAYOUTS = [
    ("w2", 1, 12, []),
    ("w2", 1, 12, ["--recompute", "full"]),
    ("w2", 2, 12, ["--zero", "0"]),
    ("w2", 2, 12, ["--zero", "2"]),
    ("w2", 2, 12, ["--tp", "2"]),
    ("w2", 2, 12, ["--pp", "2", "--micro-batches", "2"]),
    ("w2", 2, 12, ["--pp", "2", "--micro-batches", "4", "--schedule", "gpipe"]),
    ("w2", 2, 12, ["--pp", "2", "--micro-batches", "4", "--schedule", "interleaved", "--chunks", "2"]),
    ("w2", 4, 12, ["--zero", "1"]),
    ("gpt-50m", 1, 4, []),
    ("gpt-50m", 1, 4, ["--recompute", "selective"]),
    ("gpt-50m", 2, 4, ["--zero", "1"]),
    ("gpt-50m", 2, 4, ["--zero", "3"]),
    ("gpt-50m", 2, 4, ["--zero", "1", "--recompute", "full"]),
    ("gpt-50m", 2, 4, ["--tp", "2"]),
    ("gpt-50m", 2, 4, ["--pp", "2", "--micro-batches", "2"]),
    ("gpt2", 1, 2, []),
    ("gpt2", 2, 1, ["--zero", "1"]),
    ("gpt2", 2, 2, ["--tp", "2"]),
    ("gpt2", 2, 2, ["--pp", "2", "--micro-batches", "2"]),
]


# The 2-host harness (scripts/cluster.sh --ranks 2,2): four workers, two a host,
# over MPI; --harness-rate runs these instead of LAYOUTS.
HARNESS_LAYOUTS = [
    ("w2", 4, 12, ["--zero", "0"]),
    ("w2", 4, 12, ["--zero", "1"]),
    ("w2", 4, 12, ["--tp", "2"]),
    ("w2", 4, 12, ["--pp", "2", "--micro-batches", "2"]),
    ("w2", 4, 12, ["--tp", "2", "--pp", "2", "--micro-batches", "2"]),
    ("gpt-50m", 4, 4, ["--zero", "1"]),
    ("gpt-50m", 4, 4, ["--tp", "2"]),
    ("gpt-50m", 4, 4, ["--pp", "2", "--micro-batches", "2"]),
    ("gpt2", 4, 1, ["--zero", "1"]),
    ("gpt2", 4, 2, ["--tp", "2"]),
]


def flag(flags, name, default):
    return int(flags[flags.index(name) + 1]) if name in flags else default


def describe(model, workers, batch, flags):
    zero = flag(flags, "--zero", 1)
    rest = [f for f in flags if f not in ("--zero", str(zero))] if "--zero" in flags else flags
    return f"{model} n{workers} b{batch} zero{zero} " + " ".join(f.lstrip("-") for f in rest)


def plan(args, model, workers, batch, flags):
    dp = workers // (flag(flags, "--tp", 1) * flag(flags, "--pp", 1))
    layout = flags if "--zero" in flags else flags + ["--zero", "1"]
    cmd = [args.artel, "plan", "--cluster", args.cluster, "--workers", str(workers), "--global-batch",
           str(batch * dp), "--json"] + MODELS[model][0] + layout + data_flags(args, model)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def data_flags(args, model):
    return ["--data", args.gpt2_data] if model == "gpt2" else []


# The launcher's variables come off again, so the rank is mpirun's.
LAUNCH_VARIABLES = ["ARTEL_RANK", "ARTEL_WORLD_SIZE", "ARTEL_LOCAL_RANK", "ARTEL_JOB_ID", "ARTEL_NUM_THREADS",
                    "ARTEL_RESTART_COUNT", "ARTEL_CPUS_PER_WORKER"]


def rank_share(args):
    """--cpus-per-rank: each harness rank in a cpu cgroup of its own, made by artel launch."""
    if not args.cpus_per_rank:
        return []
    unset = [x for v in LAUNCH_VARIABLES for x in ("-u", v)]
    return [args.artel, "launch", "-n", "1", "--cpus-per-worker", str(args.cpus_per_rank), "--", "env"] + unset


def train(args, model, workers, batch, flags, out):
    steps = MODELS[model][2]
    cmd = ["nice", "-n", "19", args.artel, "train", "--out", out, "--steps", str(steps), "--batch-size", str(batch),
           "--eval-batches", "1", "--eval-every", "0", "--generate", "0"] + MODELS[model][1] + flags
    cmd += data_flags(args, model)
    if args.harness_rate:  # mpirun across the harness's hosts sets the workers
        cmd = ["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "cluster.sh"),
               "--ranks", "2,2", "--rate", args.harness_rate] + (["--own-cores"] if args.own_cores else []) + \
              ["--"] + rank_share(args) + cmd + ["--backend", "mpi", "--timeout", "300"]
    elif workers > 1:
        cmd += ["--nproc", str(workers)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if result.returncode != 0:  # said, and the other layouts still run
        lines = [l for l in (result.stderr + result.stdout).splitlines() if "error" in l] or ["(no error line)"]
        print(f"    failed: `{' '.join(cmd)}`: {lines[-1]}", flush=True)
        return None
    step_ms, memory = [], []
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "step_ms" in j:
                step_ms.append(j["step_ms"])
            if "memory" in j:
                memory = j["memory"]
    timed = sorted(step_ms[MODELS[model][3]:])
    kinds = ("parameters", "gradients", "optimizer_state", "activations", "communication")
    return {"step_ms": timed[len(timed) // 2],
            "kinds": max(sum(m[k] for k in kinds) for m in memory),
            "resident": max(m["peak_resident"] for m in memory),
            "by_kind": {k: max(m[k] for m in memory) for k in kinds}, "cores_got": cpu / wall}


def train_flags(layout):
    """`artel train`'s flags for a layout of `artel plan --json`, and the workers it takes."""
    workers = layout["dp"] * layout["tp"] * layout["pp"]
    flags = ["--zero", str(layout["zero"])]
    for key, flag_name in (("tp", "--tp"), ("pp", "--pp"), ("micro_batches", "--micro-batches")):
        if layout[key] > 1:
            flags += [flag_name, str(layout[key])]
    if layout["pp"] > 1 and layout["schedule"] != "1f1b":
        flags += ["--schedule", layout["schedule"]]
    if layout["recompute"] != "none":
        flags += ["--recompute", layout["recompute"]]
    compression = layout["grad_compression"]
    if compression.startswith("powersgd"):  # compressed from the first step, as the planner predicts every step
        flags += ["--grad-compression", "powersgd", "--powersgd-rank", compression.split(":")[1],
                  "--powersgd-start-step", "0"]
    elif compression != "none":
        flags += ["--grad-compression", compression]
    return workers, flags


def search(args, tmp):
    """Rank the model's layouts with `artel plan --search`, print the top 5, measure the top 3."""
    model = args.search
    cmd = [args.artel, "plan", "--cluster", args.cluster, "--workers", str(args.workers), "--global-batch",
           str(args.global_batch), "--search", "--top", "5", "--json"] + MODELS[model][0] + data_flags(args, model)
    ranked = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    print(f"`artel plan --search`: {model} on {args.workers} workers, global batch {args.global_batch}; top 5:")
    rows = []
    for p in ranked:
        layout = p["layout"]
        workers, flags = train_flags(layout)
        rows.append({"rank": p["rank"], "flags": flags, "predicted_ms": p["time"]["step_s"] * 1e3,
                     "fits": p["memory"]["fits"], "workers": workers, "batch": args.global_batch // layout["dp"]})
    # The top 3 in interleaved rounds, so that a slow spell of a shared
    # machine falls on every layout alike; each layout's median round counts.
    for r in range(args.rounds):
        for row in rows[:3]:
            m = train(args, model, row["workers"], row["batch"], row["flags"], os.path.join(tmp, f"search{row['rank']}-{r}"))
            if m is None:
                sys.exit("plan_vs_measured: a layout of the top 3 failed (above)")
            row.setdefault("rounds_ms", []).append(m["step_ms"])
    for row in rows:
        if "rounds_ms" in row:
            row["measured_ms"] = statistics.median(row["rounds_ms"])
        measured = f"{row['measured_ms']:9.1f}" if "measured_ms" in row else f"{'-':>9s}"
        rounds = " (" + " / ".join(f"{x:.1f}" for x in row["rounds_ms"]) + ")" if len(row.get("rounds_ms", [])) > 1 else ""
        print(f"  {row['rank']:2d}  n{row['workers']} b{row['batch']} {' '.join(row['flags']):70s} "
              f"predicted {row['predicted_ms']:9.1f} ms  measured {measured} ms{rounds}", flush=True)
    timed = [r for r in rows if "measured_ms" in r]
    best = min(timed, key=lambda r: r["measured_ms"])
    gap = timed[0]["measured_ms"] / best["measured_ms"] - 1
    verdict = "the measured best" if best is timed[0] else f"{gap:.1%} slower than the measured best (rank {best['rank']})"
    print(f"predicted best (rank 1) measured {timed[0]['measured_ms']:.1f} ms: {verdict}; target: the best or within 5%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def kendall_tau(xs, ys):
    """Kendall's tau-b of two lists of the same items' values."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    n = concordant + discordant
    return (concordant - discordant) / (((n + ties_x) * (n + ties_y)) ** 0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artel", default="build/artel", help="the artel program")
    parser.add_argument("--cluster", required=True, help="the cluster file `artel plan calibrate` wrote")
    parser.add_argument("--only", default="", help="run only the layouts of this model (w2, gpt-50m, gpt2)")
    parser.add_argument("--json", default="", help="also write the rows here")
    parser.add_argument("--harness-rate", default="",
                        help="run the 2-host harness's layouts through scripts/cluster.sh --ranks 2,2 at this link "
                             "rate (1gbit, 10gbit); --cluster must be a harness calibration at that rate")
    parser.add_argument("--own-cores", action="store_true",
                        help="--harness-rate: each host on cores of its own (scripts/cluster.sh --own-cores)")
    parser.add_argument("--cpus-per-rank", type=float, default=0,
                        help="--harness-rate: each rank held to this many cores' worth of time (cpu cgroups)")
    parser.add_argument("--search", default="", choices=["", "w2", "gpt2"],
                        help="check `artel plan --search` for this model instead of the fixed layouts")
    parser.add_argument("--workers", type=int, default=2, help="--search: the workers")
    parser.add_argument("--global-batch", type=int, default=24, help="--search: sequences per optimizer step")
    parser.add_argument("--rounds", type=int, default=3,
                        help="--search: rounds of the top 3, interleaved; each layout's median round counts")
    args = parser.parse_args()
    if not os.access(args.artel, os.X_OK):
        sys.exit(f"plan_vs_measured: {args.artel} is not a program (hint: build artel_cli, or pass --artel)")
    if not os.path.exists(args.cluster):
        sys.exit(f"plan_vs_measured: no cluster file {args.cluster} (hint: `artel plan calibrate --out {args.cluster}`)")
    # GPT-2 trains on the bundled text as uint16 byte tokens, as `artel bench train`'s gpt2 workload does.
    args.gpt2_data = os.path.join(tempfile.gettempdir(), "artel-plan-vs-measured-bytes.bin")
    if not os.path.exists(args.gpt2_data):
        text = open(os.path.join(os.path.dirname(__file__), "..", "data", "tinyshakespeare.txt"), "rb").read()
        with open(args.gpt2_data, "wb") as f:
            f.write(b"".join(bytes((c, 0)) for c in text))

    if args.search:
        with tempfile.TemporaryDirectory(prefix="plan-search-vs-measured-") as tmp:
            search(args, tmp)
        return
    rows = []
    print(f"{'layout':44s} {'pred ms':>8s} {'meas ms':>8s} {'err':>7s} {'cores':>5s}  {'pred MiB':>8s} "
          f"{'VmHWM':>8s} {'err':>7s}  {'kinds':>7s} {'meas':>7s} {'err':>7s}", flush=True)
    cores = os.cpu_count()
    with tempfile.TemporaryDirectory(prefix="plan-vs-measured-") as tmp:
        for i, (model, workers, batch, flags) in enumerate(HARNESS_LAYOUTS if args.harness_rate else LAYOUTS):
            if args.only and model != args.only:
                continue
            p = plan(args, model, workers, batch, flags)
            m = train(args, model, workers, batch, flags, os.path.join(tmp, str(i)))
            if m is None:
                continue
            asked = min(cores, workers * max(1, cores // workers))
            row = {"layout": describe(model, workers, batch, flags), "predicted_ms": p["time"]["step_s"] * 1e3,
                   "cores_got": m["cores_got"], "cores_asked": asked,
                   "measured_ms": m["step_ms"], "predicted_bytes": p["memory"]["total"], "kinds_bytes": m["kinds"],
                   "resident_bytes": m["resident"], "measured_by_kind": m["by_kind"], "predicted": p}
            row["step_error"] = row["predicted_ms"] / row["measured_ms"] - 1
            row["predicted_kinds_bytes"] = row["predicted_bytes"] - p["memory"]["runtime"]
            row["kinds_error"] = row["predicted_kinds_bytes"] / row["kinds_bytes"] - 1
            row["resident_error"] = row["predicted_bytes"] / row["resident_bytes"] - 1
            rows.append(row)
            if args.json:  # after every row: a long run that fails later keeps what it measured
                with open(args.json, "w") as f:
                    json.dump(rows, f, indent=1)
            mib = 1 << 20
            print(f"{row['layout']:44s} {row['predicted_ms']:8.1f} {row['measured_ms']:8.1f} "
                  f"{row['step_error']:+7.1%} {row['cores_got']:3.1f}/{asked:<1d}  "
                  f"{row['predicted_bytes'] / mib:8.1f} {row['resident_bytes'] / mib:8.1f} {row['resident_error']:+7.1%}  "
                  f"{row['predicted_kinds_bytes'] / mib:7.1f} {row['kinds_bytes'] / mib:7.1f} {row['kinds_error']:+7.1%}",
                  flush=True)
    summarize(rows)


def step_summary(what, predicted, measured):
    errors = [abs(p / m - 1) for p, m in zip(predicted, measured)]
    return (f"{what}: median |error| {statistics.median(errors):.1%} (target <= 10%), worst {max(errors):.1%} "
            f"(target <= 25%); Kendall tau {kendall_tau(predicted, measured):.3f} (target >= 0.8)")


def summarize(rows):
    """The summary lines, from the rows (also those --json wrote)."""
    measured = [r["measured_ms"] for r in rows]
    print(f"\n{len(rows)} layouts. " + step_summary("step time", [r["predicted_ms"] for r in rows], measured))
    short = [r["layout"] for r in rows if r["cores_got"] < 0.75 * r["cores_asked"] and "pp" not in r["layout"]]
    if short:  # a pipeline's workers idle in its bubble: little CPU there says nothing about other users
        print(f"    {len(short)} runs got under 3/4 of their cores (other work on the machine?): {', '.join(short)}")
    kinds = [abs(r["kinds_error"]) for r in rows]
    resident = [abs(r["resident_error"]) for r in rows]
    print(f"peak memory per worker, the planner's total against VmHWM: median |error| "
          f"{statistics.median(resident):.1%}, worst {max(resident):.1%} (target: within 10%); its kinds against the "
          f"run's memory report: median {statistics.median(kinds):.1%}, worst {max(kinds):.1%}")


if __name__ == "__main__":
    main()
