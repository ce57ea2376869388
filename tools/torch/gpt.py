"""artel's GPT in PyTorch: the model of src/artel/models/gpt.{h,cpp} and
gpt_block.{h,cpp}, written to compute exactly what artel computes, so artel's
weights load into it as they are and its logits, loss and gradients can be
compared with artel's (tests/reference/) and its training speed measured next
to artel's (tools/torch/train.py).

What artel does, and therefore this model:
  x = wte[ids] + wpe[0..T)                                   (B, T, C)
  x = drop(x)
  per block:  x = x + resid_dropout(c_proj(attn(ln_1(x))))
              x = x + dropout(c_proj(gelu(c_fc(ln_2(x)))))
  logits = ln_f(x) @ wte.T                                   (B, T, V), lm_head tied to wte, no bias
  loss = cross_entropy(logits, targets), the mean over all B*T positions
with
  - LayerNorm eps 1e-5, a weight and a bias (torch.nn.LayerNorm's defaults);
  - GELU in its exact erf form, x*Phi(x) (torch.nn.GELU(), not approximate='tanh');
  - attention: q, k, v = split(c_attn(x)) along channels, head h takes channels
    h*hs .. (h+1)*hs-1 of each, softmax(q k^T / sqrt(hs)) under the causal mask
    j <= i, no dropout on the probabilities (artel's fused kernel never
    materialises them, so it has none: nanoGPT's attn_dropout is left out);
  - Linear weights [out, in] with biases everywhere but lm_head;
  - logits at every position (nanoGPT computes only the last one when no
    targets are given; artel always computes all).

Parameter names are nanoGPT's and artel's: transformer.wte.weight,
transformer.wpe.weight, transformer.h.{i}.{ln_1, attn.c_attn, attn.c_proj, ln_2,
mlp.c_fc, mlp.c_proj}.{weight, bias}, transformer.ln_f.{weight, bias};
lm_head.weight is the same tensor as transformer.wte.weight (artel writes it
once, under the wte name; load_weights accepts either).

The initialisation is artel's distribution (N(0, 0.02) for matrices and
embeddings, N(0, 0.02/sqrt(2*n_layer)) for c_proj weights, zero biases,
LayerNorm ones and zeros) from torch's generator, so not artel's numbers: to
start from the same numbers, load artel's init.safetensors.

  from gpt import GPT, GPTConfig
  model = GPT(GPTConfig(vocab_size=65))
  model.load_weights(read_safetensors("runs/gpt/init.safetensors")[0])
  logits, loss = model(ids, targets)          # ids, targets (B, T) int64
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    """artel's models::ModelConfig for kind "gpt" (the defaults are W2's baby GPT)."""
    vocab_size: int = 65
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 64
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0, "n_head must divide n_embd"
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        B, T, C = x.size()
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)                       # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)               # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        # torch 1.13 has no F.scaled_dot_product_attention: the explicit form.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))        # (B, nh, T, T)
        # The mask j <= i, made here rather than kept as a bool buffer, which DDP (gloo) cannot broadcast.
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril_()
        att = att.masked_fill(~causal, float("-inf"))
        att = F.softmax(att, dim=-1)                                    # no dropout here (see the top)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)        # (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.gelu = nn.GELU()                                           # exact erf form, as artel
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=1e-5)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, eps=1e-5),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight               # tied: one tensor, two names
        self.init_weights()

    @torch.no_grad()
    def init_weights(self):
        """artel's init (Gpt::init_weights), drawn from torch's generator."""
        resid_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():                         # the tied tensor once, as wte
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, resid_std)
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            else:
                nn.init.ones_(p)

    def forward(self, ids, targets=None):
        """ids (B, T) int64, T <= block_size -> logits (B, T, V) and, with targets (B, T), the mean loss."""
        B, T = ids.size()
        assert T <= self.config.block_size, f"sequence length {T} exceeds block_size {self.config.block_size}"
        pos = torch.arange(T, dtype=torch.long, device=ids.device)
        x = self.transformer.drop(self.transformer.wte(ids) + self.transformer.wpe(pos))   # (B, T, C)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))                 # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def load_weights(self, tensors):
        """Copies a name -> tensor dict (artel's state dict: lm_head.weight under
        transformer.wte.weight, or both) into the parameters, converting the dtype.
        Raises ValueError naming every missing, unexpected or mis-shaped tensor."""
        params = dict(self.named_parameters())                         # wte once; lm_head.weight is its alias
        tensors = dict(tensors)
        if "lm_head.weight" in tensors:
            alias = tensors.pop("lm_head.weight")
            if "transformer.wte.weight" not in tensors:
                tensors["transformer.wte.weight"] = alias
        missing = sorted(set(params) - set(tensors))
        unexpected = sorted(set(tensors) - set(params))
        wrong = sorted(f"{n} {tuple(tensors[n].shape)} vs {tuple(p.shape)}"
                       for n, p in params.items() if n in tensors and tensors[n].shape != p.shape)
        if missing or unexpected or wrong:
            raise ValueError(f"weights do not fit GPT{self.config}: missing {missing}, unexpected {unexpected}, "
                             f"wrong shapes {wrong}")
        for n, p in params.items():
            p.copy_(tensors[n])


def num_params(model):
    """Elements of the parameters, the tied tensor counted once (artel's Module::num_parameters)."""
    return sum(p.numel() for p in model.parameters())
