"""stallplug (stallplug.c): a one-rank transport plugin whose fetches
complete when a gate file says so, built once per process against the
installed headers of the library this engram was built with. buffer()
makes a Buffer on it; the gate is absent (fetches in flight for ever),
"fail" (the transport's own timeout) or "go"."""
import os
import shutil
import subprocess
import tempfile

import pytest

import engram

HERE = os.path.dirname(os.path.abspath(__file__))
_built = {}


def build_plugin(out, linked=True):
    """stallplug.c built into out/libengram_transport_stallplug.so against the
    installed headers (skips the test without a C compiler); linked=False
    leaves out -lengram, as plugins of transport ABI version 2 were built."""
    from engram import _build_info

    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("no C compiler to build the stallplug test transport")
    libdir = _build_info.LIBDIRS[0]
    so = os.path.join(out, "libengram_transport_stallplug.so")
    r = subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
                        "-I" + os.path.normpath(os.path.join(libdir, "..", "include")),
                        os.path.join(HERE, "stallplug.c"), "-o", so] + (["-L" + libdir, "-lengram"] if linked else []),
                       capture_output=True, text=True)
    assert r.returncode == 0, "building stallplug.c against %s:\n%s" % (libdir, r.stderr)
    return out


def plugin_dir():
    """The directory holding libengram_transport_stallplug.so, built once."""
    if "dir" not in _built:
        _built["dir"] = build_plugin(tempfile.mkdtemp(prefix="engram-stallplug-"))
    return _built["dir"]


def config(gate, timeout_ms=30000):
    return {"transport": "stallplug", "plugin_path": plugin_dir(), "stallplug_gate": gate,
            "timeout_ms": timeout_ms}


def buffer(gate, timeout_ms=30000, E=64, H=8, T=4, K=2):
    import numpy as np

    buf = engram.Buffer(engram.Group.solo(), E, H, np.float32, T, K, recv="host", config=config(gate, timeout_ms))
    buf.engram_write(np.arange(E * H, dtype=np.float32).reshape(E, H))
    return buf


def set_gate(gate, word):
    with open(gate + ".tmp", "w") as f:
        f.write(word)
    os.replace(gate + ".tmp", gate)
