"""engram.Group constructors: from a torch.distributed process group, from an
mpi4py communicator, and the fork launcher for standalone scripts."""
import datetime
import os
import socket
import threading
import time
import weakref
from typing import Any, Callable, List, Optional

from . import _engram
from ._args import I32, check_int
from ._engram import Error, InvalidArgumentError, PeerError, StateError, TimeoutError


def _serving(done, deadline: float) -> bool:
    """Waits until done() (a nonblocking collective's completion test) or
    `deadline` (time.monotonic()), serving the group's progress hook meanwhile:
    with a transport whose gets need the owner's CPU (ucx over shared memory or
    TCP) the peers' gets complete only while this rank serves them, also while
    it is parked in a collective. False when the deadline passed first."""
    while not done():
        if time.monotonic() >= deadline:
            return False
        if not _engram.Group._serve_progress():
            time.sleep(_POLL_S)  # nothing to serve: poll gently
    return True


# Between polls of a collective when there is nothing to serve.
_POLL_S = 0.001

# What a collective's bound is, for its messages: Group.timeout_ms, which
# within a teardown is what is left of it.
_BOUND = "the engram group allows it (its timeout_ms, or what a teardown has left of it)"

# The gloo tag of engram's messages on a torch process group ("eng"): apart
# from the process group's collectives (gloo gives those their own slots)
# and from point-to-point messages of the caller's under other tags.
_TAG = 0x656E67


class _TorchCollectives:
    """A torch process group's collectives for an engram group, made of
    point-to-point messages between every pair of ranks (gloo's send and
    recv, tag _TAG) and bounded by the engram group's timeout_ms, not by the
    process group's own timeout (gloo's is 30 minutes by default).

    Each rank sends its part to every other rank and receives theirs; a
    helper thread waits for the messages, each wait bounded by what is left
    of timeout_ms, while the calling thread serves the group's progress hook.
    Nothing outlives the bound: gloo closes its connection to a rank whose
    message did not come in time (later messages to that rank then fail at
    once), and the process group's own collectives and worker threads are
    never used, so none is left queued for its destructor to wait on at exit.
    A collective that fails names the ranks whose messages never came (or
    whose connection broke); the engram group then refuses further
    collectives."""

    def __init__(self, dist, cpu, rank, size):
        self.dist, self.cpu, self.rank, self.size = dist, cpu, rank, size
        self.group = None  # the engram Group, weakly (a weakref.ref), once made

    def _exchange(self, what, mine, outs):
        """Sends `mine` (a CPU uint8 tensor) to every other rank and receives
        rank r's into outs[r] within the group's timeout_ms."""
        timeout_ms = self.group().timeout_ms  # alive: it is the one calling
        deadline = time.monotonic() + timeout_ms / 1000
        peers = [r for r in range(self.size) if r != self.rank]
        failed = {}  # rank -> what went wrong with its messages
        works = []
        for kind in ("receive", "send"):  # the receives first: a peer's message finds its buffer posted
            for r in peers:
                if r in failed:
                    continue
                try:
                    works.append((r, kind, self.cpu.recv([outs[r]], r, _TAG) if kind == "receive"
                                  else self.cpu.send([mine], r, _TAG)))
                except RuntimeError as e:  # a connection gloo has closed already
                    failed[r] = "%s: %s" % (kind, e)

        def wait_all():
            for r, kind, work in works:
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                try:
                    work.wait(datetime.timedelta(milliseconds=left_ms))
                except RuntimeError as e:
                    failed.setdefault(r, "%s: %s" % (kind, e))

        waiter = threading.Thread(target=wait_all, name="engram-torch-collective", daemon=True)
        waiter.start()
        # every wait of the waiter is bounded, so it ends soon after the deadline
        _serving(lambda: not waiter.is_alive(), float("inf"))
        waiter.join()
        if not failed:
            return
        late = sorted(r for r, why in failed.items() if "timeout" in why.lower() or "timed out" in why.lower())
        broken = sorted(r for r in failed if r not in late)
        plural = lambda ranks: "rank%s %s" % ("s" if len(ranks) > 1 else "", ", ".join(map(str, ranks)))
        late_text = "no answer from %s within the %d ms %s" % (plural(late), timeout_ms, _BOUND)
        if not broken:
            raise TimeoutError("rank %d: %s through the torch process group did not complete: %s"
                               % (self.rank, what, late_text))
        raise PeerError("rank %d: %s through the torch process group failed: the connection to %s broke (%s)%s"
                        % (self.rank, what, plural(broken), failed[broken[0]], "; " + late_text if late else ""))

    def allgather(self, data: bytes):
        import torch

        n = len(data)
        # on the CPU whatever torch.set_default_device says (DeepEP's init_dist sets cuda): the side group is gloo's
        out = torch.empty(self.size * n, dtype=torch.uint8, device="cpu")
        if n:
            mine = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            outs = list(out.split(n))
            outs[self.rank].copy_(mine)
            self._exchange("an allgather of %d bytes" % n, mine, outs)
        return out.numpy()

    def barrier(self):
        import torch

        outs = [torch.zeros(1, dtype=torch.uint8, device="cpu") for _ in range(self.size)]
        self._exchange("a barrier", torch.ones(1, dtype=torch.uint8, device="cpu"), outs)


