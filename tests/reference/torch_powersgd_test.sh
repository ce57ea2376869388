#!/bin/bash
# The PyTorch harness's PowerSGD (README, "What rank-4 PowerSGD costs in
# loss"): two DDP processes with PyTorch's powerSGD_hook, compressing from
# step 2, train 12 steps and report a finite validation loss.
# Usage: torch_powersgd_test.sh PYTHON tools/torch/train.py
set -euo pipefail
out=$("$1" "$2" --workload shakespeare-char-gpt --ddp 2 --iters 12 --warmup 2 --eval-at 12 \
      --grad-compression powersgd --powersgd-rank 2 --powersgd-start-step 2)
grep -q '"grad_compression": "powersgd"' <<<"$out" || { echo "no powersgd config record in: $out"; exit 1; }
"$1" -c 'import json, math, sys
evals = [r for r in map(json.loads, sys.stdin) if r["event"] == "eval"]
assert evals and math.isfinite(evals[-1]["val_loss"]), evals' <<<"$out"
