#!/usr/bin/env python3
"""PyTorch's GPT-2 124M training rate on one GPU: the peer for meshtrain's GPU path.

nanoGPT's model: L=12 blocks, C=768, 12 heads, T=1024, V=50257, learned
positions, biases, GELU (tanh form), embeddings tied to the classifier. One
training step = bf16 autocast forward (fp32 master weights), flash attention
through F.scaled_dot_product_attention(is_causal=True) with only the flash
backend enabled, cross-entropy in fp32, backward, fused AdamW. Batch 16 of
synthetic tokens (one fixed random batch: the data path is not measured).
Modes: eager, or torch.compile of the model (default options). Under
torchrun (WORLD_SIZE > 1) each process takes GPU LOCAL_RANK and its own
batch, and --parallel wraps the model: DDP (NCCL, its default buckets) or
FSDP2 (fully_shard on every block, then the root: ZeRO-3); the rates
printed (by rank 0) are the whole job's.

A few warm-up steps (the first compiles), then timed steps between two
synchronisations. Prints one JSON object on stdout (human lines on stderr):
tokens/s and MFU, counting 6*N_matmul + 12*L*C*T FLOPs per token
(meshtrain's count: N_matmul = the weights of the linear layers, classifier
included; llm.c counts 6*N_all + 6*L*C*T) against 989 TFLOP/s, the dense
bf16 peak of an H100 SXM / H200.
Exit status 3 where PyTorch sees no GPU.

Usage: torch_gpt2.py --mode eager|compile [--batch 16] [--warmup 3] [--steps 10]
       torchrun --nproc_per_node N torch_gpt2.py --mode compile --parallel ddp|fsdp2
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

PEAK_TFLOPS = 989.0


class CausalSelfAttention(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # (B, T, C) each
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, NH, T, HS)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, NH, T, HS)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.fc = nn.Linear(C, 4 * C)
        self.proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_head)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, C, n_head, block_size, vocab_size):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, C)
        self.wpe = nn.Embedding(block_size, C)
        self.blocks = nn.ModuleList(Block(C, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))


def log(msg):
    print(f"torch_gpt2: {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["eager", "compile"], required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--parallel", choices=["none", "ddp", "fsdp2"], default="none",
                    help="under torchrun: how the processes share the work")
    args = ap.parse_args()
    L, C, NH, T, V = 12, 768, 12, 1024, 50257

    if not torch.cuda.is_available():
        log(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU")
        return 3
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        torch.distributed.init_process_group("nccl")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    # No TF32 switches: under bf16 autocast every matrix product is bf16
    # already, and PyTorch 2.9+ refuses torch.compile when the legacy
    # allow_tf32 flags are mixed with its newer precision settings.
    # Flash attention only: fail rather than time another backend.
    torch.backends.cuda.enable_flash_sdp(True)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_math_sdp(False)
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)

    model = GPT(L, C, NH, T, V).to(dev)
    n_matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    if world > 1 and args.parallel == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    elif world > 1 and args.parallel == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
    flops_per_token = 6 * n_matmul + 12 * L * C * T
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if args.mode == "compile" else model

    tokens = torch.randint(0, V, (args.batch, T + 1), device=dev)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    log(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__} (CUDA {torch.version.cuda}), "
        f"mode {args.mode}, batch {args.batch}x{T}")
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first_step_s = time.perf_counter() - t0
    log(f"first step {first_step_s:.1f} s")
    for _ in range(args.warmup - 1):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    final_loss = loss.item()

    tokens_per_s = world * args.batch * T * args.steps / elapsed
    mfu = tokens_per_s * flops_per_token / (PEAK_TFLOPS * 1e12 * world)  # per GPU
    result = {
        "mode": args.mode,
        "parallel": args.parallel if world > 1 else "none",
        "processes": world,
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "batch": args.batch, "seq": T, "layers": L, "width": C, "heads": NH, "vocab": V,
        "n_matmul": n_matmul,
        "flops_per_token": flops_per_token,
        "flop_count": "6*N_matmul + 12*L*C*T",
        "warmup_steps": args.warmup, "timed_steps": args.steps,
        "first_step_s": round(first_step_s, 2),
        "step_ms": round(1e3 * elapsed / args.steps, 2),
        "tokens_per_s": round(tokens_per_s),
        "mfu_vs_989": round(mfu, 4),
        "loss": round(final_loss, 4) if math.isfinite(final_loss) else None,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "attention": "F.scaled_dot_product_attention, flash backend only",
    }
    if rank == 0:
        log(f"{result['tokens_per_s']} tokens/s, {result['step_ms']} ms/step, MFU {100 * mfu:.1f}% of 989 TFLOP/s")
        print(json.dumps(result))
    if world > 1:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
