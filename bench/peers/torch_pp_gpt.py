#!/usr/bin/env python3
"""PyTorch pipeline-parallel peer for meshtrain's pipeline-parallel benchmark.

Trains the GPT of bench/peers/torch_gpt.py (same blocks, init, AdamW settings,
data stream and FLOP accounting; imported from there) with PyTorch's own
pipeline parallelism, torch.distributed.pipelining, on the gloo backend
(CPU): --procs P processes x --threads threads (1 by default), the global
batch --batch split into --micro-batches M micro-batches, every rank drawing
torch_gpt.py's batch stream (seed + 2), so the batches are the single-process
run's.

Stages are built by hand (PipelineStage around a module of our own, static
shape metadata), not traced with pipeline()/SplitPoint: S = P x V stages
take consecutive blocks, split as meshtrain's stage_split.hpp does (L / S
each, the remainder to the middle stages first, then the last, then the
first; --stage-layers to give the counts). The first stage also holds wte and
wpe, the last ln_f, an UNTIED output layer and the loss (the schedule's
loss_fn, cross-entropy per micro-batch; scale_grads=True divides the summed
gradients by M, so they are the whole batch's mean loss's). The output layer
is initialised as a copy of wte (so step 1 is the tied model's) but trained
as its own matrix: pipelining cannot tie weights across stages (meshtrain
sums the tied wte's gradient between its first and last stage instead).
params_total counts the extra 256 x d matrix; flops_per_token is torch_gpt's
(the work is the same: the tied formula already counts the head's matmul).

Schedules (--schedule), stage-to-rank placement and V (--virtual-stages,
default from the schedule):
  gpipe         ScheduleGPipe                   V = 1, stage r on rank r
  1f1b          Schedule1F1B                    V = 1
  interleaved   ScheduleInterleaved1F1B         V = 2 (looped: rank r holds r, r + P, ...)
  zero_bubble   ScheduleInterleavedZeroBubble   V = 2 (looped; ZB1P, weight grads deferred)
  zbv           ScheduleZBVZeroBubble           V = 2 exactly (V shape: rank r holds r and 2P-1-r,
                                                so rank 0 has both the embedding and the head)
meshtrain's "zero_bubble" is ZB-H1 with one stage per rank; the nearest here
is zero_bubble with --virtual-stages 1 (ScheduleInterleavedZeroBubble with
one stage per rank; see the smoke-test table for whether it runs).

--mode compile (or --compile) compiles each block in place (nn.Module.compile,
as torchtitan does for pipeline stages; the stage module itself stays plain).
The zero-bubble schedules (zero_bubble, zbv) refuse stages holding a
torch.compile OptimizedModule ("we don't support input/weight backward split
with torch.compile"); in-place compiled blocks are not OptimizedModules and
get past that check, see the table for what then happens.

Started without RANK in the environment, it starts --procs copies of itself
like torchrun (bench/peers/torch_ddp_gpt.py's launcher, whose messages say
torch_ddp_gpt); under torchrun each copy is a rank directly.

Precision (--precision, as bench/peers/torch_gpt.py): fp32 (the default), or
bf16: each rank's forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16), weights, gradients and AdamW state fp32. The result
says "precision" (and "bf16": "autocast").

Throughput: global tokens/s = batch * ctx / step time, median over the timed
steps after --warmup untimed ones (these include compilation and the
schedule's first-step set-up); step time is rank 0's (a step is zero_grad,
schedule.step, optimizer step; rank 0 holds stage 0, whose last backward ends
the pipeline's step), and the slowest rank's per-step time's median is
reported too. The loss is the mean of the last stage's M micro-batch losses.
Memory, per rank: peak RSS (getrusage) and the local parameter bytes. Rank 0
prints one JSON line with --json.

Smoke tests (torch 2.15.0+cu132 from PyPI, CPU, gloo, L=4 D=64 H=4 CTX=32
BATCH=8, P=2, M=4, --warmup 1 --steps 2, nice -n 19 on a busy 2-core VM):
  Every schedule runs, eager and --compile, and gives the single-process
  torch_gpt.py loss at step 1 (5.5697 there, 5.5696 here; later steps drift
  in the 4th digit as the head is untied):
    gpipe                      eager ok   compile ok
    1f1b                       eager ok   compile ok
    interleaved (V=2)          eager ok   compile ok
    zero_bubble (V=2)          eager ok   compile ok (*)
    zbv (V=2)                  eager ok   compile ok (*)
    zero_bubble --virtual-stages 1, interleaved --virtual-stages 1: eager ok
    P=4 (L=8, M=8): 1f1b, interleaved, zero_bubble, zbv eager ok
  (*) only with torch._functorch.config.donated_buffer = False, which this
  script sets for the zero-bubble schedules under --compile; with the default
  both fail at the first backward: "This backward function was compiled with
  non-empty donated buffers which requires create_graph=False and
  retain_graph=False" (the input-gradient pass keeps the graph for the
  weight-gradient pass). Reading torch/distributed/pipelining/_backward.py,
  a compiled block is one autograd node holding both its input and weight
  gradients, so the weight pass probably runs that block's compiled backward
  a second time: compiled zero-bubble figures are not a fair split (not
  measured).
  Static stage metadata needs requires_grad=True on the example activations
  (input_args of stages > 0 and output_args): without it the received
  activations do not require grad and stage 0 fails with "A GradientEdge
  root requires a gradient but got <class 'NoneType'>".
  ScheduleDualPipeV exists in 2.15 too; not wired up here.
"""
import argparse
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_ddp_gpt  # noqa: E402  (its launcher; imports no torch)

