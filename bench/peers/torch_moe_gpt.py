#!/usr/bin/env python3
"""PyTorch mixture-of-experts peer for meshtrain's expert-parallel benchmark.

The GPT of bench/peers/torch_gpt.py (same attention, init, AdamW settings;
imported from there) with every block's MLP a mixture of --experts GPT-2
MLPs (c_fc d -> 4d, GELU tanh, c_proj 4d -> d, biases, fp32), as meshtrain's
MoE GPT (docs/mixture_of_experts.md):
  router     z = x W, W (d, E) without bias; p = softmax(z) in fp32; each
             token's top-k experts by p, gates renormalised over the k (k = 1:
             the gate is p itself); dropless (every token reaches its k
             experts)
  balancing  L_aux = coef E / (N^2 k) sum_i c_i S_i over the global batch
             (c_i: choices of expert i, S_i: the sum of its probabilities, N
             the global tokens): the counts are summed over the ranks per
             layer (one all-reduce of E floats), the probabilities' sums are
             each rank's own, weighted so that the averaged gradient is the
             global loss's
Expert parallelism over --ep ranks (--ep = --nproc, or 1: every expert on
each rank): rank r holds experts [r E/ep, (r+1) E/ep); each token's chosen
rows travel to their expert's rank and back by all-to-all with variable
splits (torch.distributed.all_to_all_single on gloo: the row counts first,
then the rows; backward the same way in reverse), by one of two dispatchers:
  --dispatch torchtitan  torchtitan 0.3's AllToAllTokenDispatcher (the token
                         dispatch and combine of its MoE layers under expert
                         parallelism: sort by expert, counts all-to-all, rows
                         all-to-all, rank-major -> expert-major permute, and
                         back, scores applied and scatter-added; its
                         functional all_to_all_single carries the gradient),
                         with the "dtensor" SPMD backend (plain process
                         groups); needs torchtitan importable
  --dispatch plain       the same steps written here over an autograd
                         wrapper of dist.all_to_all_single
  --dispatch deepspeed   DeepSpeed 0.19's whole MoE layer (deepspeed.moe.layer.MoE) in
                         place of the MLP: its top-k gate (softmax, top-2 by p
                         without its default noisy second choice:
                         top2_2nd_expert_sampling=False; renormalised gates),
                         dropless (drop_tokens=False: every expert's buffer as
                         long as the largest count over the group), its own
                         GShard balancing loss (per rank) times --aux-coef, and
                         its dense one-hot dispatch (einsum) and equal-size
                         all-to-alls of the padded buffers; needs deepspeed
                         importable (DS_ACCELERATOR=cpu)
The experts run one after another on their contiguous rows (F.linear, fp32).
Gradients: the dense parameters' averaged over all ranks after backward (one
flat all-reduce), each expert's divided by ep (its rows came from every rank
of its group: the sum of their local-mean losses).

Started without RANK in the environment, it starts --nproc copies of itself
(bench/peers/peer_launch.py, as torch_ddp_gpt.py does) and waits for them.

Precision (--precision, as bench/peers/torch_gpt.py): fp32 (the default), or
bf16: each rank's forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16), weights, gradients and AdamW state fp32. The result
says "precision" (and "bf16": "autocast").

Throughput: global tokens/s = nproc * batch * ctx / step time, median over the
timed steps after --warmup untimed ones; rank 0's step time (each step ends
with the gradient all-reduce and loss.item(), so the ranks run in lock-step).
Rank 0 prints one JSON line with --json, with the routing's imbalance (the
busier expert rank's rows over an even share, averaged over layers and steps).
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_launch  # noqa: E402  (the ranks' launcher; imports no torch)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--batch", type=int, default=4, help="per-worker batch")
    p.add_argument("--experts", type=int, default=4)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--aux-coef", type=float, default=1e-2)
    p.add_argument("--ep", type=int, default=None, help="expert-parallel ways: nproc (default) or 1")
    p.add_argument("--dispatch", choices=["torchtitan", "plain", "deepspeed"], default="torchtitan")
    p.add_argument("--steps", type=int, default=6, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--attn", choices=["auto", "sdpa", "manual"], default="sdpa")
    p.add_argument("--wait", choices=["passive", "active", "unset"], default="unset")
    p.add_argument("--data", default=None)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=900, help="seconds (launcher: whole run)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    a.ep = a.nproc if a.ep is None else a.ep
    if a.ep not in (1, a.nproc) or a.experts % a.ep or a.top_k > a.experts:
        p.error("--ep must be 1 or --nproc and divide --experts; --top-k at most --experts")
    return a


def worker(args):
    sys.argv = [os.path.join(HERE, "torch_gpt.py"), "--layers", str(args.layers), "--d", str(args.d),
                "--heads", str(args.heads), "--ctx", str(args.ctx), "--batch", str(args.batch),
                "--threads", str(args.threads), "--wait", args.wait, "--attn", args.attn, "--precision", args.precision, "--seed", str(args.seed)]
    if args.data:
        sys.argv += ["--data", args.data]
    sys.path.insert(0, HERE)
    import torch_gpt as tg  # noqa: E402  (bounds the thread pools, imports torch)
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from datetime import timedelta

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout))
    E, K, X = args.experts, args.top_k, args.ep
    local = E // X
    first = (rank % X) * local if X > 1 else 0
    n_global = world * args.batch * args.ctx
    imbalance = []  # per MoE layer and step: busier expert rank's rows / even share

    class AllToAll(torch.autograd.Function):
        """Rows to ranks by dist.all_to_all_single; backward sends the gradients back."""

        @staticmethod
        def forward(ctx, x, out_splits, in_splits):
            ctx.out_splits, ctx.in_splits = out_splits, in_splits
            y = x.new_empty((sum(in_splits), x.shape[1]))
            dist.all_to_all_single(y, x.contiguous(), output_split_sizes=in_splits, input_split_sizes=out_splits)
            return y

        @staticmethod
        def backward(ctx, dy):
            dx = dy.new_empty((sum(ctx.out_splits), dy.shape[1]))
            dist.all_to_all_single(dx, dy.contiguous(), output_split_sizes=ctx.out_splits,
                                   input_split_sizes=ctx.in_splits)
            return dx, None, None

    class PlainDispatcher:
        """Sort by expert, exchange counts and rows, permute to expert-major; combine reverses it."""

        def dispatch(self, x, gates, ids, counts):
            order = torch.argsort(ids.reshape(-1), stable=True)
            tokens = order // K
            scores = gates.reshape(-1)[order]
            routed = x[tokens]
            if X == 1:
                return routed, counts, (tokens, scores, None)
            recv = torch.empty_like(counts)
            dist.all_to_all_single(recv, counts)
            out_splits = counts.view(X, local).sum(1).tolist()
            in_splits = recv.view(X, local).sum(1).tolist()
            got = AllToAll.apply(routed, out_splits, in_splits)
            # rank-major (source, expert) -> expert-major (expert, source)
            mat = recv.view(X, local)
            starts = (recv.cumsum(0) - recv).view(X, local)
            perm = torch.cat([torch.arange(int(starts[s, e]), int(starts[s, e] + mat[s, e]))
                              for e in range(local) for s in range(X)])
            return got[perm], mat.sum(0), (tokens, scores, (perm, out_splits, in_splits))

        def combine(self, y, meta, x):
            tokens, scores, ep = meta
            if ep is not None:
                perm, out_splits, in_splits = ep
                back = torch.empty_like(y)
                back = back.index_copy(0, perm, y)
                y = AllToAll.apply(back, in_splits, out_splits)
            out = torch.zeros_like(x)
            return out.index_add(0, tokens, y * scores.unsqueeze(1))

    if args.dispatch == "deepspeed":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        import deepspeed
        from deepspeed.moe.layer import MoE as DeepSpeedMoE
        deepspeed.init_distributed(dist_backend="gloo")

    if args.dispatch == "torchtitan" and X > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torchtitan.distributed.utils import set_spmd_backend
        from torchtitan.models.common.token_dispatcher import AllToAllTokenDispatcher
        set_spmd_backend("dtensor")  # plain process groups, no spmd_types mesh
        ep_mesh = init_device_mesh("cpu", (X,), mesh_dim_names=("ep",))["ep"]

        def make_dispatcher():
            d = AllToAllTokenDispatcher(AllToAllTokenDispatcher.Config(num_experts=E, top_k=K))
            d.wire_meshes(ep_mesh=ep_mesh)
            return d
    else:
        def make_dispatcher():
            return PlainDispatcher()

    class MoeMlp(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.router = nn.Linear(d, E, bias=False)
            self.experts = nn.ModuleList([tg.MLP(d) for _ in range(local)])
            for m in self.experts:
                m.is_expert = True
            self.dispatcher = make_dispatcher()

        def forward(self, x_bld):
            B, L, D = x_bld.shape
            x = x_bld.reshape(B * L, D)
            p = F.softmax(self.router(x).float(), dim=-1)            # (T, E)
            top_p, ids = torch.topk(p, K, dim=-1)                    # (T, K)
            gates = top_p / top_p.sum(-1, keepdim=True) if K > 1 else top_p
            counts = torch.bincount(ids.reshape(-1), minlength=E)    # this rank's choices per expert
            if self.training and args.aux_coef > 0:
                c = counts.double()
                if world > 1:
                    dist.all_reduce(c)
                # sum over ranks of each rank's term is the global loss; x world
                # because the dense gradients are averaged over the ranks
                scale = world * args.aux_coef * E / (n_global ** 2 * K)
                self.aux = scale * (c.float() * p.sum(0)).sum()
                if X > 1:
                    imbalance.append(float(c.view(X, local).sum(1).max() / (c.sum() / X)))
            routed, per_expert, meta = self.dispatcher.dispatch(x, gates, ids, counts)
            outs = []
            for expert, rows in zip(self.experts, torch.split(routed, per_expert.tolist())):
                outs.append(expert(rows))
            y = torch.cat(outs) if outs else routed
            # Under autocast the experts' rows come back bf16; the combine scatters them into
            # a buffer of x's dtype (torchtitan's scatter_add needs the two alike), as the
            # residual add would take them. A no-op in fp32.
            y = y.to(x.dtype)
            return self.dispatcher.combine(y, meta, x).view(B, L, D)

    class DeepSpeedMlp(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.moe = DeepSpeedMoE(hidden_size=d, expert=tg.MLP(d), num_experts=E, ep_size=X, k=K,
                                    drop_tokens=False, use_rts=False, top2_2nd_expert_sampling=False)
            self.moe.set_deepspeed_parallelism()  # its expert groups, as deepspeed.initialize would make them
            for m in self.moe.deepspeed_moe.experts.deepspeed_experts:
                m.is_expert = True

        def forward(self, x):
            y, l_aux, counts = self.moe(x)
            if self.training and args.aux_coef > 0:
                self.aux = args.aux_coef * l_aux
                if X > 1:
                    c = counts.double()
                    dist.all_reduce(c)
                    imbalance.append(float(c.view(X, local).sum(1).max() / (c.sum() / X)))
            return y

    class Block(nn.Module):
        def __init__(self, d, heads, ctx):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.attn = tg.CausalSelfAttention(d, heads, ctx)
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = DeepSpeedMlp(d) if args.dispatch == "deepspeed" else MoeMlp(d)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class MoeGPT(tg.GPT):
        def __init__(self, layers, d, heads, ctx):
            super().__init__(layers, d, heads, ctx)
            self.blocks = nn.ModuleList([Block(d, heads, ctx) for _ in range(layers)])
            for m in self.blocks.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, mean=0.0, std=0.02)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)
            for name, p in self.named_parameters():   # GPT-2's scaled residual init
                if name.endswith("c_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / (2 * layers) ** 0.5)

        def forward(self, idx, targets):
            loss = super().forward(idx, targets)
            aux = [b.mlp.aux for b in self.blocks if getattr(b.mlp, "aux", None) is not None]
            return loss + sum(aux) if aux else loss

    torch.manual_seed(args.seed)  # the same dense weights on every rank
    model = MoeGPT(args.layers, args.d, args.heads, args.ctx)
    expert_params = [p for m in model.modules() if getattr(m, "is_expert", False) for p in m.parameters()]
    expert_ids = {id(p) for p in expert_params}
    dense_params = [p for p in model.parameters() if id(p) not in expert_ids]
    opt = tg.make_optimizer(model)
    data, data_name = tg.load_data()
    gen = torch.Generator().manual_seed(args.seed + 2 + 1000 * rank)
    offs = torch.arange(args.ctx + 1)

    def batch():
        starts = torch.randint(0, data.numel() - args.ctx - 1, (args.batch, 1), generator=gen)
        chunk = data[starts + offs]
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    def sync_gradients():
        if world > 1:
            shared = dense_params + (expert_params if X == 1 else [])
            flat = torch.cat([p.grad.reshape(-1) for p in shared])
            dist.all_reduce(flat)
            flat /= world
            at = 0
            for p in shared:
                p.grad.copy_(flat[at:at + p.numel()].view_as(p.grad))
                at += p.numel()
        if X > 1:
            for p in expert_params:
                p.grad /= X

    def step(x, y):
        opt.zero_grad(set_to_none=False)
        with tg.autocast():
            loss = model(x, y)
        loss.backward()
        sync_gradients()
        opt.step()
        return loss.item()

    t_first, warm_s = None, 0.0
    for i in range(args.warmup):
        x, y = batch()
        t0 = time.perf_counter()
        step(x, y)
        dt = time.perf_counter() - t0
        t_first = dt if i == 0 else t_first
        warm_s += dt
    dist.barrier()
    del imbalance[:]
    times, losses = [], []
    for _ in range(args.steps):
        x, y = batch()
        t0 = time.perf_counter()
        losses.append(step(x, y))
        times.append(time.perf_counter() - t0)
    all_times = [None] * world
    dist.all_gather_object(all_times, times)
    dist.destroy_process_group()
    if rank != 0:
        return
    n, fpt = tg.flops_per_token(args.layers, args.d, args.ctx)
    n_active = n + args.layers * (K - 1) * 8 * args.d * args.d  # k experts' MLPs per token
    fpt += 6 * (n_active - n)
    tokens = world * args.batch * args.ctx
    slowest = [max(ts) for ts in zip(*all_times)]
    res = {
        "peer": "pytorch-moe", "torch": torch.__version__, "backend": "gloo", "dispatch": args.dispatch,
        **tg.precision_info(),
        "nproc": world, "threads": args.threads, "torch_threads": torch.get_num_threads(),
        "experts": E, "top_k": K, "ep": X, "aux_coef": args.aux_coef,
        "layers": args.layers, "d": args.d, "heads": args.heads, "ctx": args.ctx,
        "batch_per_worker": args.batch, "global_batch": world * args.batch,
        "steps": args.steps, "warmup": args.warmup, "data": data_name,
        "params_rank0": sum(p.numel() for p in model.parameters()),
        "N_active": n_active, "flops_per_token": fpt,
        "routing_imbalance": round(statistics.mean(imbalance), 3) if imbalance else None,
        "tokens_per_s_slowest_rank": round(statistics.median(tokens / t for t in slowest), 1),
        **tg.timing_summary(times, tokens, fpt, t_first, warm_s, losses),
    }
    tg.print_result(res, args.json)


def main():
    args = parse_args()
    if "RANK" not in os.environ:
        sys.exit(peer_launch.launch(args, "torch_moe_gpt"))
    worker(args)


if __name__ == "__main__":
    main()
