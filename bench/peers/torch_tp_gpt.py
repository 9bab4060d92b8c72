#!/usr/bin/env python3
"""PyTorch tensor-parallel peer for meshtrain's tensor-parallel benchmark (bench/tensor_parallel.sh).

Trains the GPT of bench/peers/torch_gpt.py (same model, init, AdamW settings
and FLOP accounting; imported from there) with PyTorch's own tensor
parallelism, torch.distributed.tensor.parallel.parallelize_module, over a 1-D
DeviceMesh("cpu", (nproc,)) on the gloo backend: --nproc processes x
--threads threads, all ranks one tensor-parallel group working on the same
batch (--batch sequences, sampled with torch_gpt.py's seed, so the losses are
the single-process run's).

The plan, per block (Megatron-LM's, as in PyTorch's TP tutorial):
  attn.c_attn  ColwiseParallel   rank r holds q, k and v of heads
                                 r*H/T .. (r+1)*H/T: the fused weight's rows
                                 are reordered from [q | k | v] to
                                 [q_0 k_0 v_0 | q_1 k_1 v_1 | ...] before
                                 sharding, so one GEMM per rank still makes
                                 its heads' q, k and v
  attn.c_proj  RowwiseParallel   partial outputs all-reduced, bias added once
  mlp.c_fc     ColwiseParallel   4d/T hidden units per rank
  mlp.c_proj   RowwiseParallel
Attention runs on the rank's n_head/T heads (the view with -1 heads, as the
tutorial does). LayerNorms and residuals are replicated. --vocab picks the
embedding / tied output layer:
  replicated  wte, wpe, ln_f and the tied head whole on every rank (each
              rank computes the same logits; vocab 256 makes them cheap)
  parallel    wte vocabulary-parallel (RowwiseParallel on the embedding:
              each rank looks up its half of the vocabulary, the partial
              embeddings all-reduced), the tied head producing logits sharded
              on the vocabulary and the cross-entropy under
              torch.distributed.tensor.parallel.loss_parallel() (forward and
              backward), which never gathers the logits
Gradients of replicated parameters need no extra synchronisation: their
inputs and output gradients are the same on every rank (the column-parallel
linears' input gradients are all-reduced by the plan).

--mode compile wraps the whole parallelized model in torch.compile (if that
fails at the first step, each block is compiled instead, as torchtitan does;
"compiled" in the result says which). --optim as torch_gpt.py (AdamW over
the DTensor parameters; auto = PyTorch's default for CPU tensors).

Started without RANK in the environment, it starts --nproc copies of itself
like torchrun (bench/peers/torch_ddp_gpt.py's launcher); under torchrun each
copy is a rank directly.

Precision (--precision, as bench/peers/torch_gpt.py): fp32 (the default), or
bf16: each rank's forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16), weights, gradients and AdamW state fp32. The result
says "precision" (and "bf16": "autocast").

Throughput: global tokens/s = batch * ctx / step time (all ranks share one
batch), median over the timed steps after --warmup untimed ones (these
include compilation); step time is rank 0's (each step ends with loss.item();
the ranks run in lock-step through the per-layer all-reduces). Memory, per
rank: peak RSS (getrusage), and the local bytes of parameters and of AdamW
state after the run (a DTensor's local shard), beside the whole model's
parameter bytes. Rank 0 prints one JSON line with --json.
"""
import argparse
import inspect
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_ddp_gpt  # noqa: E402  (its launcher; imports no torch)

