"""Runs test cases on several torch.multiprocessing ranks joined by a gloo
process group, each case once per rank in the same order (the engram calls
in them are collective), and collects every rank's outcome per case."""
import json
import os
import socket
import traceback

import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, case_module, config, outdir):
    import importlib

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    mod = importlib.import_module(case_module)
    results = {}
    try:
        ctx = mod.Context(rank, world, config)
        for name, fn in mod.CASES:
            try:
                fn(ctx)
                results[name] = "ok"
            except getattr(mod, "Skip", ()) as e:
                results[name] = "skip: %s" % e
            except BaseException:  # noqa: B902 - every failure is a case's result
                results[name] = traceback.format_exc()
            with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
                json.dump(results, f)
    finally:
        dist.destroy_process_group()


def run(case_module, world, config, outdir, env=None):
    """{case: {rank: "ok" or the traceback}} after every rank ran every case."""
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        mp.start_processes(_rank_main, args=(world, free_port(), case_module, config, str(outdir)), nprocs=world,
                           join=True, start_method="spawn")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out = {}
    for r in range(world):
        with open(os.path.join(outdir, "rank%d.json" % r)) as f:
            for name, res in json.load(f).items():
                out.setdefault(name, {})[r] = res
    return out
