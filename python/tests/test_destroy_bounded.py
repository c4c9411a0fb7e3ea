"""Teardown is bounded on every rank: one rank of three vanishes without a
word (SIGSTOP: alive, its sockets open, answering nothing) while the
others fetch from it or wait in a collective with it, and each survivor's
Buffer.destroy() raises engram.PeerError naming it within the buffer's
timeout_ms (one bound for the whole destroy, plus slack), although the
torch process group's own timeout is ten minutes; the survivors' processes
then exit at once, with no collective left pending in the process group.

The ranks share a torch gloo group (Group.from_torch) and a buffer on ucx
over tcp, whose gets need the owner's CPU, so a stopped owner stalls the
fetches of its rows. The victim stops mid-fetch, or on entering one of the
collectives of engram_write or of destroy() (counted per call, through the
group's collectives); once it first comes late to the collective before
the one it stops in, which destroy() waits for out of the same bound; once
it is rank 0, which also serves the process group's store."""
import datetime
import json
import os
import re
import signal
import time

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import ranks  # noqa: E402

WORLD = 3
TIMEOUT_MS = 2000
SLACK_S = 1.5  # scheduling on a loaded machine with few cores
LATE_S = 1.5  # how late the victim comes to the collective before the one it stops in
FETCH_S = 0.3  # how long the survivors fetch across the victim's stop
EXIT_S = 10  # a survivor's process exit after its destroy returned
GLOO_TIMEOUT = datetime.timedelta(minutes=10)  # what neither destroy nor exit may wait for
E, H, T, K = 256, 64, 8, 4


