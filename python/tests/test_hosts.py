"""Which ranks share a host, as the library tells it (host_identity: one
kernel, network and pid namespace), not as their hostnames say: what
Group.from_torch derives local_size from."""
import ctypes
import os

import pytest

from engram import _engram, _groups
from engram._engram import InvalidArgumentError

CLONE_NEWNET = 0x40000000


def in_child(fn):
    """fn() in a forked child; its result (a str) through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 (reported to the parent)
            out = "error: %r" % e
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    return out


def test_identity_is_per_host():
    mine = _engram.host_identity()
    assert isinstance(mine, str) and mine
    assert in_child(_engram.host_identity) == mine  # another process of this host


def test_identity_differs_in_another_network_namespace():
    def moved():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) != 0:
            return "skip: unshare(CLONE_NEWNET): %s" % os.strerror(ctypes.get_errno())
        return _engram.host_identity()

    theirs = in_child(moved)
    if theirs.startswith("skip: "):
        pytest.skip(theirs[len("skip: "):])
    assert not theirs.startswith("error") and theirs != _engram.host_identity()


def fake_gather(records):
    return lambda mine: records


def test_local_size_from_identities_not_hostnames():
    # one hostname, two hosts (two containers named alike): two nodes of 2
    same_name = [("A", "node"), ("A", "node"), ("B", "node"), ("B", "node")]
    assert _groups._local_size_from_hosts(0, 4, fake_gather(same_name)) == 2
    # two hostnames, one host (UTS namespaces alone): one node of 2
    one_host = [("A", "x"), ("A", "y")]
    assert _groups._local_size_from_hosts(1, 2, fake_gather(one_host)) == 2
    # every rank its own host: nodes of one rank
    assert _groups._local_size_from_hosts(0, 2, fake_gather([("A", "n"), ("B", "n")])) == 1
    with pytest.raises(InvalidArgumentError, match=r"not grouped by host .*hostnames by rank: \['a', 'b', 'c'\]"):
        _groups._local_size_from_hosts(0, 3, fake_gather([("A", "a"), ("B", "b"), ("A", "c")]))
