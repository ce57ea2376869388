#!/usr/bin/python3
"""The PyTorch side of `artel bench train`: artel's benchmark workloads (W1, W2,
the CNN and GPT-2 124M) trained with PyTorch on the same data and recipe, timed
the way artel times them: the wall time of a whole step (batch, forward,
backward, update), the median over the steps after a warmup.

  /usr/bin/python3 tools/torch/train.py --workload mnist-mlp --epochs 2 --threads 1
  /usr/bin/python3 tools/torch/train.py --workload shakespeare-char-gpt --iters 120 --eval-at 120
  /usr/bin/python3 tools/torch/train.py --workload mnist-cnn --epochs 2 --threads 2
  /usr/bin/python3 tools/torch/train.py --workload mnist-mlp --ddp 2 --threads 1   # 2 processes, DDP over gloo
  /usr/bin/python3 tools/torch/train.py --workload gpt2 --data-file tokens.bin --iters 8 --warmup 2 --precision bf16
  /usr/bin/python3 tools/torch/train.py --workload shakespeare-char-gpt --ddp 4 --iters 1000 --eval-at 1000 \
      --grad-compression powersgd --powersgd-rank 4   # PyTorch's PowerSGD hook, against artel's

Use Debian's /usr/bin/python3 (python3-torch); another python3 may come first
on PATH. The workloads (src/artel/train/train_config.cpp, default_config):
  mnist-mlp             W1: 784-512-512-10 ReLU (models/mlp.h), batch 128, SGD lr 0.05 momentum 0.9
  mnist-cnn             the LeNet-like CNN (models/cnn.h), W1's recipe at lr 0.02
  shakespeare-char-gpt  W2: the GPT of gpt.py, 4 layers, 4 heads, 128 wide, block 64, batch 12,
                        AdamW lr 1e-3 betas (0.9, 0.99) weight decay 0.1 on matrices and embeddings
  gpt2                  GPT-2 124M in nanoGPT's shape (12 layers, 12 heads, 768 wide, vocabulary
                        50304) at block 256, batch 4, on --data-file (uint16 tokens, nanoGPT's raw
                        layout); AdamW lr 6e-4 betas (0.9, 0.95) weight decay 0.1, clipping at 1.0
--precision bf16 runs the forward under torch.autocast("cpu", torch.bfloat16), as
PyTorch's CPU mixed precision does (backward and the update stay as autocast leaves them).
MNIST is data/mnist-t10k (the first 8000 images train, the last 2000
validate, normalised as artel does); W2's text is data/tinyshakespeare.txt (90 %
train). An MNIST epoch is 8000 // (128 * processes) steps (62 alone, 31 under
--ddp 2): each process takes its share of every epoch's permutation.

Output, one JSON object a line: {"event": "config", ...} first, {"event": "eval",
...} after each W2 --eval-at iteration, and last {"event": "summary", "median_ms":
..., "mean_ms": ..., "timed_steps": ..., ...}, which `artel bench train` reads.
Under --ddp only rank 0 prints; its step times are the ones reported.
"""
import argparse
import gzip
import json
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

ap = argparse.ArgumentParser(description="PyTorch training steps of artel's benchmark workloads")
ap.add_argument("--workload", required=True, choices=["mnist-mlp", "mnist-cnn", "shakespeare-char-gpt", "gpt2"])
ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (and OpenMP's) per process")
ap.add_argument("--blas-threads", type=int, default=None, help="OpenBLAS threads per process (default: --threads)")
ap.add_argument("--ddp", type=int, default=0, help="processes of DistributedDataParallel over gloo (0: one, no DDP)")
ap.add_argument("--grad-compression", choices=["none", "powersgd"], default="none",
                help="under --ddp: powersgd registers PyTorch's powerSGD_hook (error feedback, warm start)")
ap.add_argument("--powersgd-rank", type=int, default=4, help="its matrix_approximation_rank")
ap.add_argument("--powersgd-start-step", type=int, default=10, help="its start_powerSGD_iter")
ap.add_argument("--epochs", type=int, default=10, help="MNIST epochs")
ap.add_argument("--iters", type=int, default=2000, help="W2 and GPT-2 iterations")
ap.add_argument("--data-file", default=None, help="gpt2: uint16 token file (nanoGPT's raw layout), 90%% train")
ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                help="GPTs: bf16 = the forward under torch.autocast('cpu', torch.bfloat16)")
ap.add_argument("--eval-at", default="500,2000", help="W2 iterations after which the validation loss is measured")
ap.add_argument("--warmup", type=int, default=20, help="first steps left out of the timing statistics")
ap.add_argument("--lr", type=float, default=None, help="default: the workload's recipe")
ap.add_argument("--seed", type=int, default=1337)
ap.add_argument("--data-dir", default=os.path.normpath(os.path.join(HERE, "..", "..", "data")))
args = ap.parse_args()
if args.grad_compression != "none" and (args.ddp < 2 or args.workload not in ("shakespeare-char-gpt", "gpt2")):
    sys.exit("train.py: --grad-compression is for the GPT workloads under --ddp 2 or more")