MiB = 1 << 20

# examples/gpt-bench-a.toml and gpt-bench-b.toml: layers, d, heads, ctx, batch
CONFIGS = {"a": (4, 256, 4, 128, 8), "b": (6, 384, 6, 256, 8)}

SCHEDULES = {  # name: (torch.distributed.pipelining class, default V, placement)
    "gpipe": ("ScheduleGPipe", 1, "loop"),
    "1f1b": ("Schedule1F1B", 1, "loop"),
    "interleaved": ("ScheduleInterleaved1F1B", 2, "loop"),
    "zero_bubble": ("ScheduleInterleavedZeroBubble", 2, "loop"),
    "zbv": ("ScheduleZBVZeroBubble", 2, "v"),
}
SINGLE_STAGE = ("gpipe", "1f1b")  # PipelineScheduleSingle: one stage per rank
ZERO_BUBBLE = ("zero_bubble", "zbv")  # backward split into input (I) and weight (W) parts


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="b",
                   help="benchmark config (examples/gpt-bench-<c>.toml); --layers etc. override it")
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--d", type=int, default=None)
    p.add_argument("--heads", type=int, default=None)
    p.add_argument("--ctx", type=int, default=None)
    p.add_argument("--batch", type=int, default=None, help="global batch, split into micro-batches")
    p.add_argument("--procs", "--nproc", dest="nproc", type=int, default=2, help="pipeline ranks P")
    p.add_argument("--micro-batches", type=int, default=4, help="M (must divide --batch)")
    p.add_argument("--schedule", choices=list(SCHEDULES), default="1f1b")
    p.add_argument("--virtual-stages", type=int, default=None,
                   help="stages per rank V (default: 1 for gpipe/1f1b, 2 otherwise)")
    p.add_argument("--stage-layers", default=None,
                   help="comma-separated blocks per stage (P*V counts); default balanced as meshtrain")
    p.add_argument("--steps", type=int, default=12, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--compile", dest="mode", action="store_const", const="compile",
                   help="same as --mode compile")
    p.add_argument("--attn", choices=["auto", "sdpa", "manual"], default="sdpa")
    p.add_argument("--wait", choices=["passive", "active", "unset"], default="unset")
    p.add_argument("--optim", choices=["auto", "foreach", "fused", "plain"], default="auto")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    p.add_argument("--vocab-size", type=int, default=256, help="as torch_gpt.py's --vocab")
    p.add_argument("--clip", type=float, default=0.0,
                   help="clip the global gradient norm over every stage to this (torchtitan's way: "
                        "the squares all-reduced over the pipeline); 0: no clipping")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=900, help="seconds (launcher: whole run)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    dims = ("layers", "d", "heads", "ctx", "batch")
    for name, v in zip(dims, CONFIGS[a.config]):
        if getattr(a, name) is None:
            setattr(a, name, v)
    if tuple(getattr(a, n) for n in dims) != CONFIGS[a.config]:
        a.config = "custom"
    if a.virtual_stages is None:
        a.virtual_stages = SCHEDULES[a.schedule][1]
    if a.schedule in SINGLE_STAGE and a.virtual_stages != 1:
        p.error("--schedule %s runs one stage per rank (--virtual-stages 1)" % a.schedule)
    if a.schedule == "zbv" and a.virtual_stages != 2:
        p.error("--schedule zbv needs exactly 2 stages per rank")
    if a.batch % a.micro_batches:
        p.error("--micro-batches %d must divide --batch %d" % (a.micro_batches, a.batch))
    return a