class _MpiCollectives:
    """An mpi4py communicator's collectives, nonblocking ones polled up to the
    engram group's timeout_ms (MPI does not say which ranks have not entered
    one). MPI cannot cancel a collective: after a timeout its buffers stay
    held and the group refuses further collectives."""

    def __init__(self, mpi, comm, rank, size):
        self.mpi, self.comm, self.rank, self.size = mpi, comm, rank, size
        self.group = None  # the engram Group, weakly (a weakref.ref), once made
        self.pending = None  # what a timed-out collective still uses

    def _run(self, what, req, *buffers):
        if self.pending is not None:
            raise StateError("rank %d: %s through the MPI communicator after an earlier collective timed out"
                             % (self.rank, what))
        timeout_ms = self.group().timeout_ms  # alive: it is the one calling
        if not _serving(req.Test, time.monotonic() + timeout_ms / 1000):
            self.pending = (req, buffers)
            raise TimeoutError("rank %d: %s through the MPI communicator did not complete within the %d ms %s "
                               "(MPI does not say which ranks have not entered it)" % (self.rank, what, timeout_ms,
                                                                                      _BOUND))

    def allgather(self, data: bytes):
        n = len(data)
        send, out = bytes(data), bytearray(self.size * n)
        if n:
            self._run("an allgather of %d bytes" % n,
                      self.comm.Iallgather([send, self.mpi.BYTE], [out, self.mpi.BYTE]), send, out)
        return bytes(out)

    def barrier(self):
        self._run("a barrier", self.comm.Ibarrier())


class Group(_engram.Group):
    __doc__ = _engram.Group.__doc__

    @classmethod
    def from_torch(cls, process_group=None, local_rank: Optional[int] = None,
                   local_size: Optional[int] = None) -> "Group":
        """A group over a torch.distributed process group (default: the world).

        Collectives (allgather, barrier) are point-to-point messages between
        every pair of ranks (gloo tag 0x656E67) on the process group itself
        for gloo; for another backend (nccl) on a CPU side group made with
        new_group(backend="gloo"), which is collective over the world: every
        rank calls from_torch at the same point. local_size (ranks per node)
        comes from the argument, else LOCAL_WORLD_SIZE (as torchrun sets it),
        else from the hosts of the ranks (a host is one kernel, network and
        pid namespace, as everywhere in engram; not the hostname), which must
        be grouped by host in consecutive ranks. local_rank, when given or in
        LOCAL_RANK, is checked against rank % local_size. Each collective is
        bounded by the group's timeout_ms (engram's timeout, whatever the
        process group's own) and leaves nothing pending in the process group
        past it: one that fails names the ranks whose messages did not come
        in time (gloo then closes its connection to them) or whose
        connection broke, and the group refuses further collectives."""
        import torch.distributed as dist

        pg = process_group if process_group is not None else dist.group.WORLD
        cpu = pg if dist.get_backend(pg) == "gloo" else dist.new_group(ranks=_pg_ranks(dist, pg), backend="gloo")
        rank, size = dist.get_rank(cpu), dist.get_world_size(cpu)
        if local_size is None:
            env = os.environ.get("LOCAL_WORLD_SIZE")
            local_size = int(env) if env else _local_size_from_hosts(
                rank, size, lambda obj: _torch_allgather_object(dist, cpu, obj, size))
        if local_rank is None and os.environ.get("LOCAL_RANK"):
            local_rank = int(os.environ["LOCAL_RANK"])
        local_rank, local_size = _check_local(rank, size, local_rank, local_size)

        coll = _TorchCollectives(dist, cpu, rank, size)
        g = cls._from_callbacks(rank, size, local_size, coll.allgather, coll.barrier)
        coll.group = weakref.ref(g)
        g._keep = cpu  # the side group lives as long as this group
        return g

    @classmethod
    def from_mpi(cls, comm=None, local_size: Optional[int] = None) -> "Group":
        """A group over an mpi4py communicator (default MPI.COMM_WORLD);
        local_size defaults to the size of the node's shared-memory split.
        Each collective is bounded by the group's timeout_ms."""
        from mpi4py import MPI

        comm = comm if comm is not None else MPI.COMM_WORLD
        rank, size = comm.Get_rank(), comm.Get_size()
        if local_size is None:
            node = comm.Split_type(MPI.COMM_TYPE_SHARED)
            local_size = node.Get_size()
            node.Free()
        _, local_size = _check_local(rank, size, None, local_size)
        coll = _MpiCollectives(MPI, comm, rank, size)
        g = cls._from_callbacks(rank, size, local_size, coll.allgather, coll.barrier)
        coll.group = weakref.ref(g)
        g._keep = comm
        return g

    @classmethod
    def solo(cls) -> "Group":
        """A group of this process alone."""
        return super().solo()


