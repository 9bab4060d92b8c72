#!/usr/bin/env python3
"""PyTorch peer for meshtrain's GPT training-throughput benchmark.

The model is meant to be the same as meshtrain's GPT:
  byte-level tokens (vocab 256; --vocab N: random ids below N, e.g. GPT-2's 50257),
  learned token and position embeddings,
  L pre-LN blocks  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x)),
  causal multi-head attention with one fused qkv Linear (bias) and an
  output projection (bias), MLP d -> 4d -> d with biases and GELU (tanh
  approximation), a final LayerNorm, and an output layer tied to the token
  embedding (no bias). Loss: cross-entropy over next bytes. Optimizer: AdamW
  (lr 3e-4, betas 0.9/0.95, weight decay 0.1, eps 1e-8).

Precision (--precision): fp32 (the default) runs everything in float32.
bf16 runs the forward and the loss under torch.autocast("cpu",
dtype=torch.bfloat16), PyTorch's usual bf16 mixed precision on CPU: the
matrix products (linear layers, the tied output layer, attention) take bf16
operands, the ops on autocast's fp32 list (the cross-entropy among them) run
in float32, the rest in the dtype of their inputs; backward follows the
forward's dtypes. The weights (fp32 master weights), their gradients and the
AdamW state stay float32; the model is never converted with .to(bfloat16).
With --mode compile the compiled model is called inside the autocast region
(Dynamo traces autocast into the graph). The result says "precision" and,
for bf16, "bf16": "autocast", and whether this CPU has bf16 instructions
(avx512_bf16, AMX) as PyTorch sees them. autocast() and precision_info() are
shared with bench/peers/torch_ddp_gpt.py and torch_zero_gpt.py.

Throughput: median tokens/s (batch*ctx / step time) over the timed steps,
after --warmup untimed steps (these include torch.compile's compilation).

FLOPs per token = 6*N + 12*L*d*ctx, where N counts the weights of every
matrix product and embedding, each once:
  N = L*(3d*d [qkv] + d*d [attn out] + 4d*d [mlp up] + 4d*d [mlp down])
      + V*d [token embedding = tied output layer, counted once; V = 256]
      + ctx*d [position embedding]
    = 12*L*d^2 + (V + ctx)*d.
Biases and LayerNorm gains/biases are not in N. (The position embedding and
the tied embedding's lookup do no matmul work, but they are counted the way
the benchmark counts them; 12*L*d*ctx is the attention score/value work.)

Thread pools: OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS (and
OMP_WAIT_POLICY when --wait is given) are set from the arguments before torch
is imported, then torch.set_num_threads is called. OPENBLAS_CORETYPE is left
as the environment has it.

Runs with the current PyTorch (bench/.venv) and with Debian's 1.13
(/usr/bin/python3); 1.13 has neither torch.compile nor
F.scaled_dot_product_attention, so attention falls back to the manual form
(--precision bf16 runs there too: 1.13 has torch.autocast on CPU).
"""
import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", "--vocab-size", dest="vocab", type=int, default=256,
                   help="vocabulary size (256: bytes; larger, e.g. GPT-2's 50257: random token ids)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--attn", choices=["auto", "sdpa", "manual"], default="auto",
                   help="auto: F.scaled_dot_product_attention where it exists")
    p.add_argument("--wait", choices=["passive", "active", "unset"], default="passive",
                   help="OMP_WAIT_POLICY to set before torch loads")
    p.add_argument("--optim", choices=["auto", "foreach", "fused", "plain"], default="auto",
                   help="AdamW implementation (auto: torch's default)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16); "
                        "weights, gradients and AdamW state stay fp32")
    p.add_argument("--clip", type=float, default=0.0,
                   help="clip the gradients' global norm to this (meshtrain's optimizer.grad_clip, "
                        "default 1.0 there); 0: no clipping")
    p.add_argument("--data", default=None,
                   help="text file of bytes to sample from (default data/kjv.txt "
                        "if present, else random bytes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON line")
    return p.parse_args(argv)


args = parse_args()

# Thread pools must be bounded before torch (and its OpenMP / OpenBLAS / MKL)
# loads: torch.set_num_threads alone does not bound OpenBLAS's own pool.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
if args.wait == "unset":
    os.environ.pop("OMP_WAIT_POLICY", None)