def stage_layer_counts(layers, stages, given=None):
    """meshtrain's parallel/pipeline/stage_split.cpp: L / S each, the remainder to the
    middle stages first, then the last, then the first."""
    if given:
        counts = [int(c) for c in given.split(",")]
        if len(counts) != stages or sum(counts) != layers or min(counts) < 0:
            sys.exit("torch_pp_gpt: --stage-layers %s must list %d counts adding up to %d"
                     % (given, stages, layers))
        return counts
    counts = [layers // stages] * stages
    order = list(range(1, stages - 1)) + ([stages - 1] if stages > 1 else []) + [0]
    for i in range(layers % stages):
        counts[order[i]] += 1
    if any(c == 0 for c in counts[1:-1]):
        sys.exit("torch_pp_gpt: a middle stage would hold no block (%s)" % counts)
    return counts


def stage_ranks(P, S, placement):
    """Stage index -> rank, as torch.distributed.pipelining's generate_stage_to_rank_mapping."""
    if placement == "loop":
        return [s % P for s in range(S)]
    out, r = [], 0
    for s in range(S):
        out.append(r)
        if (s + 1) % P == 0:
            continue
        r += 1 if (s // P) % 2 == 0 else -1
    return out


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
    import torch.nn as nn
    import torch.nn.functional as F
    from datetime import timedelta
    import torch.distributed.pipelining as pp

    torch.set_num_threads(args.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    P, V = world, args.virtual_stages
    S = P * V
    cls_name, _, placement = SCHEDULES[args.schedule]
    counts = stage_layer_counts(args.layers, S, args.stage_layers)
    starts = [sum(counts[:s]) for s in range(S + 1)]
    owner = stage_ranks(P, S, placement)
    mine = [s for s in range(S) if owner[s] == rank]

    dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout))

    class StageModule(nn.Module):
        """Blocks starts[s] .. starts[s+1]-1 of torch_gpt's GPT; the first stage also
        embeds, the last applies ln_f and the untied output layer (logits out)."""

        def __init__(self, gpt, s, head):
            super().__init__()
            self.first, self.last = s == 0, s == S - 1
            if self.first:
                self.wte, self.wpe = gpt.wte, gpt.wpe
                self.register_buffer("pos", gpt.pos.clone(), persistent=False)
            self.blocks = nn.ModuleList(gpt.blocks[starts[s]:starts[s + 1]])
            if self.last:
                self.ln_f, self.lm_head = gpt.ln_f, head

        def forward(self, x):
            if self.first:
                x = self.wte(x) + self.wpe(self.pos[:x.shape[1]])
            for b in self.blocks:
                x = b(x)
            if self.last:
                x = self.lm_head(self.ln_f(x))
            return x

    torch.manual_seed(args.seed)  # torch_gpt.py's initial weights, the same on every rank
    gpt = tg.GPT(args.layers, args.d, args.heads, args.ctx)
    head = nn.Linear(args.d, tg.VOCAB, bias=False)
    with torch.no_grad():
        head.weight.copy_(gpt.wte.weight)  # the tied matrix at step 0, trained on its own after
    params_total = sum(p.numel() for p in gpt.parameters()) + head.weight.numel()
    modules = [StageModule(gpt, s, head) for s in mine]
    del gpt

    compiled = None
    if args.mode == "compile":
        if args.schedule in ZERO_BUBBLE:
            # The split backward runs autograd twice over a block's graph (input grads with
            # retain_graph=True, weight grads later), which a compiled backward with donated
            # buffers refuses ("compiled with non-empty donated buffers which requires
            # create_graph=False and retain_graph=False").
            torch._functorch.config.donated_buffer = False
        for m in modules:
            for b in m.blocks:
                b.compile()
        compiled = "each block"

    mb = args.batch // args.micro_batches
    stages = []
    for s, m in zip(mine, modules):
        # static metadata: the example tensors' requires_grad is the metadata's (a received
        # activation that does not require grad would send back no gradient)
        x_meta = (torch.zeros(mb, args.ctx, dtype=torch.long) if s == 0
                  else torch.empty(mb, args.ctx, args.d, requires_grad=True))
        y_meta = torch.empty(mb, args.ctx, tg.VOCAB if s == S - 1 else args.d, requires_grad=True)
        stages.append(pp.PipelineStage(m, s, S, torch.device("cpu"), input_args=(x_meta,),
                                       output_args=(y_meta,)))

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, tg.VOCAB), targets.reshape(-1))

    cls = getattr(pp, cls_name)
    sched = cls(stages[0] if args.schedule in SINGLE_STAGE else stages, args.micro_batches,
                loss_fn=loss_fn, scale_grads=True)

    model = nn.ModuleList(modules)  # this rank's parameters
    opt = tg.make_optimizer(model)
    data, data_name = tg.load_data()
    gen = torch.Generator().manual_seed(args.seed + 2)  # torch_gpt.py's stream, the same on every rank
    offs = torch.arange(args.ctx + 1)
    has_first, has_last = 0 in mine, (S - 1) in mine

    def batch():
        st = torch.randint(0, data.numel() - args.ctx - 1, (args.batch, 1), generator=gen)
        chunk = data[st + offs]
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        losses = [] if has_last else None
        kw = dict(target=y if has_last else None, losses=losses, return_outputs=False)
        with tg.autocast():  # each stage's forward (and the last stage's loss) inside the schedule
            if has_first:
                sched.step(x, **kw)
            else:
                sched.step(**kw)
        if args.clip > 0:  # every stage waits for the last backward's squares, as meshtrain's
            tg.clip_gradients(list(model.parameters()), args.clip, group=dist.group.WORLD)
        opt.step()
        return sum(l.item() for l in losses) / len(losses) if has_last else None

    t_first, warm_s, warm_losses = None, 0.0, []
    for i in range(args.warmup):
        x, y = batch()
        t0 = time.perf_counter()
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

    mem = {
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
        "param_mib": sum(p.numel() * p.element_size() for p in model.parameters()) / MiB,
    }
    gathered = [None] * world
    dist.all_gather_object(gathered, (times, mem, losses, warm_losses))
    dist.destroy_process_group()
    if rank != 0:
        return
    all_times = [g[0] for g in gathered]
    last_rank = owner[S - 1]
    losses, warm_losses = gathered[last_rank][2], gathered[last_rank][3]
    n, fpt = tg.flops_per_token(args.layers, args.d, args.ctx)
    tokens = args.batch * args.ctx
    slowest = [max(ts) for ts in zip(*all_times)]
    res = {
        "peer": "pytorch-pp", "torch": torch.__version__, "backend": args.backend,
        "nproc": world, "pp": P, "schedule": args.schedule, "schedule_class": cls_name,
        "virtual_stages": V, "micro_batches": args.micro_batches, "micro_batch": mb,
        "stage_layers": counts, "stage_ranks": owner,
        "threads": args.threads, "torch_threads": torch.get_num_threads(),
        "mode": args.mode, "compiled": compiled, "tied_head": False, **tg.precision_info(),
        "attn": "sdpa" if tg.use_sdpa else "manual", "optim": args.optim, "clip": args.clip,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "config": args.config, "layers": args.layers, "d": args.d, "heads": args.heads,
        "ctx": args.ctx, "batch": args.batch, "global_batch": args.batch,
        "steps": args.steps, "warmup": args.warmup, "data": data_name,
        "params_total": params_total, "N": n, "flops_per_token": fpt,
        "tokens_per_s_slowest_rank": round(statistics.median(tokens / t for t in slowest), 1),
        **{k + "_per_rank": [round(g[1][k], 2) for g in gathered] for k in mem},
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
