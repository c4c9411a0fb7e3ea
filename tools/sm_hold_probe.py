#!/usr/bin/env python3
"""How much does a bf16 8192^3 GEMM stream slow when another stream holds N
SMs with kernels that move no memory (each block spins and takes a whole
SM's shared memory, as engram's gather block takes its registers)?
Separates SM occupancy from the fetch's memory traffic. Prints one line per
(sms, kernel length): the GEMMs' time beside the spinning over their time
alone just before, three rounds. Kernel lengths assume the H200's 1980 MHz
SM clock. Needs torch with CUDA and cupy (docs/BENCHMARKS.md, stop 21):

    python3 -W ignore tools/sm_hold_probe.py
"""
import statistics, sys
import cupy as cp
import torch

SPIN = cp.RawKernel(r'''
extern "C" __global__ void spin(long long cycles) {
    extern __shared__ char hold[];
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    if (cycles < 0) hold[threadIdx.x] = 0;
}''', 'spin')
SMEM = 200 * 1024
SPIN.max_dynamic_shared_size_bytes = SMEM
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn_like(a)
gs = torch.cuda.Stream()
fs = torch.cuda.Stream(priority=-1)

def gemm_ms(sms=0, us=0):
    torch.cuda.synchronize()
    g0, g1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if sms:
        n = int(40e3 / us) + 1  # about 40 ms of spinning, longer than the GEMMs
        with cp.cuda.ExternalStream(fs.cuda_stream):
            for _ in range(n):
                SPIN((sms,), (1024,), (cp.int64(int(us * 1e-6 * 1.98e9)),), shared_mem=SMEM)
    with torch.cuda.stream(gs):
        g0.record()
        for _ in range(20):
            a @ b
        g1.record()
    torch.cuda.synchronize()
    return g0.elapsed_time(g1)

gemm_ms()
for sms in (4, 8, 16):
    for us in (65, 1000):
        ratios = []
        for _ in range(3):
            alone = gemm_ms()
            ratios.append(gemm_ms(sms, us) / alone)
        print("spin %2d SMs, %4d us kernels: gemm x %s (alone %.2f ms)" % (sms, us, " ".join("%.3f" % r for r in ratios), alone))
