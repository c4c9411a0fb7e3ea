"""A plugin not linked against libengram.so.0 (as plugins of transport ABI
version 2 were built) cannot find the library's functions where the library
is not in the global scope, as here, where the extension loaded it
RTLD_LOCAL: refused, saying what to rebuild, instead of the loader
promoting the library to the global scope. A plugin whose dependency the
process already holds at another version is refused saying what to load
first."""
import os

import numpy as np
import pytest

import engram
import stall


def test_unlinked_plugin_is_refused_with_what_to_do(tmp_path):
    plugins = stall.build_plugin(str(tmp_path), linked=False)
    config = {"transport": "stallplug", "plugin_path": plugins}
    with pytest.raises(engram.Error) as e:
        engram.Buffer(engram.Group.solo(), 64, 8, np.float32, 4, 2, recv="host", config=config)
    assert "undefined symbol: engram_" in str(e.value), e.value
    assert "rebuild it against <engram/plugin/plugin.h> and link it with -lengram" in str(e.value), e.value


def test_linked_plugin_loads(tmp_path):
    buf = stall.buffer(str(tmp_path / "gate"))
    assert buf.transport == "stallplug"
    buf.destroy()


def test_dependency_taken_at_another_version_is_explained(tmp_path):
    """A plugin needing libdep.so.1's dep_new, in a process that already
    holds an older libdep.so.1 (the same soname, without dep_new), as a
    PyTorch process holds its own libnccl.so.2 when nccl_gin loads: the
    refusal names the symbol and says what to load first."""
    import ctypes
    import shutil
    import subprocess

    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    old, new, plug = tmp_path / "old", tmp_path / "new", tmp_path / "plug"
    for d in (old, new, plug):
        d.mkdir()

    def build(args):
        r = subprocess.run([cc, "-fPIC", "-shared"] + args, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    (tmp_path / "old.c").write_text("int dep_old(void) { return 1; }\n")
    (tmp_path / "new.c").write_text("int dep_old(void) { return 1; }\nint dep_new(void) { return 2; }\n")
    (tmp_path / "use.c").write_text("int dep_new(void);\nint stallplug_uses_dep(void) { return dep_new(); }\n")
    build([str(tmp_path / "old.c"), "-Wl,-soname,libdep.so.1", "-o", str(old / "libdep.so.1")])
    build([str(tmp_path / "new.c"), "-Wl,-soname,libdep.so.1", "-o", str(new / "libdep.so.1")])
    from engram import _build_info
    libdir = _build_info.LIBDIRS[0]
    build(["-std=c11", "-D_GNU_SOURCE", "-I" + os.path.normpath(os.path.join(libdir, "..", "include")),
           os.path.join(stall.HERE, "stallplug.c"), str(tmp_path / "use.c"), "-L" + libdir, "-lengram",
           str(new / "libdep.so.1"), "-Wl,-rpath," + str(new), "-o", str(plug / "libengram_transport_stallplug.so")])
    ctypes.CDLL(str(old / "libdep.so.1"), mode=ctypes.RTLD_GLOBAL)  # the framework's copy, loaded first
    config = {"transport": "stallplug", "plugin_path": str(plug)}
    with pytest.raises(engram.Error) as e:
        engram.Buffer(engram.Group.solo(), 64, 8, np.float32, 4, 2, recv="host", config=config)
    assert "undefined symbol: dep_new" in str(e.value), e.value
    assert "already holds under its soname" in str(e.value) and "LD_PRELOAD the right one)" in str(e.value), e.value
    assert str(e.value).count(str(plug)) == 1, e.value  # the file named once
