"""python -m engram.info: what engram_info prints (the version, every backend,
available or why not, and the effective configuration), from the engram_info
tool installed beside the library this package was built against."""
import os
import sys


def main() -> int:
    from . import LIBRARY_VERSION, __version__, _engram
    from ._build_info import BINDIR

    print("engram python package %s (extension %s, built against library %s)"
          % (__version__, _engram.__file__, LIBRARY_VERSION), flush=True)
    tool = os.path.join(BINDIR, "engram_info")
    if not os.access(tool, os.X_OK):
        print("engram.info: %s not found: the engram_info tool is installed with the library "
              "(its prefix's bin/)" % tool, file=sys.stderr)
        return 1
    os.execv(tool, [tool] + sys.argv[1:])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
