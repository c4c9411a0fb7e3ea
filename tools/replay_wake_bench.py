#!/usr/bin/env python3
"""What a captured host_gather fetch costs when nothing else runs: the time
of a replay of a graph holding only the fetch, (a) replayed back to back
(the pool's threads still polling from the last one), (b) after the pool
has gone idle (a sleep between replays), woken by the replay's host
function (gather_wake=host_node, the default), and (c) the same found by
the pool's watcher alone (gather_wake=watch, every gather_watch_us); and
the CPU the process spends while the table sits idle with the captured
fetch (getrusage over --idle-s seconds, as a share of one core), beside
the same with no captured fetch. Every figure is the median of --replays
replays, each timed by CUDA events around it on an otherwise idle stream.

    python3 tools/replay_wake_bench.py [--tokens 512] [--replays 50] [--watch-us 1000] [--json out.jsonl]

Needs torch with CUDA and the engram Python package (python/README.md).
"""
import argparse
import json
import resource
import statistics
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=512, help="tokens per fetch (24 rows of 256 B each) [512]")
    p.add_argument("--rows", type=int, default=1 << 20, help="table rows [1048576]")
    p.add_argument("--replays", type=int, default=50, help="replays per figure [50]")
    p.add_argument("--idle-ms", type=float, default=5.0, help="sleep before each idle replay [5]")
    p.add_argument("--idle-s", type=float, default=2.0, help="seconds the CPU of an idle table is measured [2]")
    p.add_argument("--watch-us", type=int, default=1000, help="gather_watch_us [1000]")
    p.add_argument("--json", help="JSON lines here too")
    a = p.parse_args(argv)
    for name in ("tokens", "rows", "replays", "watch_us"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if a.idle_ms < 0 or a.idle_s <= 0:
        p.error("--idle-ms must be >= 0 and --idle-s > 0")
    return a


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def idle_share(seconds):
    c0, t0 = cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds() - c0) / (time.monotonic() - t0)


def main(argv=None):
    a = parse_args(argv)
    try:
        import torch
        import engram
    except ImportError as e:
        raise SystemExit("replay_wake_bench: needs torch with CUDA and the engram package: %s" % e)
    if not torch.cuda.is_available():
        raise SystemExit("replay_wake_bench: needs a CUDA GPU")
    K, H = 24, 256
    group = engram.Group.solo()
    out = []

    def run(wake):
        config = dict(gpu_path="host_gather", gather_wake=wake, gather_watch_us=a.watch_us)
        with engram.Buffer(group, a.rows, H, torch.uint8, a.tokens, K, recv="cuda", config=config) as buf:
            buf.engram_write(torch.randint(0, 256, (a.rows, H), dtype=torch.uint8))
            idle_none = idle_share(a.idle_s)
            static_idx = torch.randint(0, a.rows, (a.tokens, K), device="cuda")
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                rows, _ = buf.engram_fetch(static_idx)()
                del rows
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                hook = buf.engram_fetch(static_idx)
                rows, _ = hook()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

            def timed(sleep_s):
                t = []
                for _ in range(a.replays):
                    if sleep_s:
                        time.sleep(sleep_s)
                    start.record()
                    graph.replay()
                    end.record()
                    end.synchronize()
                    t.append(start.elapsed_time(end) * 1e3)
                return statistics.median(t)

            timed(0)  # warm
            back = timed(0)
            idle = timed(a.idle_ms * 1e-3)
            idle_captured = idle_share(a.idle_s)
            del rows, hook, graph
            torch.cuda.synchronize()
        return back, idle, idle_none, idle_captured

    for wake in ("host_node", "watch"):
        back, idle, idle_none, idle_captured = run(wake)
        rec = dict(tool="replay_wake_bench", tokens=a.tokens, rows_per_fetch=a.tokens * K, table_rows=a.rows,
                   gather_wake=wake, gather_watch_us=a.watch_us, back_to_back_us=back, from_idle_us=idle,
                   wake_us=idle - back, idle_cpu_share_no_graph=idle_none, idle_cpu_share_captured=idle_captured,
                   gpu=torch.cuda.get_device_name())
        out.append(rec)
        print("gather_wake=%-9s watch %d us: replay back to back %.1f us, from idle %.1f us (wake +%.1f us); "
              "idle CPU %.4f of a core with the captured fetch, %.4f without"
              % (wake, a.watch_us, back, idle, idle - back, idle_captured, idle_none), flush=True)
    if a.json:
        with open(a.json, "a") as f:
            for rec in out:
                f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