if args.precision == "bf16" and args.workload not in ("shakespeare-char-gpt", "gpt2"):
    sys.exit("train.py: --precision bf16 is for the GPT workloads")
if args.blas_threads is None:
    args.blas_threads = args.threads
# Read when OpenBLAS and OpenMP load, that is when torch is imported: set them first.
os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
os.environ["OMP_NUM_THREADS"] = str(args.threads)

import torch                                            # noqa: E402
import torch.nn as nn                                   # noqa: E402
import torch.nn.functional as F                         # noqa: E402

sys.path.insert(0, HERE)
from gpt import GPT, GPTConfig, num_params              # noqa: E402

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081                  # data/mnist.h
MNIST_TRAIN = 8000                                      # the first 8000 test-set images train, the rest validate
MNIST_BATCH = 128
W2 = dict(batch=12, n_layer=4, n_head=4, n_embd=128, block_size=64, lr=1e-3, betas=(0.9, 0.99), clip=0.0)
GPT2 = dict(batch=4, n_layer=12, n_head=12, n_embd=768, block_size=256, lr=6e-4, betas=(0.9, 0.95), clip=1.0,
            vocab=50304)                                # GPT-2's 50257 padded to a multiple of 64, as --preset gpt2


def emit(record):
    print(json.dumps(record), flush=True)


# ---------------------------------------------------------------- data
def read_idx(path, magic):
    with gzip.open(path) as f:
        raw = f.read()
    if int.from_bytes(raw[0:4], "big") != magic:
        sys.exit(f"train.py: {path} is not an IDX file of magic {magic}")
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(magic & 0xFF)]
    data = torch.frombuffer(bytearray(raw[4 + 4 * len(dims):]), dtype=torch.uint8)
    return data.reshape(dims)


def load_mnist(data_dir):
    d = os.path.join(data_dir, "mnist-t10k")
    images = read_idx(os.path.join(d, "t10k-images-idx3-ubyte.gz"), 2051)       # (N, 28, 28) uint8
    labels = read_idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz"), 2049).long()  # (N,)
    x = (images.reshape(len(images), 784).float() / 255.0 - MNIST_MEAN) / MNIST_STD
    return (x[:MNIST_TRAIN], labels[:MNIST_TRAIN]), (x[MNIST_TRAIN:], labels[MNIST_TRAIN:])


def load_text(data_dir):
    with open(os.path.join(data_dir, "tinyshakespeare.txt"), "rb") as f:
        text = f.read()
    chars = sorted(set(text))                                     # artel's vocabulary: the bytes present, sorted
    lookup = torch.zeros(256, dtype=torch.long)
    lookup[torch.tensor(chars)] = torch.arange(len(chars))
    ids = lookup[torch.frombuffer(bytearray(text), dtype=torch.uint8).long()]
    n = int(0.9 * len(ids))
    return ids[:n], ids[n:], len(chars)


def load_tokens(path):
    """A nanoGPT-layout token file: uint16 ids, the first 90 % train (data::train_tokens)."""
    with open(path, "rb") as f:
        raw = f.read()
    ids = torch.frombuffer(bytearray(raw), dtype=torch.int16).long() & 0xFFFF
    n = int(0.9 * len(ids))
    return ids[:n], ids[n:]


# ---------------------------------------------------------------- models
def mlp():
    """models/mlp.h: net.0, net.2, net.4."""
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