def as_group(obj) -> Group:
    """obj if it is a Group, else a Group over a torch ProcessGroup or an mpi4py communicator."""
    if isinstance(obj, _engram.Group):
        return obj
    mod = type(obj).__module__
    if mod.startswith("torch"):
        return Group.from_torch(obj)
    if mod.startswith("mpi4py"):
        return Group.from_mpi(obj)
    raise InvalidArgumentError("group: expected an engram.Group, a torch.distributed ProcessGroup or an mpi4py "
                               "communicator, got %s" % type(obj).__name__)


def launch(nranks: int, fn: Callable[..., Any], *args, local_size: int = 0, **kwargs) -> List[int]:
    """Runs fn(group, *args, **kwargs) in `nranks` forked processes connected by
    engram's fork provider (emulated nodes of local_size ranks; 0 = one node)
    and waits for them. A rank's exit code is fn's int result (else 0), 1 on an
    exception (printed), or SystemExit's code. Raises engram.Error naming the
    ranks that failed; returns the exit codes otherwise. fork: call it before
    starting threads (CUDA included) in this process."""

    nranks = check_int("nranks", nranks, 1, I32)
    local_size = check_int("local_size", local_size, 0, I32)
    if not callable(fn):
        raise InvalidArgumentError("launch: fn must be callable, got %s" % type(fn).__name__)

    def rank_main(group):
        return fn(group, *args, **kwargs)

    codes = _engram.fork_run(nranks, rank_main, local_size, Group)
    bad = [(r, c) for r, c in enumerate(codes) if c != 0]
    if bad:
        err = Error("launch: ranks exited with failures: %s" % ", ".join("rank %d code %d" % rc for rc in bad))
        err.exit_codes = codes
        raise err
    return codes


def _pg_ranks(dist, pg):
    if hasattr(dist, "get_process_group_ranks"):
        return dist.get_process_group_ranks(pg)
    ranks = dist.distributed_c10d._pg_group_ranks[pg]  # torch 1.13: {global rank: group rank}
    return sorted(ranks, key=ranks.get)


def _torch_allgather_object(dist, pg, obj, size):
    out = [None] * size
    dist.all_gather_object(out, obj, group=pg)
    return out


def _local_size_from_hosts(rank, size, allgather_object):
    """Ranks per host, hosts as the library tells them (host_identity: one
    kernel, network and pid namespace), so two containers of one machine are
    two hosts whatever their hostnames; the hostnames only name them."""
    gathered = allgather_object((_engram.host_identity(), socket.gethostname()))
    hosts = [h for h, _ in gathered]
    local = hosts.count(hosts[rank])
    for node_start in range(0, size, local):
        if len(set(hosts[node_start:node_start + local])) != 1 or size % local:
            raise InvalidArgumentError("Group.from_torch: ranks are not grouped by host in consecutive ranks of "
                                       "equal count (hostnames by rank: %s); pass local_size or set "
                                       "LOCAL_WORLD_SIZE" % [name for _, name in gathered])
    return local


def _check_local(rank, size, local_rank, local_size):
    """(local_rank, local_size) as ints, checked against the group (operator.index() values taken)."""
    local_size = check_int("local_size", local_size, 1, I32)
    if size % local_size:
        raise InvalidArgumentError("local_size: must divide the group size %d, got %r" % (size, local_size))
    if local_rank is not None:
        local_rank = check_int("local_rank", local_rank, 0, I32)
        if local_rank != rank % local_size:
            raise InvalidArgumentError("local_rank: %d, but rank %d with local_size %d is local rank %d (engram's "
                                       "nodes are consecutive ranks)" % (local_rank, rank, local_size,
                                                                         rank % local_size))
    return local_rank, local_size
