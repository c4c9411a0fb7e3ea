"""The built-in backends: BUILTIN_BACKENDS is the one list of them. The
registry's rows (builtins.c, through the header builtin_rows_header writes)
and the module targets (BUILD.bazel) are generated from it, so adding a
backend touches this list and the backend's own package."""

load("@sys_cuda//:defs.bzl", CUDA_AVAILABLE = "AVAILABLE", CUDA_REASON = "REASON")
load("@sys_ibverbs//:defs.bzl", IBV_AVAILABLE = "AVAILABLE", IBV_REASON = "REASON")
load("@sys_nccl//:defs.bzl", NCCL_AVAILABLE = "AVAILABLE", NCCL_REASON = "REASON", NCCL_VERSION = "VERSION")
load("@sys_nvcc//:defs.bzl", NVCC_AVAILABLE = "AVAILABLE", NVCC_REASON = "REASON")
load("@sys_ucx//:defs.bzl", UCX_AVAILABLE = "AVAILABLE", UCX_REASON = "REASON")

# nccl_gin's device API: ncclGin::get arrived in 2.30.3, HOST_NUMA segments
# in windows in 2.30.4.
NCCL_GIN_MIN_VERSION = "2.30.4"

def _version_tuple(version):
    return [int(p) if p.isdigit() else 0 for p in version.split(".")]

def version_at_least(version, minimum):
    """True when dotted `version` >= `minimum` ("2.28.9" vs "2.30.4")."""
    return _version_tuple(version) >= _version_tuple(minimum)

def needs(available, reason):
    """A system library a backend is built against: @sys_<lib>//:defs.bzl's
    AVAILABLE and REASON (why it is missing)."""
    return struct(met = available, reason = reason)

def needs_version(available, reason, pretty, minimum, version):
    """As needs(), and at least version `minimum` of it."""
    if not available:
        return needs(False, reason)
    if not version_at_least(version, minimum):
        return needs(False, "needs %s >= %s, found %s" % (pretty, minimum, version or "an unknown version"))
    return needs(True, "")

def backend(name, target, priority, requires = [], module = True):
    """A built-in backend.

    name: its transport=<name>; its library `target` defines
      engram_<name>_ops (<engram/plugin/transport.h>).
    priority: transport=auto's order, higher first.
    requires: what this build needs for it (needs(), needs_version()), in
      the order a user fixes them: the first unmet one is why its row is
      absent. With all met it is built; whether it runs is its ops'
      available() on the machine and group, asked at selection.
    module: shipped as libengram_transport_<name>.so beside libengram and
      loaded on first use (its system libraries are no dependency of
      libengram); False links it into libengram.
    """
    unmet = [n.reason for n in requires if not n.met]
    return struct(
        name = name,
        target = target,
        priority = priority,
        module = module,
        built = not unmet,
        absent_reason = unmet[0] if unmet else "",
    )

# nccl_gin needs NCCL >= NCCL_GIN_MIN_VERSION (NCCL_HOME), CUDA and nvcc
# (its kernels); its transport, tests and bench exist only then.
_NCCL_GIN_REQUIRES = [
    needs_version(NCCL_AVAILABLE, NCCL_REASON, "NCCL", NCCL_GIN_MIN_VERSION, NCCL_VERSION),
    needs(CUDA_AVAILABLE, CUDA_REASON),
    needs(NVCC_AVAILABLE, NVCC_REASON),
]

# The built-in backends, in the registry's order. transport=auto tries
# GPU-initiated gets first, then direct verbs, then the single-host copy,
# then UCX, which reaches any host but costs CPU.
BUILTIN_BACKENDS = [
    backend("loopback", "//transports/loopback", priority = 20, module = False),
    backend("ucx", "//transports/ucx", priority = 10, requires = [needs(UCX_AVAILABLE, UCX_REASON)]),
    backend("nccl_gin", "//transports/nccl_gin", priority = 40, requires = _NCCL_GIN_REQUIRES),
    backend("mlx5dv", "//transports/mlx5dv", priority = 30, requires = [needs(IBV_AVAILABLE, IBV_REASON)]),
]

NCCL_GIN_BUILT = [b for b in BUILTIN_BACKENDS if b.name == "nccl_gin"][0].built

def _c_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

def _row(b):
    if not b.built:
        return "ENGRAM_BUILTIN_ABSENT(%s, %d, %s)" % (b.name, b.priority, _c_string(b.absent_reason))
    return "ENGRAM_BUILTIN_%s(%s, %d)" % ("MODULE" if b.module else "LINKED", b.name, b.priority)

def _builtin_rows_impl(ctx):
    ctx.actions.write(ctx.outputs.out, ctx.attr.content)

_builtin_rows = rule(
    implementation = _builtin_rows_impl,
    attrs = {"content": attr.string(), "out": attr.output()},
)

def builtin_rows_header(name, out):
    """Writes `out`: one row macro per backend of BUILTIN_BACKENDS, in its
    order, which builtins.c expands into the registry's table."""
    _builtin_rows(
        name = name,
        out = out,
        content = "/* Generated from BUILTIN_BACKENDS (transports/builtins.bzl). */\n" +
                  "".join([_row(b) + "\n" for b in BUILTIN_BACKENDS]),
    )
