"""The launcher of the multi-process PyTorch peers (torch_ddp_gpt.py, torch_moe_gpt.py, and through
torch_ddp_gpt.launch torch_pp_gpt.py, torch_tp_gpt.py and torch_zero_gpt.py). Imports no torch.

A peer started without RANK in the environment calls launch(): it starts args.nproc copies of the
same command line with the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1, a free MASTER_PORT; GLOO_SOCKET_IFNAME=lo unless set) and waits for them; under
torchrun each copy is a rank directly and this is not called. Each rank bounds its own thread pools
from its --threads (bench/peers/torch_gpt.py does it before torch loads).
"""
import os
import socket
import subprocess
import sys
import time


def launch(args, name):
    """Starts args.nproc ranks of this script, like torchrun, for at most args.timeout seconds;
    returns 0 when all succeed, else exits with "NAME: rank k exited with s" (or "NAME: timeout")
    after stopping the others."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(args.nproc):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.nproc), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(args.nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        procs.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    deadline = time.time() + args.timeout
    status = [None] * len(procs)
    while any(s is None for s in status):
        for i, p in enumerate(procs):
            if status[i] is None:
                status[i] = p.poll()
        failed = [i for i, s in enumerate(status) if s not in (None, 0)]
        if failed or time.time() > deadline:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
            why = "rank %d exited with %s" % (failed[0], status[failed[0]]) if failed else "timeout"
            sys.exit("%s: %s" % (name, why))
        time.sleep(0.1)
    return 0
