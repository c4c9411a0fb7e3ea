#!/usr/bin/env python3
"""How much does a bf16 8192^3 GEMM stream slow when another stream holds N
SMs and moves no memory? Separates SM occupancy from a fetch's traffic.

For each N, a kernel whose blocks only spin (each taking a whole SM's shared
memory, as engram's gather block takes its registers) is queued on a
priority -1 stream first, long enough to outlast the GEMMs, so it holds its
N SMs for all of them; "paired" launches it in clusters of two (pairs of
SMs of one GPC, as engram's gather kernel launches), "single" without
clusters. Each round times the GEMMs alone, then beside the spinning, back
to back; the line prints the ratio per round, their median, and the GEMM
kernel cuBLAS ran (name and grid: a persistent GEMM sized to every SM is
the case where holding SMs costs whole waves). Needs torch with CUDA and
cupy (docs/BENCHMARKS.md, "GPU fetch beside GEMMs"):

    python3 -W ignore tools/sm_hold_probe.py [--sms 2,4,6,8,10,12,16] [--rounds 3]
"""
import argparse
import importlib
import json
import os
import statistics
import tempfile

SOURCE = r'''
extern "C" __global__ void %s(long long ns) {
    extern __shared__ char hold[];
    unsigned long long t0, t;
    asm volatile("mov.u64 %%0, %%%%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %%0, %%%%globaltimer;" : "=l"(t));
    } while ((long long)(t - t0) < ns);
    if (ns < 0) hold[threadIdx.x] = 0;
}'''
SMEM = 200 * 1024


def need(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise SystemExit("sm_hold_probe: needs torch with CUDA and cupy: %s" % e)


def spin_kernel(cp, paired):
    name = "spin_paired" if paired else "spin_single"
    src = SOURCE % name
    if paired:
        src = src.replace('extern "C" __global__ void', 'extern "C" __global__ void __cluster_dims__(2, 1, 1)')
    k = cp.RawKernel(src, name)
    k.max_dynamic_shared_size_bytes = SMEM
    return k


def gemm_kernel(torch, a, b):
    """The name and grid of the kernel a @ b runs, from torch's profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        a @ b
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    if not kernels:
        return "unknown"
    k = max(kernels, key=lambda e: e.get("dur", 0))
    return "%s grid %s block %s" % (k["name"], k["args"].get("grid"), k["args"].get("block"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sms", default="2,4,6,8,10,12,16", help="SM counts to hold (even) [2,4,6,8,10,12,16]")
    p.add_argument("--rounds", type=int, default=3, help="alone/beside pairs per case [3]")
    p.add_argument("--gemms", type=int, default=20, help="GEMMs per run [20]")
    args = p.parse_args(argv)
    try:
        args.counts = [int(v) for v in args.sms.split(",")]
    except ValueError:
        args.counts = []
    if not args.counts or any(n < 2 or n % 2 for n in args.counts) or args.rounds < 1 or args.gemms < 1:
        raise SystemExit("sm_hold_probe: --sms wants even counts >= 2, --rounds and --gemms >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    cp, torch = need("cupy"), need("torch")
    if not torch.cuda.is_available():
        raise SystemExit("sm_hold_probe: needs a CUDA GPU")

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    c = torch.empty_like(a)
    gemm_stream = torch.cuda.Stream()
    spin_stream = torch.cuda.Stream(priority=-1)
    kernels = {True: spin_kernel(cp, True), False: spin_kernel(cp, False)}

    def gemm_ms(sms=0, paired=True, spin_ms=0.0):
        torch.cuda.synchronize()
        g0, g1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if sms:
            with cp.cuda.ExternalStream(spin_stream.cuda_stream):
                kernels[paired]((sms,), (1024,), (cp.int64(int(spin_ms * 1e6)),), shared_mem=SMEM)
        with torch.cuda.stream(gemm_stream):
            g0.record()
            for _ in range(args.gemms):
                torch.matmul(a, b, out=c)
            g1.record()
        torch.cuda.synchronize()
        return g0.elapsed_time(g1)

    for _ in range(3):
        alone = gemm_ms()
    print("GEMM kernel: %s; %d GEMMs alone %.2f ms; %d SMs" % (
        gemm_kernel(torch, a, b), args.gemms, alone, torch.cuda.get_device_properties(0).multi_processor_count))
    for n in args.counts:
        for paired in (True, False):
            ratios = []
            for _ in range(args.rounds):
                alone = gemm_ms()
                ratios.append(gemm_ms(n, paired, 1.5 * alone + 5) / alone)
            print("hold %2d SMs %-6s: gemm x %s, median %.3f" % (
                n, "paired" if paired else "single", " ".join("%.3f" % r for r in ratios), statistics.median(ratios)))


if __name__ == "__main__":
    main()
