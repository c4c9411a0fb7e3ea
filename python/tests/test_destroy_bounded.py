"""A rank cut off from its peers (here: one that never reaches destroy) makes
the others' destroy fail within engram's timeout_ms, naming it, although
the torch process group's own timeout is far longer."""
import datetime
import os
import time

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import ranks  # noqa: E402

WORLD = 2
TIMEOUT_MS = 2000
GLOO_TIMEOUT = datetime.timedelta(minutes=10)  # what the destroy must not wait for
ABSENT_S = 40  # how long the cut-off rank stays away


def _rank_main(rank, port, outdir):
    import engram

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=WORLD,
                            timeout=GLOO_TIMEOUT)
    group = engram.Group.from_torch(local_size=WORLD)
    buf = engram.Buffer(group, 16, 64, torch.bfloat16, 4, 2, recv="host",
                        config={"transport": "loopback", "timeout_ms": TIMEOUT_MS})
    buf.engram_write(torch.zeros(16, 64, dtype=torch.bfloat16))
    group.barrier()
    if rank == 1:
        time.sleep(ABSENT_S)  # cut off: never destroys
        os._exit(0)
    start = time.monotonic()
    try:
        buf.destroy()
        outcome = "destroy returned"
    except engram.Error as e:
        outcome = "%s: %s | cause: %s" % (type(e).__name__, e, e.__cause__)
    with open(os.path.join(outdir, "rank0.txt"), "w") as f:
        f.write("%.1f\n%s" % (time.monotonic() - start, outcome))
    os._exit(0)


def test_destroy_is_bounded_by_engram_timeout(tmp_path):
    env = dict(os.environ, ENGRAM_LOG_LEVEL="error")
    ctx = mp.get_context("spawn")
    port = ranks.free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, port, str(tmp_path))) for r in range(WORLD)]
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    procs[0].join(ABSENT_S - 10)
    alive = procs[0].is_alive()
    for p in procs:
        p.kill()
        p.join()
    assert not alive, "rank 0's destroy still waits after %d s (timeout_ms=%d)" % (ABSENT_S - 10, TIMEOUT_MS)
    seconds, outcome = (tmp_path / "rank0.txt").read_text().split("\n", 1)
    assert float(seconds) < TIMEOUT_MS / 1000 + 5, outcome
    assert "no answer from rank 1" in outcome, outcome
    assert "timeout_ms=%d" % TIMEOUT_MS in outcome, outcome