else:
    os.environ["OMP_WAIT_POLICY"] = args.wait.upper()
# Inductor's parallel compile workers would compete for the 2 cores while
# compiling; compile time is outside the timed steps either way.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.threads)

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")
use_sdpa = {"auto": HAS_SDPA, "sdpa": True, "manual": False}[args.attn]
if use_sdpa and not HAS_SDPA:
    sys.exit("torch %s has no F.scaled_dot_product_attention; use --attn manual" % torch.__version__)
if args.mode == "compile" and not hasattr(torch, "compile"):
    sys.exit("torch %s has no torch.compile" % torch.__version__)
if args.precision == "bf16" and not hasattr(torch, "autocast"):
    sys.exit("torch %s has no torch.autocast" % torch.__version__)

VOCAB = args.vocab


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        assert d % heads == 0
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d, bias=True)   # fused q, k, v
        self.c_proj = nn.Linear(d, d, bias=True)
        if not use_sdpa:
            mask = torch.tril(torch.ones(ctx, ctx, dtype=torch.bool))
            self.register_buffer("mask", mask.view(1, 1, ctx, ctx), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        if use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d, bias=True)
        self.c_proj = nn.Linear(4 * d, d, bias=True)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, ctx)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, layers, d, heads, ctx):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([Block(d, heads, ctx) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.register_buffer("pos", torch.arange(ctx), persistent=False)
        self.apply(self._init)
        for name, p in self.named_parameters():   # GPT-2's scaled residual init
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / (2 * layers) ** 0.5)

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(self.pos[:T])
        for b in self.blocks:
            x = b(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # tied output layer, no bias
        return F.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1))


def timing_summary(times, tokens, fpt, t_first, warm_s, losses):
    """The result fields both PyTorch peers report: median tokens/s over the
    timed steps (tokens per step / step time), its range, GFLOP/s, and the
    untimed start-up."""
    tps = [tokens / t for t in times]
    med = statistics.median(tps)
    return {
        "tokens_per_s": round(med, 1),
        "tokens_per_s_min": round(min(tps), 1),
        "tokens_per_s_max": round(max(tps), 1),
        "gflops": round(med * fpt / 1e9, 2),
        "step_ms_median": round(1e3 * statistics.median(times), 2),
        "first_step_s": round(t_first, 2) if t_first is not None else None,
        "warmup_s": round(warm_s, 2),
        "loss_first": round(losses[0], 4) if losses else None,
        "loss_last": round(losses[-1], 4) if losses else None,
    }


def print_result(res, as_json):
    if as_json:
        print(json.dumps(res), flush=True)
    else:
        for k, v in res.items():
            print("%-26s %s" % (k, v))


def flops_per_token(layers, d, ctx):
    n = 12 * layers * d * d + (VOCAB + ctx) * d
    return n, 6 * n + 12 * layers * d * ctx


def make_optimizer(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]       # matrices, embeddings
    no_decay = [p for p in model.parameters() if p.dim() < 2]     # biases, LayerNorm
    groups = [{"params": decay, "weight_decay": 0.1},
              {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    if args.optim == "foreach":
        kw["foreach"] = True
    elif args.optim == "fused":
        kw["fused"] = True
    elif args.optim == "plain":
        kw["foreach"] = False
    return torch.optim.AdamW(groups, **kw)


def clip_gradients(params, max_norm, group=None):
    """Clips the gradients of `params` to a global norm of max_norm (> 0), as
    torch.nn.utils.clip_grad_norm_ with foreach kernels; with a process group
    the norm is over every rank's gradients (the squares all-reduced), as
    torchtitan clips a pipeline's stages. Returns the norm before clipping."""
    import torch.distributed as dist
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads, 2.0, foreach=True)
    if group is not None:
        squares = norm.double() ** 2
        dist.all_reduce(squares, group=group)
        norm = squares.sqrt().float()
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm, foreach=True)
    return norm


