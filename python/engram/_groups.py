"""engram.Group constructors: from a torch.distributed process group, from an
mpi4py communicator, and the fork launcher for standalone scripts."""
import os
import socket
from typing import Any, Callable, List, Optional

from . import _engram
from ._args import I32, check_int
from ._engram import Error, InvalidArgumentError


def _serving(work) -> None:
    """Waits for a torch collective started with async_op=True, serving the
    group's progress hook meanwhile: with a transport whose gets need the
    owner's CPU (ucx over shared memory or TCP) the peers' gets complete only
    while this rank serves them, also while it is parked in a collective."""
    while not work.is_completed():
        if not _engram.Group._serve_progress():
            break  # nothing to serve: block
    work.wait()  # raises the collective's error, if any


class Group(_engram.Group):
    __doc__ = _engram.Group.__doc__

    @classmethod
    def from_torch(cls, process_group=None, local_rank: Optional[int] = None,
                   local_size: Optional[int] = None) -> "Group":
        """A group over a torch.distributed process group (default: the world).

        Collectives (allgather, barrier) go through the process group itself
        for gloo; for another backend (nccl) through a CPU side group made with
        new_group(backend="gloo"), which is collective over the world: every
        rank calls from_torch at the same point. local_size (ranks per node)
        comes from the argument, else LOCAL_WORLD_SIZE (as torchrun sets it),
        else from the hosts of the ranks (a host is one kernel, network and
        pid namespace, as everywhere in engram; not the hostname), which must
        be grouped by host in consecutive ranks. local_rank, when given or in
        LOCAL_RANK, is checked against rank % local_size."""
        import torch
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

        def allgather(data: bytes):
            n = len(data)
            out = torch.empty(size * n, dtype=torch.uint8, device="cpu")  # the side group is gloo's, whatever
            # torch.set_default_device says (DeepEP's init_dist sets cuda)
            if n:
                mine = torch.frombuffer(bytearray(data), dtype=torch.uint8)
                _serving(dist.all_gather(list(out.split(n)), mine, group=cpu, async_op=True))
            return out.numpy()

        def barrier():
            _serving(dist.barrier(group=cpu, async_op=True))

        g = cls._from_callbacks(rank, size, local_size, allgather, barrier)
        g._keep = cpu  # the side group lives as long as this group
        return g

    @classmethod
    def from_mpi(cls, comm=None, local_size: Optional[int] = None) -> "Group":
        """A group over an mpi4py communicator (default MPI.COMM_WORLD);
        local_size defaults to the size of the node's shared-memory split."""
        from mpi4py import MPI

        comm = comm if comm is not None else MPI.COMM_WORLD
        rank, size = comm.Get_rank(), comm.Get_size()
        if local_size is None:
            node = comm.Split_type(MPI.COMM_TYPE_SHARED)
            local_size = node.Get_size()
            node.Free()
        _, local_size = _check_local(rank, size, None, local_size)
        g = cls._from_callbacks(rank, size, local_size, lambda data: b"".join(comm.allgather(bytes(data))),
                                comm.Barrier)
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
