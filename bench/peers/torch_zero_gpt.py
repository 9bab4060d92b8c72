#!/usr/bin/env python3
"""PyTorch ZeRO / FSDP peer for meshtrain's ZeRO benchmark (bench/zero.sh).

Trains the GPT of bench/peers/torch_gpt.py (same model, init, AdamW settings
and FLOP accounting; imported from there) on the gloo backend (CPU),
--nproc processes x --threads threads, per-worker batch --batch, each rank
sampling its own batches (seeded by rank), in one of three --mode s, all with
PyTorch's default settings:
  ddp    DistributedDataParallel, AdamW replicated on every rank (ZeRO stage 0;
         the same as bench/peers/torch_ddp_gpt.py with its defaults)
  zero1  DistributedDataParallel for the gradients and
         torch.distributed.optim.ZeroRedundancyOptimizer(optimizer_class=AdamW):
         each rank keeps the AdamW state of its share of the parameters, steps
         it, and broadcasts the updated share (ZeRO stage 1)
  fsdp   FSDP2 torch.distributed.fsdp.fully_shard on each transformer block,
         then on the root module (embeddings, final LayerNorm): parameters,
         gradients and AdamW state sharded, blocks all-gathered for forward and
         again for backward (reshard_after_forward=True), gradients
         reduce-scattered (ZeRO stage 3). If fully_shard fails, the older
         FullyShardedDataParallel wrapper (FULL_SHARD, one unit per block,
         use_orig_params=True so the weight-decay groups stay per parameter)
         is tried; --fsdp-api picks one. The result says which ran
         ("fsdp_api"). When neither can run, one line on stdout says so, with
         each exception's text, and the exit status is 3 (bench/zero.sh
         reports it and compares against DDP instead).
Checked with PyTorch 2.15 (bench/.venv): fully_shard runs on CPU with gloo.

Precision (--precision): fp32 (the default), or bf16, each mode in
PyTorch's own way:
  ddp, zero1  the forward and loss under torch.autocast("cpu",
         dtype=torch.bfloat16) (as bench/peers/torch_gpt.py), weights,
         gradients and AdamW state fp32, gradients all-reduced in fp32
  fsdp   FSDP2's mixed precision: every fully_shard call gets
         MixedPrecisionPolicy(param_dtype=torch.bfloat16,
         reduce_dtype=torch.bfloat16): the fp32 shards (and AdamW state) stay
         fp32, the all-gathered parameters are bf16, so the whole forward and
         backward runs in bf16, and gradients are reduce-scattered in bf16,
         then kept as fp32 shards. --fsdp-autocast adds torch.autocast("cpu",
         dtype=torch.bfloat16) around the forward and loss on top (off by
         default). The FullyShardedDataParallel fallback gets
         MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16).
The result says "precision" and, for bf16, in "bf16" which of these ran.

Started without RANK in the environment, it starts --nproc copies of itself
like torchrun (bench/peers/torch_ddp_gpt.py's launcher); under torchrun each
copy is a rank directly.

Throughput: global tokens/s = nproc * batch * ctx / step time, median over the
timed steps after --warmup untimed ones; step time is rank 0's (every step
ends with loss.item() after the step's collectives, so the ranks run in
lock-step). Memory, per rank: peak RSS (getrusage), and the local bytes of
parameters and of AdamW state after the run, which show the sharding. Rank 0
prints one JSON line with --json.
"""
import argparse
import inspect
import os
import resource
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_ddp_gpt  # noqa: E402  (its launcher; imports no torch)

UNSUPPORTED = 3  # exit status when FSDP cannot run here
MiB = 1 << 20


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["ddp", "zero1", "fsdp"], required=True)
    p.add_argument("--fsdp-api", choices=["auto", "fully_shard", "FullyShardedDataParallel"], default="auto",
                   help="auto: fully_shard (FSDP2), else the FullyShardedDataParallel wrapper")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--batch", type=int, default=8, help="per-worker batch")
    p.add_argument("--steps", type=int, default=12, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (at least 1)")
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--attn", choices=["auto", "sdpa", "manual"], default="sdpa")
    p.add_argument("--wait", choices=["passive", "active", "unset"], default="unset")
    p.add_argument("--optim", choices=["auto", "foreach", "fused", "plain"], default="auto")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: ddp/zero1 autocast; fsdp MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)")
    p.add_argument("--fsdp-autocast", action="store_true",
                   help="fsdp with --precision bf16: also torch.autocast('cpu', bfloat16) around forward and loss")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--vocab-size", type=int, default=256, help="as torch_gpt.py's --vocab")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=900, help="seconds (launcher: whole run)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    args.warmup = max(args.warmup, 1)  # the first step is the check that the mode runs at all
    return args