class Cnn(nn.Module):
    """models/cnn.h: net.0 conv 1->6 5x5 pad 2, pool, net.3 conv 6->16 5x5, pool, 400-120-84-10."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),     # (B, 6, 14, 14)
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),               # (B, 16, 5, 5)
            nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

    def forward(self, x):
        return self.net(x.view(-1, 1, 28, 28))


# ---------------------------------------------------------------- timing
def stats(seconds, warmup):
    t = sorted(seconds[warmup:])
    if not t:
        sys.exit(f"train.py: no steps left after a warmup of {warmup} out of {len(seconds)}")
    return {"timed_steps": len(t), "median_ms": round(1e3 * t[len(t) // 2], 3),
            "mean_ms": round(1e3 * sum(t) / len(t), 3)}


def train_mnist(rank, world, model, log, base):
    (xtr, ytr), (xva, yva) = load_mnist(args.data_dir)
    recipe_lr = 0.05 if args.workload == "mnist-mlp" else 0.02
    lr = args.lr if args.lr is not None else recipe_lr
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    raw = model
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    steps_per_epoch = len(xtr) // (world * MNIST_BATCH)
    log(dict(base, event="config", params=num_params(raw), batch_per_process=MNIST_BATCH, lr=lr,
             optimizer="SGD(momentum=0.9)", steps_per_epoch=steps_per_epoch, epochs=args.epochs))
    gen = torch.Generator().manual_seed(args.seed)                # the same permutation in every process
    times, losses = [], []
    model.train()
    for _ in range(args.epochs):
        mine = torch.randperm(len(xtr), generator=gen)[rank::world]
        for s in range(steps_per_epoch):
            start = time.perf_counter()
            rows = mine[s * MNIST_BATCH:(s + 1) * MNIST_BATCH]
            loss = F.cross_entropy(model(xtr[rows]), ytr[rows])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - start)
            losses.append(loss.item())
    raw.eval()
    with torch.no_grad():
        accuracy = (raw(xva).argmax(1) == yva).float().mean().item()
    st = stats(times, args.warmup)
    log(dict(base, event="summary", steps=len(times), **st,
             samples_per_s=round(world * MNIST_BATCH / (st["median_ms"] / 1e3), 1),
             final_loss=round(losses[-1], 4), val_accuracy=round(accuracy, 4)))


def train_gpt(rank, world, log, base):
    shape = W2 if args.workload == "shakespeare-char-gpt" else GPT2
    if shape is W2:
        train_ids, val_ids, vocab = load_text(args.data_dir)
    else:
        if not args.data_file:
            sys.exit("train.py: --workload gpt2 needs --data-file")
        (train_ids, val_ids), vocab = load_tokens(args.data_file), GPT2["vocab"]
    B, T = shape["batch"], shape["block_size"]
    model = GPT(GPTConfig(vocab_size=vocab, n_layer=shape["n_layer"], n_head=shape["n_head"],
                          n_embd=shape["n_embd"], block_size=T))
    lr = args.lr if args.lr is not None else shape["lr"]
    decay = [p for p in model.parameters() if p.dim() >= 2]       # artel's AdamW: weight decay on >= 2 dims only
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=shape["betas"], eps=1e-8)
    raw = model
    if world > 1:
        powersgd = args.grad_compression == "powersgd"             # artel's --grad-compression powersgd, PyTorch's way
        if powersgd:
            # One bucket: the hook's second all-reduce (Q's) is issued from a
            # future's callback, and gloo's collectives must come in the same
            # order on every rank, which two buckets' callbacks do not keep.
            import torch.distributed as dist
            dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1024 if powersgd else 25)
        if powersgd:
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as hook
            state = hook.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                       start_powerSGD_iter=args.powersgd_start_step, min_compression_rate=2,
                                       use_error_feedback=True, warm_start=True, random_seed=args.seed)
            model.register_comm_hook(state, hook.powerSGD_hook)
    eval_at = sorted(int(x) for x in args.eval_at.split(",") if x)
    log(dict(base, event="config", params=num_params(raw), vocab=vocab, n_layer=shape["n_layer"],
             n_head=shape["n_head"], n_embd=shape["n_embd"], block_size=T, batch_per_process=B, lr=lr,
             betas=list(shape["betas"]), weight_decay=0.1, grad_clip=shape["clip"], precision=args.precision,
             grad_compression=args.grad_compression,
             iters=args.iters, eval_at=eval_at))
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16")
    gen = torch.Generator().manual_seed(args.seed + 1000 * rank)  # each process its own batches

    def batch(ids, g):
        starts = torch.randint(len(ids) - T, (B,), generator=g)
        x = torch.stack([ids[i:i + T] for i in starts])
        y = torch.stack([ids[i + 1:i + 1 + T] for i in starts])
        return x, y

    def val_loss():
        g = torch.Generator().manual_seed(4242)                  # the same 20 batches every time
        raw.eval()
        with torch.no_grad(), autocast:
            total = sum(raw(*batch(val_ids, g))[1].float().item() for _ in range(20))
        raw.train()
        return total / 20

    times, losses = [], []
    model.train()
    for it in range(1, args.iters + 1):
        start = time.perf_counter()
        x, y = batch(train_ids, gen)
        with autocast:
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if shape["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), shape["clip"])
        opt.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        if it in eval_at:                                         # outside the timed step
            log(dict(base, event="eval", iter=it, val_loss=round(val_loss(), 4), train_loss=round(losses[-1], 4)))
    st = stats(times, args.warmup)
    log(dict(base, event="summary", iters=len(times), **st,
             tokens_per_s=round(world * B * T / (st["median_ms"] / 1e3), 1), final_loss=round(losses[-1], 4)))


def run(rank, world, port):
    torch.set_num_threads(args.threads)
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    log = emit if rank == 0 else (lambda record: None)
    base = {"workload": args.workload, "threads": args.threads, "blas_threads": args.blas_threads,
            "processes": world, "torch": torch.__version__, "precision": args.precision}
    torch.manual_seed(args.seed)                                  # the same initial weights in every process
    if args.workload in ("shakespeare-char-gpt", "gpt2"):
        train_gpt(rank, world, log, base)
    else:
        train_mnist(rank, world, mlp() if args.workload == "mnist-mlp" else Cnn(), log, base)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    if args.ddp > 1:
        import torch.multiprocessing as mp
        mp.spawn(run, args=(args.ddp, free_port()), nprocs=args.ddp, join=True)
    else:
        run(0, 1, 0)
