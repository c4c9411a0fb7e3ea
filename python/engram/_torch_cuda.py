"""torch's current CUDA device, stream and capture state, asked through
torch._C's entry points where this torch has them: torch.cuda's Python
layers cost far more a question (current_stream() builds a Stream
object), and a fetch asks three (examples/python/engram_fetch.py
--overhead measures what Python adds to a fetch)."""
import sys
from typing import Any, Callable, NamedTuple, Optional


class TorchCuda(NamedTuple):
    tensor: type                      # torch.Tensor
    int64: Any                        # torch.int64
    strided: Any                      # torch.strided
    device: Callable[[], int]         # the current device's index
    stream: Callable[[int], int]      # a device's current stream, as a cudaStream_t
    capturing: Callable[[], bool]     # whether the current stream is capturing a CUDA graph


_cached: Optional[TorchCuda] = None


def _entry(torch, name):
    """torch._C's function `name`, or None where this torch lacks it (a build
    without CUDA has placeholder classes under some of these names)."""
    fn = getattr(torch._C, name, None)
    return None if fn is None or isinstance(fn, type) else fn


def torch_cuda() -> TorchCuda:
    """The questions for the imported torch (which has CUDA: callers hold a
    recv='cuda' buffer), resolved once."""
    global _cached
    if _cached is None:
        torch = sys.modules["torch"]
        # the fallbacks look torch.cuda's functions up at each call, as a caller replacing one expects
        device = _entry(torch, "_cuda_getDevice") or (lambda: torch.cuda.current_device())
        stream = _entry(torch, "_cuda_getCurrentRawStream") or (lambda d: torch.cuda.current_stream(d).cuda_stream)
        capturing = (_entry(torch, "_cuda_isCurrentStreamCapturing")
                     or (lambda: torch.cuda.is_current_stream_capturing()))
        _cached = TorchCuda(torch.Tensor, torch.int64, torch.strided, device, stream, capturing)
    return _cached