def one_line(e):
    return "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:400])


def launch(args):
    """torch_ddp_gpt's launcher, plus exit status 3 when the ranks found FSDP unusable:
    that launcher reports only 'rank k exited with s' (and which rank fails first is a
    race), so the ranks write the reason to a file named in the environment."""
    with tempfile.NamedTemporaryFile("r", prefix="torch_zero_gpt.", suffix=".why") as why:
        os.environ["TORCH_ZERO_GPT_WHY"] = why.name
        try:
            return torch_ddp_gpt.launch(args)
        except SystemExit as e:
            reason = why.readline().strip()
            if reason:
                print(reason, flush=True)
                return UNSUPPORTED
            sys.exit("torch_zero_gpt: %s" % str(e.code).split(": ", 1)[-1])


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
    from datetime import timedelta

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout))

    def new_model():
        torch.manual_seed(args.seed)  # the same initial weights on every rank
        return tg.GPT(args.layers, args.d, args.heads, args.ctx)

    def adamw_recipe(model):
        """tg.make_optimizer's AdamW for `model` as (class, settings, [(group settings,
        parameter names)]), to rebuild over wrapped or sharded parameters: the ZeRO
        optimizer takes the class and settings, and FSDP1's parameters are flattened,
        so make_optimizer's p.dim() test would no longer find the matrices."""
        ref = tg.make_optimizer(model)
        cls = type(ref)
        accepted = inspect.signature(cls.__init__).parameters
        kw = {k: v for k, v in ref.defaults.items() if k in accepted and k != "params"}
        name = {id(p): n for n, p in model.named_parameters()}
        groups = [({k: v for k, v in g.items() if k != "params" and k in kw and v != kw[k]},
                   [name[id(p)] for p in g["params"]]) for g in ref.param_groups]
        return cls, kw, groups

    def param_groups(groups, module):
        # FSDP1 names its wrapped modules' parameters with this prefix
        by_name = {n.replace("_fsdp_wrapped_module.", ""): p for n, p in module.named_parameters()}
        return [dict(settings, params=[by_name[n] for n in names]) for settings, names in groups]

    bf16 = args.precision == "bf16"
    # autocast (bf16 matrix products, fp32 weights) for ddp and zero1; FSDP's own
    # mixed-precision policy for fsdp, with autocast on top only when asked
    use_autocast = bf16 and (args.mode != "fsdp" or args.fsdp_autocast)
    MP = "param_dtype=bf16, reduce_dtype=bf16"

    def bf16_method(api):
        """What --precision bf16 did for api, for the result's "bf16" field."""
        if api in ("ddp", "zero1"):
            return "autocast"
        kind = "MixedPrecisionPolicy" if api == "fully_shard" else "MixedPrecision"
        return "%s(%s)%s" % (kind, MP, " + autocast" if use_autocast else "")

    def build(api):
        """(module to call, optimizer, model whose parameters are the local ones) for api."""
        model = new_model()
        cls, kw, groups = adamw_recipe(model)
        if api in ("ddp", "zero1"):
            from torch.nn.parallel import DistributedDataParallel as DDP
            ddp = DDP(model)
            if api == "ddp":
                return ddp, cls(param_groups(groups, model), **kw), model
            from torch.distributed.optim import ZeroRedundancyOptimizer
            return ddp, ZeroRedundancyOptimizer(param_groups(groups, model), optimizer_class=cls, **kw), model
        if api == "fully_shard":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            mesh = init_device_mesh("cpu", (world,))
            kw_mp = {}
            if bf16:
                from torch.distributed.fsdp import MixedPrecisionPolicy
                kw_mp["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
            for b in model.blocks:
                fully_shard(b, mesh=mesh, **kw_mp)
            fully_shard(model, mesh=mesh, **kw_mp)  # parameters become DTensors, names unchanged
            return model, cls(param_groups(groups, model), **kw), model
        if api == "FullyShardedDataParallel":
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy
            kw_mp = {}
            if bf16:
                from torch.distributed.fsdp import MixedPrecision
                kw_mp["mixed_precision"] = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
            fsdp = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({tg.Block}), device_id=torch.device("cpu"),
                        use_orig_params=True, **kw_mp)
            return fsdp, cls(param_groups(groups, fsdp), **kw), fsdp
        raise ValueError(api)

    data, data_name = tg.load_data()
    gen = torch.Generator().manual_seed(args.seed + 2 + 1000 * rank)
    offs = torch.arange(args.ctx + 1)

    def batch():
        starts = torch.randint(0, data.numel() - args.ctx - 1, (args.batch, 1), generator=gen)
        chunk = data[starts + offs]
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    def step(module, opt, x, y):
        opt.zero_grad(set_to_none=True)
        with tg.autocast(args.precision if use_autocast else "fp32"):
            loss = module(x, y)
        loss.backward()
        opt.step()
        return loss.item()

    # Build and take the first (warm-up) step; for fsdp a failure there moves on to the
    # next API, since FSDP's CPU/gloo support has come and gone between releases.
    apis = [args.mode]
    if args.mode == "fsdp":
        apis = ["fully_shard", "FullyShardedDataParallel"] if args.fsdp_api == "auto" else [args.fsdp_api]
    failures, api = [], None
    for a in apis:
        try:
            module, opt, local = build(a)
            x, y = batch()
            t0 = time.perf_counter()
            step(module, opt, x, y)
            t_first = time.perf_counter() - t0
            api = a
            break
        except Exception as e:  # noqa: BLE001  (any failure means: this API cannot run here)
            if args.mode != "fsdp":
                raise
            failures.append("%s: %s" % (a, one_line(e)))
            if rank == 0:
                print("torch_zero_gpt: %s failed: %s" % (a, one_line(e)), file=sys.stderr, flush=True)
    if api is None:
        reason = "torch_zero_gpt: FSDP cannot run on CPU/%s in torch %s: %s" % (
            args.backend, torch.__version__, "; ".join(failures))
        why = os.environ.get("TORCH_ZERO_GPT_WHY")
        if why:  # every rank: the launcher may stop the others when the first one exits
            with open(why, "a") as f:
                f.write(reason + "\n")
        elif rank == 0:
            print(reason, flush=True)
        os._exit(UNSUPPORTED)  # without destroy_process_group: the other rank may be stuck in a collective

    warm_s = t_first
    for _ in range(args.warmup - 1):
        x, y = batch()
        t0 = time.perf_counter()
        step(module, opt, x, y)
        warm_s += time.perf_counter() - t0
    dist.barrier()
    times, losses = [], []
    for _ in range(args.steps):
        x, y = batch()
        t0 = time.perf_counter()
        losses.append(step(module, opt, x, y))
        times.append(time.perf_counter() - t0)

    def local_bytes(tensors):
        # a DTensor (fully_shard) reports its global shape; its shard is to_local()
        local_part = (t.to_local() if hasattr(t, "to_local") else t for t in tensors)
        return sum(t.numel() * t.element_size() for t in local_part)

    local_opt = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer keeps its shard's AdamW in .optim
    mem = {
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
        "param_mib": local_bytes(local.parameters()) / MiB,
        "optim_state_mib": local_bytes(t for s in local_opt.state.values() for t in s.values()
                                       if torch.is_tensor(t) and t.dim() > 0) / MiB,
    }
    # every rank's step times (to report the slowest rank's median) and memory
    gathered = [None] * world
    dist.all_gather_object(gathered, (times, mem))
    dist.destroy_process_group()
    if rank != 0:
        return
    all_times = [g[0] for g in gathered]
    n, fpt = tg.flops_per_token(args.layers, args.d, args.ctx)
    tokens = world * args.batch * args.ctx
    slowest = [max(ts) for ts in zip(*all_times)]
    res = {
        "peer": "pytorch-" + args.mode, "torch": torch.__version__, "backend": args.backend,
        "mode": args.mode, "fsdp_api": api if args.mode == "fsdp" else None, "fsdp_failures": failures or None,
        **tg.precision_info(bf16=bf16_method(api)),
        "nproc": world, "threads": args.threads, "torch_threads": torch.get_num_threads(),
        "attn": "sdpa" if tg.use_sdpa else "manual", "optim": args.optim,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "layers": args.layers, "d": args.d, "heads": args.heads, "ctx": args.ctx,
        "batch_per_worker": args.batch, "global_batch": world * args.batch,
        "steps": args.steps, "warmup": args.warmup, "data": data_name,
        "params_total": sum(p.numel() for p in new_model().parameters()),
        "N": n, "flops_per_token": fpt,
        "tokens_per_s_slowest_rank": round(statistics.median(tokens / t for t in slowest), 1),
        **{k + "_per_rank": [round(g[1][k], 1) for g in gathered] for k in mem},
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
