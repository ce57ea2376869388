#!/usr/bin/python3
"""The GPT reference test (llm.c's test_gpt2.c): artel's logits, loss and every
parameter's gradient against PyTorch's on the same weights and the same batch.

  /usr/bin/python3 tests/reference/gpt_reference_test.py build/tests/gpt_reference_dump

runs the artel half (gpt_reference_dump, which writes each case's weights,
batch, logits, loss and gradients as safetensors into a temporary directory;
the cases are listed there), loads each case into tools/torch/gpt.py, runs the
same forward and backward there in float64 (the reference) and in float32
(PyTorch's own rounding, for scale), prints each case's loss and, per tensor
kind, the largest differences over all cases, and exits 1 on any mismatch (2
when it cannot run at all: no torch, no artel program).

The measure of a difference: for each tensor, max|artel - ref| / max|ref| (the
error relative to the tensor's own scale, so a layer's small gradients are held
to the same standard as large ones); for the loss, |artel - ref| / |ref|.
artel and PyTorch's own float32 run both land within 2e-6 of float64 on every
tensor (float32 rounding summed in different orders over a few layers); the
tolerances below leave an order of magnitude above that. Adding 1e-5 to a
single weight on one side fails the test.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "torch"))

TOLERANCE = {"logits": 1e-5, "loss": 1e-6, "grad": 2e-5}  # see the docstring


def fail_to_run(message):
    print(f"gpt_reference_test: {message}", file=sys.stderr)
    sys.exit(2)


try:
    import torch
except ImportError:
    fail_to_run(f"{sys.executable} has no torch (hint: apt-get install python3-torch, or pass Debian's "
                "/usr/bin/python3 when another python3 comes first on PATH)")

from gpt import GPT, GPTConfig                      # noqa: E402 (after the path and the torch check)
from safetensors_io import read_safetensors         # noqa: E402


def kind_of(name):
    """Rows of the table: logits, loss, and gradients by the parameter's role."""
    if not name.startswith("grad/"):
        return name
    n = name[len("grad/"):]
    for part in ("wte", "wpe", "ln_f", "ln_1", "ln_2", "c_attn", "attn.c_proj", "c_fc", "mlp.c_proj"):
        if f".{part}." in f".{n}":
            return "grad " + part + (" weight" if n.endswith("weight") else " bias")
    return "grad " + n


def relative_error(artel, ref):
    artel, ref = artel.double(), ref.double()
    scale = ref.abs().max().item()
    return (artel - ref).abs().max().item() / (scale if scale > 0 else 1.0)


def reference(weights, outputs, meta, dtype):
    """PyTorch's logits, loss and gradients (by name) in `dtype`."""
    config = GPTConfig(vocab_size=int(meta["vocab_size"]), n_layer=int(meta["n_layer"]), n_head=int(meta["n_head"]),
                       n_embd=int(meta["n_embd"]), block_size=int(meta["block_size"]), dropout=0.0)
    model = GPT(config).to(dtype)
    model.load_weights(weights)
    model.train()                                   # as artel's backward ran (dropout 0: no difference)
    logits, loss = model(outputs["ids"], outputs["targets"])
    loss.backward()
    result = {"logits": logits.detach(), "loss": loss.detach()}
    for name, p in model.named_parameters():
        result["grad/" + name] = p.grad
    return result


