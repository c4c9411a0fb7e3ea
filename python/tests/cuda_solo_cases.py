"""Device-tier cases that time one process with its GPU to itself, as a
rank of a serving job runs (test_cuda.py runs them on one rank: a second
process on the GPU and its host measures its neighbour as much as engram):
the stream-ordered hook's 1000-call loop target."""
import time

import torch

import engram
from cuda_cases import Context, E, H, T, K  # noqa: F401 - Context: ranks.py makes each rank's


def timed_loop(buf, idx):
    """1000 fetch + hook calls: (host us per call, GPU us per fetch, median
    host us of the first 100 calls)."""
    for _ in range(20):
        buf.engram_fetch(idx)()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    stamps = [time.perf_counter()]
    for _ in range(1000):
        buf.engram_fetch(idx)()
        stamps.append(time.perf_counter())
    host_us = (stamps[-1] - stamps[0]) * 1e3
    end.record()
    torch.cuda.synchronize()
    first = sorted(b - a for a, b in zip(stamps[:100], stamps[1:101]))[50] * 1e6
    return host_us, start.elapsed_time(end), first  # us per call (ms / 1000 calls)


def case_stream_hook_loop_target(ctx):
    """1000 fetch + hook calls on one stream (512 x 24): per call on the
    host (target <= 10 us) and GPU time per fetch against the blocking
    hook's (target: no worse), beside 1000 of torch's own kernels of the
    fetch's GPU length from Python (how fast this host launches, and how far
    CUDA lets a host run ahead of its stream before a launch blocks)."""
    idx = ctx.indices().cuda()
    results = {}
    for ordered in (False, True):
        buf = engram.Buffer(ctx.group, E, H, torch.bfloat16, T, K, recv="cuda", config=ctx.config,
                            stream_ordered=ordered)
        buf.engram_write(ctx.shard_bytes.view(torch.bfloat16))
        results[ordered] = timed_loop(buf, idx)
        buf.synchronize()
        buf.destroy()
    (b_host, b_gpu, _), (s_host, s_gpu, s_first) = results[False], results[True]
    cycles = int(s_gpu * 1e-6 * torch.cuda.get_device_properties(0).clock_rate * 1e3)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(1000):
        torch.cuda._sleep(cycles)
    torch_us = (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    print("stream hook loop: stream-ordered %.2f us/call on the host (median of the first 100: %.2f), "
          "%.2f us/fetch on the GPU; blocking %.2f us/call, %.2f us/fetch; 1000 torch kernels of %.0f us: "
          "%.2f us/call on the host" % (s_host, s_first, s_gpu, b_host, b_gpu, s_gpu, torch_us), flush=True)
    assert s_host <= 10, "stream-ordered fetch + hook: %.2f us per call on the host (target <= 10)" % s_host
    assert s_gpu <= b_gpu * 1.05, "GPU time per fetch %.2f us stream-ordered, %.2f us blocking" % (s_gpu, b_gpu)


CASES = [(name[len("case_"):], fn) for name, fn in globals().items() if name.startswith("case_")]