def autocast(precision=None):
    """The context for the forward and the loss at `precision` (default --precision):
    torch.autocast("cpu", dtype=torch.bfloat16) for bf16, none for fp32."""
    if (precision or args.precision) == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def cpu_bf16_info():
    """What PyTorch finds of bf16 support on this CPU (None where this torch cannot tell):
    avx512_bf16, AMX tiles, and whether oneDNN (mkldnn) runs bf16 here at all."""
    def ask(f):
        try:
            return bool(f())
        except Exception:  # noqa: BLE001  (absent in older releases)
            return None
    cpu = getattr(torch, "cpu", None)
    return {
        "cpu_avx512_bf16": ask(lambda: cpu._is_avx512_bf16_supported()),
        "cpu_amx_tile": ask(lambda: cpu._is_amx_tile_supported()),
        "mkldnn_bf16": ask(lambda: torch.ops.mkldnn._is_mkldnn_bf16_supported()),
    }


def precision_info(precision=None, bf16="autocast"):
    """The result fields for the precision: "precision", and for bf16 how it was done
    (`bf16`) and the CPU's bf16 support."""
    precision = precision or args.precision
    if precision != "bf16":
        return {"precision": precision}
    return {"precision": precision, "bf16": bf16, **cpu_bf16_info()}


def load_data():
    path = args.data
    if path is None:
        here = os.path.dirname(os.path.abspath(__file__))
        cand = os.path.join(here, "..", "..", "data", "kjv.txt")
        path = cand if os.path.exists(cand) else ""
    if path and VOCAB == 256:
        with open(path, "rb") as f:
            raw = f.read()
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).long(), path
    g = torch.Generator().manual_seed(args.seed + 1)
    return torch.randint(0, VOCAB, (1 << 20,), generator=g), "random bytes" if VOCAB == 256 else "random ids"


def blas_info():
    """Names the BLAS libraries loaded and, for OpenBLAS, the kernel set it chose."""
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({w for w in f.read().split() if w.startswith("/") and
                           any(k in w.lower() for k in ("openblas", "mkl", "dnnl", "blis"))})
    except OSError:
        return {}
    # (PyPI wheels link MKL statically, so it does not show here; numpy's
    # OpenBLAS may show though torch does not use it.)
    info = {"blas_libs_loaded": [os.path.basename(l) for l in libs]}
    for l in libs:
        if "libopenblas" in l:
            try:
                import ctypes
                lib = ctypes.CDLL(l)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                info["openblas_core"] = lib.openblas_get_corename().decode()
            except (OSError, AttributeError):
                pass
    return info


def main():
    torch.manual_seed(args.seed)
    model = GPT(args.layers, args.d, args.heads, args.ctx)
    opt = make_optimizer(model)
    data, data_name = load_data()
    gen = torch.Generator().manual_seed(args.seed + 2)
    offs = torch.arange(args.ctx + 1)

    def batch():
        starts = torch.randint(0, data.numel() - args.ctx - 1, (args.batch, 1), generator=gen)
        chunk = data[starts + offs]
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    step_fn = model
    if args.mode == "compile":
        step_fn = torch.compile(model)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = step_fn(x, y)
        loss.backward()
        if args.clip > 0:
            clip_gradients(list(model.parameters()), args.clip)
        opt.step()
        return loss.item()

    tokens = args.batch * args.ctx
    t_first = None
    warm_s = 0.0
    for i in range(args.warmup):
        x, y = batch()
        t0 = time.perf_counter()
        step(x, y)
        dt = time.perf_counter() - t0
        if i == 0:
            t_first = dt
        warm_s += dt
    times, losses = [], []
    for _ in range(args.steps):
        x, y = batch()
        t0 = time.perf_counter()
        losses.append(step(x, y))
        times.append(time.perf_counter() - t0)

    n, fpt = flops_per_token(args.layers, args.d, args.ctx)
    res = {
        "peer": "pytorch",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "mode": args.mode,
        **precision_info(),
        "attn": "sdpa" if use_sdpa else "manual",
        "optim": args.optim,
        "clip": args.clip,
        "threads": args.threads,
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset"),
        **blas_info(),
        "layers": args.layers, "d": args.d, "heads": args.heads,
        "ctx": args.ctx, "batch": args.batch,
        "steps": args.steps, "warmup": args.warmup,
        "data": data_name,
        "params_total": sum(p.numel() for p in model.parameters()),
        "vocab": VOCAB,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "N": n,
        "flops_per_token": fpt,
        **timing_summary(times, tokens, fpt, t_first, warm_s, losses),
    }
    print_result(res, args.json)


if __name__ == "__main__":
    main()