MiB = 1 << 20


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=2, help="ranks = tensor-parallel ways")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--batch", type=int, default=8, help="batch (shared by all ranks)")
    p.add_argument("--steps", type=int, default=12, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--vocab", choices=["replicated", "parallel"], default="replicated",
                   help="embedding / tied output layer: whole on every rank, or vocabulary-parallel "
                        "with loss_parallel")
    p.add_argument("--attn", choices=["auto", "sdpa", "manual"], default="sdpa")
    p.add_argument("--wait", choices=["passive", "active", "unset"], default="unset")
    p.add_argument("--optim", choices=["auto", "foreach", "fused", "plain"], default="auto")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument("--vocab-size", type=int, default=256, help="as torch_gpt.py's --vocab")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=900, help="seconds (launcher: whole run)")
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def worker(args):
    # torch_gpt parses its own arguments at import and bounds the thread pools
    # (OMP/OpenBLAS/MKL) before torch loads; give it the model and thread settings.
    sys.argv = [os.path.join(HERE, "torch_gpt.py"), "--layers", str(args.layers), "--d", str(args.d),
                "--heads", str(args.heads), "--ctx", str(args.ctx), "--batch", str(args.batch),
                "--threads", str(args.threads), "--wait", args.wait, "--attn", args.attn,
                "--optim", args.optim, "--precision", args.precision, "--seed", str(args.seed),
                "--vocab", str(args.vocab_size)]
    import torch_gpt as tg  # noqa: E402  (imports torch)
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from datetime import timedelta
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, loss_parallel,
                                                   parallelize_module)

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    tp = world
    if args.heads % tp or args.d % tp:
        sys.exit("torch_tp_gpt: heads (%d) and d (%d) must divide by the %d ranks" % (args.heads, args.d, tp))
    dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout))
    mesh = init_device_mesh("cpu", (tp,), mesh_dim_names=("tp",))
    hd = args.d // args.heads

    def attn_forward(self, x):
        """torch_gpt's attention on this rank's heads: c_attn's output is (B, T, 3*C/tp),
        this rank's q, k and v side by side (see interleave_qkv)."""
        B, T, _ = x.shape
        q, k, v = self.c_attn(x).split(self.local_width, dim=2)  # each (B, T, C/tp)
        q = q.view(B, T, -1, hd).transpose(1, 2)                  # (B, H/tp, T, hd)
        k = k.view(B, T, -1, hd).transpose(1, 2)
        v = v.view(B, T, -1, hd).transpose(1, 2)
        if tg.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, self.local_width)
        return self.c_proj(y)                                     # row-parallel: all-reduced (B, T, C)

    def gpt_forward(self, idx, targets):
        """torch_gpt's GPT.forward; with a vocabulary-parallel wte the tied head makes logits
        sharded on the vocabulary (a DTensor) for loss_parallel's cross-entropy."""
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(self.pos[:T])
        for b in self.blocks:
            x = b(x)
        x = self.ln_f(x)
        w = self.wte.weight
        if isinstance(w, DTensor):
            x = DTensor.from_local(x, w.device_mesh, [Replicate()], run_check=False)
        logits = F.linear(x, w)  # (B, T, V), Shard(2) when w is Shard(0)
        return F.cross_entropy(logits.view(-1, tg.VOCAB), targets.reshape(-1))

    @torch.no_grad()
    def interleave_qkv(linear):
        """Reorders the fused [q | k | v] output rows to [q_0 k_0 v_0 | q_1 k_1 v_1 | ...]
        so ColwiseParallel's even split along the output gives rank r its heads' q, k, v."""
        C = args.d
        for p in (linear.weight, linear.bias):
            q, k, v = p.split(C, dim=0)
            parts = [torch.cat([q.chunk(tp)[r], k.chunk(tp)[r], v.chunk(tp)[r]]) for r in range(tp)]
            p.copy_(torch.cat(parts))

    # this process trains only the parallelized model: torch_gpt's classes take the forwards above
    tg.GPT.forward = gpt_forward
    tg.CausalSelfAttention.forward = attn_forward

    def build():
        torch.manual_seed(args.seed)  # the same initial weights on every rank, torch_gpt.py's
        model = tg.GPT(args.layers, args.d, args.heads, args.ctx)
        full_param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        params_total = sum(p.numel() for p in model.parameters())
        for b in model.blocks:
            interleave_qkv(b.attn.c_attn)
            b.attn.local_width = args.d // tp
            parallelize_module(b, mesh, {
                "attn.c_attn": ColwiseParallel(),
                "attn.c_proj": RowwiseParallel(),
                "mlp.c_fc": ColwiseParallel(),
                "mlp.c_proj": RowwiseParallel(),
            })
        if args.vocab == "parallel":
            # the embedding split on the vocabulary: each rank's lookups of its rows, summed
            parallelize_module(model, mesh, {"wte": RowwiseParallel(input_layouts=Replicate())})
        return model, full_param_bytes, params_total

    def make_optimizer(model):
        """torch_gpt's AdamW (its groups: the matrices' test p.dim() >= 2 sees a DTensor's
        global shape), each group split into DTensor and plain parameters: the foreach and
        fused implementations take one group's tensors in one call, which cannot mix the
        two kinds ("got mixed torch.Tensor and DTensor"). The update is the same."""
        ref = tg.make_optimizer(model)
        cls = type(ref)
        accepted = inspect.signature(cls.__init__).parameters  # ref.defaults has keys __init__ does not take
        kw = {k: v for k, v in ref.defaults.items() if k in accepted and k != "params"}
        groups = []
        for g in ref.param_groups:
            settings = {k: v for k, v in g.items() if k in kw and v != kw[k]}
            for kind in (True, False):
                ps = [p for p in g["params"] if isinstance(p, DTensor) == kind]
                if ps:
                    groups.append(dict(settings, params=ps))
        return cls(groups, **kw)

    model, full_param_bytes, params_total = build()
    opt = make_optimizer(model)
    data, data_name = tg.load_data()
    gen = torch.Generator().manual_seed(args.seed + 2)  # torch_gpt.py's stream, the same on every rank
    offs = torch.arange(args.ctx + 1)

    def batch():
        starts = torch.randint(0, data.numel() - args.ctx - 1, (args.batch, 1), generator=gen)
        chunk = data[starts + offs]
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    compiled = None
    step_fn = model
    if args.mode == "compile":
        step_fn, compiled = torch.compile(model), "whole model"

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        if args.vocab == "parallel":
            with loss_parallel():  # the cross-entropy and its backward on vocabulary shards
                with tg.autocast():
                    loss = step_fn(x, y)
                loss.backward()
        else:
            with tg.autocast():
                loss = step_fn(x, y)
            loss.backward()
        opt.step()
        if isinstance(loss, DTensor):
            loss = loss.full_tensor()
        return loss.item()

    t_first, warm_s, warm_losses = None, 0.0, []
    for i in range(args.warmup):
        x, y = batch()
        t0 = time.perf_counter()
        if i == 0 and args.mode == "compile":
            try:
                warm_losses.append(step(x, y))
            except Exception as e:  # noqa: BLE001  whole-model compile failed: compile each block
                if rank == 0:
                    print("torch_tp_gpt: torch.compile of the whole model failed (%s: %s); compiling "
                          "each block" % (type(e).__name__, " ".join(str(e).split())[:300]),
                          file=sys.stderr, flush=True)
                # the failed step may have left gradients but made no update (opt.step comes last)
                torch._dynamo.reset()
                for b in model.blocks:
                    b.compile()
                step_fn, compiled = model, "each block"
                warm_losses.append(step(x, y))
        else:
            warm_losses.append(step(x, y))
        dt = time.perf_counter() - t0
        t_first = dt if i == 0 else t_first
        warm_s += dt
    dist.barrier()
    times, losses = [], []
    for _ in range(args.steps):
        x, y = batch()
        t0 = time.perf_counter()
        losses.append(step(x, y))
        times.append(time.perf_counter() - t0)

    def local_bytes(tensors):
        local_part = (t.to_local() if isinstance(t, DTensor) else t for t in tensors)
        return sum(t.numel() * t.element_size() for t in local_part)

    mem = {
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
        "param_mib": local_bytes(model.parameters()) / MiB,
        "optim_state_mib": local_bytes(t for s in opt.state.values() for t in s.values()
                                       if torch.is_tensor(t) and t.dim() > 0) / MiB,
    }
    gathered = [None] * world
    dist.all_gather_object(gathered, (times, mem))
    dist.destroy_process_group()
    if rank != 0:
        return
    all_times = [g[0] for g in gathered]
    n, fpt = tg.flops_per_token(args.layers, args.d, args.ctx)
    tokens = args.batch * args.ctx
    slowest = [max(ts) for ts in zip(*all_times)]
    full_mib = full_param_bytes / MiB
    res = {
        "peer": "pytorch-tp", "torch": torch.__version__, "backend": args.backend,
        "nproc": world, "tp": tp, "threads": args.threads, "torch_threads": torch.get_num_threads(),
        "mode": args.mode, "compiled": compiled, "vocab": args.vocab, **tg.precision_info(),
        "attn": "sdpa" if tg.use_sdpa else "manual", "optim": args.optim,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "layers": args.layers, "d": args.d, "heads": args.heads, "ctx": args.ctx,
        "batch": args.batch, "global_batch": args.batch,
        "steps": args.steps, "warmup": args.warmup, "data": data_name,
        "params_total": params_total, "N": n, "flops_per_token": fpt,
        "tokens_per_s_slowest_rank": round(statistics.median(tokens / t for t in slowest), 1),
        "full_param_mib": round(full_mib, 2),
        **{k + "_per_rank": [round(g[1][k], 2) for g in gathered] for k in mem},
        # rank 0's parameters + AdamW state against the whole model's (params + 2 moments)
        "param_optim_share_rank0": round((gathered[0][1]["param_mib"] + gathered[0][1]["optim_state_mib"])
                                         / (3 * full_mib), 4),
        "loss_warmup": [round(v, 4) for v in warm_losses],
        **tg.timing_summary(times, tokens, fpt, t_first, warm_s, losses),
    }
    tg.print_result(res, args.json)


def main():
    args = parse_args()
    if "RANK" not in os.environ:
        sys.exit(torch_ddp_gpt.launch(args))
    worker(args)


if __name__ == "__main__":
    main()
