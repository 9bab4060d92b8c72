#!/usr/bin/env python3
"""PyTorch DistributedDataParallel peer for meshtrain's data-parallel benchmark.

Trains the GPT of bench/peers/torch_gpt.py (same model, init, AdamW settings
and FLOP accounting; imported from there) with DistributedDataParallel on the
gloo backend (CPU), --nproc processes x --threads threads, per-worker batch
--batch. Each rank samples its own batches (seeded by rank).

Started without RANK in the environment, it starts --nproc copies of itself
with the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT) and waits for them;
under torchrun (`torchrun --nproc_per_node 2 torch_ddp_gpt.py ...`) each copy
is a rank directly.

DDP settings: --bucket-cap-mb (DDP's default 25), --grad-as-view
(gradient_as_bucket_view=True), --static-graph, --mode eager|compile
(torch.compile of the DDP module: Dynamo's DDPOptimizer splits the graph at
bucket boundaries so all-reduces can still overlap backward).

Precision (--precision, as bench/peers/torch_gpt.py): fp32 (the default), or
bf16: each rank's forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16), the model's weights, gradients and AdamW state fp32,
so DDP all-reduces fp32 gradients (PyTorch's default; no comm hook). The
result says "precision" (and "bf16": "autocast").

Throughput: global tokens/s = nproc * batch * ctx / step time, median over the
timed steps after --warmup untimed ones (these include compilation); step time
is rank 0's (each step ends with loss.item(), after the all-reduces finished,
so the ranks run in lock-step). Rank 0 prints one JSON line with --json.
"""
import argparse
import json
import os
import resource
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
    p.add_argument("--batch", type=int, default=8, help="per-worker batch")
    p.add_argument("--vocab", "--vocab-size", dest="vocab", type=int, default=256, help="as torch_gpt.py's --vocab")
    p.add_argument("--steps", type=int, default=12, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--attn", choices=["auto", "sdpa", "manual"], default="sdpa")
    p.add_argument("--wait", choices=["passive", "active", "unset"], default="unset")
    p.add_argument("--optim", choices=["auto", "foreach", "fused", "plain"], default="auto")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--grad-as-view", action="store_true", help="gradient_as_bucket_view=True")
    p.add_argument("--static-graph", action="store_true")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=900, help="seconds (launcher: whole run)")
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def launch(args):
    """Starts args.nproc ranks of this script, like torchrun (peer_launch.py); returns 0 when
    all succeed. torch_pp_gpt, torch_tp_gpt and torch_zero_gpt start their ranks through it."""
    return peer_launch.launch(args, "torch_ddp_gpt")


def worker(args):
    # torch_gpt parses its own arguments at import and bounds the thread pools
    # (OMP/OpenBLAS/MKL) before torch loads; give it the model and thread settings.
    sys.argv = [os.path.join(HERE, "torch_gpt.py"), "--layers", str(args.layers), "--d", str(args.d),
                "--heads", str(args.heads), "--ctx", str(args.ctx), "--batch", str(args.batch),
                "--threads", str(args.threads), "--wait", args.wait, "--attn", args.attn,
                "--optim", args.optim, "--precision", args.precision, "--seed", str(args.seed),
                "--vocab", str(args.vocab)]
    sys.path.insert(0, HERE)
    import torch_gpt as tg  # noqa: E402  (imports torch)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    from datetime import timedelta
    dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout))

    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    model = tg.GPT(args.layers, args.d, args.heads, args.ctx)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb, gradient_as_bucket_view=args.grad_as_view,
              static_graph=args.static_graph)
    opt = tg.make_optimizer(ddp.module)
    data, data_name = tg.load_data()
    gen = torch.Generator().manual_seed(args.seed + 2 + 1000 * rank)
    offs = torch.arange(args.ctx + 1)

    def batch():
        starts = torch.randint(0, data.numel() - args.ctx - 1, (args.batch, 1), generator=gen)
        chunk = data[starts + offs]
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    step_fn = torch.compile(ddp) if args.mode == "compile" else ddp

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with tg.autocast():
            loss = step_fn(x, y)
        loss.backward()
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
    times, losses = [], []
    for _ in range(args.steps):
        x, y = batch()
        t0 = time.perf_counter()
        losses.append(step(x, y))
        times.append(time.perf_counter() - t0)

    # every rank's step times (to report the slowest rank's median too) and peak RSS
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    gathered = [None] * world
    dist.all_gather_object(gathered, (times, peak_rss_mib))
    all_times = [g[0] for g in gathered]
    dist.destroy_process_group()
    if rank != 0:
        return
    n, fpt = tg.flops_per_token(args.layers, args.d, args.ctx)
    tokens = world * args.batch * args.ctx
    slowest = [max(ts) for ts in zip(*all_times)]
    res = {
        "peer": "pytorch-ddp", "torch": torch.__version__, "backend": args.backend,
        "nproc": world, "threads": args.threads, "torch_threads": torch.get_num_threads(),
        "mode": args.mode, **tg.precision_info(), "attn": "sdpa" if tg.use_sdpa else "manual", "optim": args.optim,
        "bucket_cap_mb": args.bucket_cap_mb, "gradient_as_bucket_view": args.grad_as_view,
        "static_graph": args.static_graph,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "layers": args.layers, "d": args.d, "heads": args.heads, "ctx": args.ctx,
        "batch_per_worker": args.batch, "global_batch": world * args.batch,
        "steps": args.steps, "warmup": args.warmup, "data": data_name,
        "params_total": sum(p.numel() for p in model.parameters()),
        "N": n, "flops_per_token": fpt,
        "tokens_per_s_slowest_rank": round(statistics.median(tokens / t for t in slowest), 1),
        "peak_rss_mib_per_rank": [round(g[1], 1) for g in gathered],
        "peak_rss_mb": round(max(g[1] for g in gathered), 1),  # the largest rank's, as GNU time reports a launch
        **tg.timing_summary(times, tokens, fpt, t_first, warm_s, losses),
    }
    tg.print_result(res, args.json)


def main():
    args = parse_args()
    if "RANK" not in os.environ:
        sys.exit(launch(args))
    worker(args)


if __name__ == "__main__":
    main()
