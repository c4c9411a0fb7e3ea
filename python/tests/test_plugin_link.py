"""A plugin not linked against libengram.so.0 (as plugins of transport ABI
version 2 were built) cannot find the library's functions where the library
is not in the global scope, as here, where the extension loaded it
RTLD_LOCAL: refused, saying what to rebuild, instead of the loader
promoting the library to the global scope."""
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