def check_case(outputs_path, weights_path):
    """-> (measurements [(tensor, kind, artel error, torch float32 error)], problems, summary line)."""
    weights, _ = read_safetensors(weights_path)
    outputs, meta = read_safetensors(outputs_path)
    exact = reference(weights, outputs, meta, torch.float64)
    single = reference(weights, outputs, meta, torch.float32)
    problems, measured = [], []
    artel_names = set(outputs) - {"ids", "targets"}
    if set(exact) != artel_names:
        problems.append(f"tensors differ: only in PyTorch {sorted(set(exact) - artel_names)}, "
                        f"only in artel {sorted(artel_names - set(exact))}")
    for name in sorted(set(exact) & artel_names):
        a, r = outputs[name], exact[name]
        if tuple(a.shape) != tuple(r.shape):
            problems.append(f"{name}: artel shape {tuple(a.shape)}, PyTorch {tuple(r.shape)}")
            continue
        err = relative_error(a, r)
        measured.append((name, kind_of(name), err, relative_error(single[name], r)))
        tol = TOLERANCE["grad" if name.startswith("grad/") else name]
        if not err <= tol:                          # NaN fails too
            problems.append(f"{name}: relative difference {err:.3g} > tolerance {tol:g}")
    B, T = outputs["ids"].shape
    summary = (f"B {B} T {T:<3} L {meta['n_layer']} H {meta['n_head']} C {meta['n_embd']:<4} "
               f"block {meta['block_size']:<3} gemm {meta['gemm']:<9} loss artel {float(outputs['loss']):.7f} "
               f"PyTorch f64 {float(exact['loss']):.7f}")
    return measured, problems, summary


def print_table(by_case):
    """The largest differences per tensor kind over all cases, and over each group (logits, loss, grad)."""
    rows = {}                                       # kind -> (artel error, torch float32 error, where)
    for case, measured in by_case.items():
        for name, kind, err, own in measured:
            worst, worst_own, where = rows.get(kind, (-1.0, 0.0, ""))
            if err > worst:
                worst, where = err, f"{case}: {name}"
            rows[kind] = (worst, max(worst_own, own), where)
    print(f"{'tensor kind':<24} {'artel':>9} {'torch f32':>9}  worst (case: tensor)")
    for kind in sorted(rows, key=lambda k: (k.startswith("grad"), k)):
        err, own, where = rows[kind]
        print(f"{kind:<24} {err:9.2e} {own:9.2e}  {where}")
    groups = {}
    for kind, (err, _, where) in rows.items():
        g = "grad" if kind.startswith("grad") else kind
        if err > groups.get(g, (-1.0, ""))[0]:
            groups[g] = (err, where)
    return ", ".join(f"{g} {e:.2e} ({w})" for g, (e, w) in sorted(groups.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dump", help="the gpt_reference_dump program (the artel half)")
    ap.add_argument("--dir", help="where it writes its files (default: a temporary directory, removed after)")
    args = ap.parse_args()
    if not os.access(args.dump, os.X_OK):
        fail_to_run(f"{args.dump} is not an executable (hint: build the target gpt_reference_dump)")
    with tempfile.TemporaryDirectory(prefix="artel-gpt-reference-") as tmp:
        out_dir = args.dir or tmp
        run = subprocess.run([args.dump, out_dir], stdout=subprocess.DEVNULL)
        if run.returncode != 0:
            fail_to_run(f"{args.dump} {out_dir} exited with status {run.returncode}")
        cases = sorted(f[: -len(".outputs.safetensors")] for f in os.listdir(out_dir)
                       if f.endswith(".outputs.safetensors"))
        if not cases:
            fail_to_run(f"{args.dump} wrote no <case>.outputs.safetensors into {out_dir}")
        by_case, problems = {}, []
        print(f"# artel against PyTorch {torch.__version__} float64 (ref) on the same weights and batch")
        for case in cases:
            measured, case_problems, summary = check_case(os.path.join(out_dir, case + ".outputs.safetensors"),
                                                          os.path.join(out_dir, case + ".weights.safetensors"))
            print(f"{case:<12} {summary}")
            by_case[case] = measured
            problems += [f"{case}: {p}" for p in case_problems]
    print("# relative difference = max|x - ref| / max|ref| per tensor (loss: |x - ref| / |ref|); "
          "artel = artel's float32, torch f32 = PyTorch's own float32 run")
    largest = print_table(by_case)
    print(f"# tolerances: logits {TOLERANCE['logits']:g}, loss {TOLERANCE['loss']:g}, every gradient "
          f"{TOLERANCE['grad']:g}; largest: {largest}")
    if problems:
        print("MISMATCH:\n  " + "\n  ".join(problems))
        return 1
    print(f"OK: {len(cases)} cases, logits, loss and every gradient within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