def _rank_main(rank, port, outdir, victim, phase, index, late):
    import engram
    from engram import _groups

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=WORLD,
                            timeout=GLOO_TIMEOUT)
    state = {"phase": "create", "entered": 0}
    exchange = _groups._TorchCollectives._exchange

    def counted(self, what, mine, outs):  # the victim's fault: stop on entering collective `index` of `phase`
        if rank == victim and state["phase"] == phase:
            state["entered"] += 1
            if late and state["entered"] == index - 1:
                time.sleep(LATE_S)
            if state["entered"] == index:
                os.kill(os.getpid(), signal.SIGSTOP)
        return exchange(self, what, mine, outs)

    _groups._TorchCollectives._exchange = counted
    group = engram.Group.from_torch(local_size=WORLD)
    buf = engram.Buffer(group, E, H, torch.bfloat16, T, K, recv="host",
                        config={"transport": "ucx", "timeout_ms": TIMEOUT_MS})
    shard = torch.arange(E * H, dtype=torch.float32).reshape(E, H).add_(rank).to(torch.bfloat16)
    out = {}
    state["phase"] = "write"
    try:
        buf.engram_write(shard)
        out["write"] = "ok"
    except engram.Error as e:
        out["write"] = "%s: %s" % (type(e).__name__, e)
    if phase == "fetch" and out["write"] == "ok":
        idx = torch.arange(T * K).reshape(T, K).mul_(E // 2 + 1).remainder_(WORLD * E)  # rows of every rank
        if rank == victim:
            hook = buf.engram_fetch(idx)
            os.kill(os.getpid(), signal.SIGSTOP)  # its gets in flight, the survivors mid-fetch
            del hook
        start, waits, failed = time.monotonic(), [], None
        while failed is None and time.monotonic() - start < FETCH_S:
            hook = buf.engram_fetch(idx)
            t0 = time.monotonic()
            try:
                rows, _ = hook()
                del rows
            except engram.Error as e:
                out["fetch"] = "%s: %s" % (type(e).__name__, e)
                failed = hook  # its fetch stays held while the hook lives
            waits.append(time.monotonic() - t0)
            del hook
        out["longest_wait_s"] = max(waits)
    state["phase"] = "destroy"
    if phase == "fetch" and failed is not None:  # destroy with that hook alive: refused, within the bound
        t0 = time.monotonic()
        try:
            buf.destroy()
        except engram.Error as e:
            out["busy"] = "%s: %s" % (type(e).__name__, e)
        out["busy_s"] = time.monotonic() - t0
        del failed
    t0 = time.monotonic()
    try:
        buf.destroy()
        out["destroy"] = "returned"
    except engram.Error as e:
        out["destroy"] = "%s: %s | cause: %s" % (type(e).__name__, e, e.__cause__)
    out["destroy_s"] = time.monotonic() - t0
    out["returned_at"] = time.time()
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(out, f)
    # a plain exit: the process group and its store are torn down by torch


def _run(tmp_path, victim=2, phase="destroy", index=1, late=False):
    """Every survivor's outcome, and when its process ended."""
    ctx = mp.get_context("spawn")
    port = ranks.free_port()
    saved = dict(os.environ)
    os.environ.update(ENGRAM_LOG_LEVEL="error", UCX_TLS="tcp,self")
    try:
        procs = [ctx.Process(target=_rank_main, args=(r, port, str(tmp_path), victim, phase, index, late))
                 for r in range(WORLD)]
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    survivors = [r for r in range(WORLD) if r != victim]
    ended = {}
    deadline = time.monotonic() + 120
    while len(ended) < len(survivors) and time.monotonic() < deadline:
        for r in survivors:
            if r not in ended and not procs[r].is_alive():
                ended[r] = time.time()
        time.sleep(0.05)
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join()
    outcomes = {}
    for r in survivors:
        path = tmp_path / ("rank%d.json" % r)
        assert path.exists(), "rank %d never returned from destroy (exit code %s)" % (r, procs[r].exitcode)
        outcomes[r] = json.loads(path.read_text())
        assert r in ended, "rank %d's process did not exit: %s" % (r, outcomes[r])
        outcomes[r]["exit_s"] = ended[r] - outcomes[r]["returned_at"]
        assert procs[r].exitcode == 0, (r, procs[r].exitcode, outcomes[r])
    return outcomes


def _check(outcomes, victim, write_fails=False):
    for r, o in outcomes.items():
        assert o["destroy_s"] < TIMEOUT_MS / 1000 + SLACK_S, (r, o)
        assert re.match(r"PeerError: destroy: engram_(table|context)_destroy: torn down on this rank without the "
                        r"other ranks' agreement", o["destroy"]), (r, o)
        bound = re.search(r"no answer from rank %d within the (\d+) ms the engram group allows it" % victim,
                          o["destroy"])
        assert bound and int(bound.group(1)) <= TIMEOUT_MS, (r, o)
        assert o["exit_s"] < EXIT_S, (r, o)
        if write_fails:
            assert o["write"].startswith(("TimeoutError", "PeerError")), (r, o)
        else:
            assert o["write"] == "ok", (r, o)


def test_mid_fetch(tmp_path):
    """The stopped owner's rows never come: each survivor's hook raises by
    the timeout. A destroy while that hook lives is refused (BusyError) and
    fails the group, within the bound; once the hook is dropped, the next
    destroy tears down at once."""
    outcomes = _run(tmp_path, phase="fetch")
    _check(outcomes, 2)
    for r, o in outcomes.items():
        assert o["fetch"].startswith("TimeoutError") and o["longest_wait_s"] < TIMEOUT_MS / 1000 + SLACK_S, (r, o)
        assert o["busy"].startswith("BusyError") and o["busy_s"] < TIMEOUT_MS / 1000 + SLACK_S, (r, o)
        assert o["destroy_s"] < SLACK_S, (r, o)


def test_in_write(tmp_path):
    _check(_run(tmp_path, phase="write", index=1), 2, write_fails=True)


@pytest.mark.parametrize("index", [1, 2, 3], ids=["table_agreement", "ucx_barrier", "context_agreement"])
def test_in_destroy(tmp_path, index):
    _check(_run(tmp_path, phase="destroy", index=index), 2)


def test_late_then_gone(tmp_path):
    """The victim comes LATE_S late to the table's agreement, then stops at
    the context's: one bound for both."""
    _check(_run(tmp_path, phase="destroy", index=3, late=True), 2)


def test_store_host_gone(tmp_path):
    """Rank 0, which serves the process group's store, stops."""
    _check(_run(tmp_path, victim=0, phase="destroy", index=1), 0)
