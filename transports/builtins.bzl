"""Why a built-in transport is absent, computed at load time from the
@sys_<lib>//:defs.bzl markers and handed to builtins.c as C string defines;
and whether nccl_gin is built, for every package that builds a part of it."""

load("@sys_cuda//:defs.bzl", CUDA_AVAILABLE = "AVAILABLE")
load("@sys_nccl//:defs.bzl", NCCL_AVAILABLE = "AVAILABLE", NCCL_VERSION = "VERSION")
load("@sys_nvcc//:defs.bzl", NVCC_AVAILABLE = "AVAILABLE")

NOT_IMPLEMENTED = "backend not implemented in this build"

# nccl_gin's device API: ncclGin::get arrived in 2.30.3, HOST_NUMA segments
# in windows in 2.30.4.
NCCL_GIN_MIN_VERSION = "2.30.4"

def _version_tuple(version):
    return [int(p) if p.isdigit() else 0 for p in version.split(".")]

def version_at_least(version, minimum):
    """True when dotted `version` >= `minimum` ("2.28.9" vs "2.30.4")."""
    return _version_tuple(version) >= _version_tuple(minimum)

def absent_reason(lib_available, lib_reason, min_version = "", version = "", pretty = ""):
    """The missing system library's reason (absent, or older than
    min_version) comes first: it is what a user has to fix. Otherwise the
    backend itself is what is missing."""
    if not lib_available:
        return lib_reason
    if min_version and not version_at_least(version, min_version):
        return "needs %s >= %s, found %s" % (pretty, min_version, version or "an unknown version")
    return NOT_IMPLEMENTED

def c_string_define(name, text):
    """NAME="text" as a C string literal, single-quoted because Bazel
    shell-tokenizes local_defines."""
    literal = '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')
    return "'%s=%s'" % (name, literal.replace("'", "'\\''"))

# nccl_gin needs NCCL >= NCCL_GIN_MIN_VERSION (NCCL_HOME), CUDA and nvcc (its
# kernels); the transport, its tests and its bench exist only then.
NCCL_GIN_BUILT = NCCL_AVAILABLE and version_at_least(NCCL_VERSION, NCCL_GIN_MIN_VERSION) and \
                 CUDA_AVAILABLE and NVCC_AVAILABLE
