"""Repository rules that find system libraries on this machine.

Each library becomes a repository `@sys_<name>` holding:
  //:lib      a cc_library to depend on (empty when the library is absent)
  defs.bzl    AVAILABLE (bool), REASON (why absent, "" when present), VERSION
so the core builds and tests where only a C compiler exists, and every
backend that needs a missing library reports the reason instead of failing.
"""

def _first_existing(ctx, candidates):
    for c in candidates:
        if c and ctx.path(c).exists:
            return c
    return None

def _write(ctx, available, reason, version, cc_library_body):
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file("defs.bzl", "AVAILABLE = %s\nREASON = %r\nVERSION = %r\n" % (available, reason, version))
    ctx.file("BUILD", "package(default_visibility = [\"//visibility:public\"])\n\n" +
                      "exports_files([\"defs.bzl\"])\n\n" + cc_library_body)

def _absent(ctx, reason):
    _write(ctx, False, reason, "", "cc_library(name = \"lib\")\n\nfilegroup(name = \"headers\")\n")

def _lib_body(includes, linkopts, hdrs_glob = None):
    """//:lib, and //:headers: the same headers as a filegroup, for rules
    that are not cc rules (nvcc genrules)."""
    hdrs = "glob([%r], allow_empty = True)" % hdrs_glob if hdrs_glob else "[]"
    return ("cc_library(\n    name = \"lib\",\n    hdrs = %s,\n    includes = %r,\n" +
            "    linkopts = %r,\n)\n\nfilegroup(name = \"headers\", srcs = %s)\n") % (hdrs, includes, linkopts, hdrs)

def _version_of(ctx, header, macros):
    content = ctx.read(header)
    parts = []
    for m in macros:
        val = ""
        for line in content.splitlines():
            tok = [t for t in line.replace("\t", " ").split(" ") if t]
            if len(tok) >= 3 and tok[0] == "#define" and tok[1] == m:
                val = tok[2].strip("()")
                break
        parts.append(val or "?")
    return ".".join(parts)

def _system_lib_impl(ctx):
    header = ctx.attr.header
    roots = [ctx.os.environ.get(v) for v in ctx.attr.env_roots] + ctx.attr.roots
    root = None
    for r in roots:
        if r and ctx.path(r + "/include/" + header).exists:
            root = r
            break
    if root == None:
        _absent(ctx, "%s not found (looked in %s)" % (header, ", ".join([r + "/include" for r in roots if r])))
        return
    ext = ".a" if ctx.attr.archive else ".so"
    libdir = _first_existing(ctx, [root + "/" + d + "/lib" + ctx.attr.libs[0] + ext for d in ["lib64", "lib", "lib/x86_64-linux-gnu"]])
    if libdir == None:
        _absent(ctx, "lib%s%s not found under %s" % (ctx.attr.libs[0], ext, root))
        return
    libdir = libdir.rsplit("/", 1)[0]
    version = _version_of(ctx, root + "/include/" + (ctx.attr.version_header or header), ctx.attr.version_macros) if ctx.attr.version_macros else ""
    if ctx.attr.min_version and version:
        have = [int(x) if x.isdigit() else 0 for x in version.split(".")]
        need = [int(x) for x in ctx.attr.min_version.split(".")]
        if have < need:
            _absent(ctx, "needs %s >= %s, found %s" % (ctx.attr.pretty, ctx.attr.min_version, version))
            return
    # Each library by its path, not -L/-l: -l takes the first directory
    # given, and CUDA's lib64 carries its own (older) libnccl.
    linkopts = ([] if ctx.attr.archive else ["-Wl,-rpath," + libdir]) + \
               [libdir + "/lib" + l + ext for l in ctx.attr.libs] + ctx.attr.extra_linkopts
    if root in ["/usr", "/usr/local"]:
        _write(ctx, True, "", version, _lib_body([], linkopts))
    else:
        ctx.symlink(root + "/include", "include")
        _write(ctx, True, "", version, _lib_body(["include"], linkopts, "include/**"))

system_lib = repository_rule(
    implementation = _system_lib_impl,
    attrs = {
        "pretty": attr.string(),
        "header": attr.string(),
        "libs": attr.string_list(),
        "roots": attr.string_list(default = ["/usr"]),
        "env_roots": attr.string_list(),
        "version_header": attr.string(),
        "version_macros": attr.string_list(),
        "min_version": attr.string(),
        # Link the static archives (lib<name>.a) instead: no DT_NEEDED, no rpath.
        "archive": attr.bool(),
        "extra_linkopts": attr.string_list(),
    },
    environ = ["CUDA_HOME", "NCCL_HOME", "MPI_HOME"],
    local = True,
)

def _nvcc_impl(ctx):
    home = ctx.os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    nvcc = home + "/bin/nvcc"
    if not ctx.path(nvcc).exists:
        ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
        ctx.file("BUILD", "exports_files([\"defs.bzl\"])\n")
        ctx.file("defs.bzl", "AVAILABLE = False\nREASON = %r\nNVCC = \"\"\nCUDA_HOME = \"\"\n" % ("nvcc not found at " + nvcc))
        return
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file("BUILD", "exports_files([\"defs.bzl\"])\n")
    ctx.file("defs.bzl", "AVAILABLE = True\nREASON = \"\"\nNVCC = %r\nCUDA_HOME = %r\n" % (nvcc, home))

nvcc_toolchain = repository_rule(
    implementation = _nvcc_impl,
    environ = ["CUDA_HOME"],
    local = True,
)

def engram_system_libs():
    system_lib(name = "sys_ucx", pretty = "UCX", header = "ucp/api/ucp.h", libs = ["ucp", "uct", "ucs"],
               version_header = "ucp/api/ucp_version.h", version_macros = ["UCP_API_MAJOR", "UCP_API_MINOR"])
    system_lib(name = "sys_ibverbs", pretty = "rdma-core", header = "infiniband/mlx5dv.h", libs = ["mlx5", "ibverbs"])
    system_lib(name = "sys_mpi", pretty = "MPI", header = "mpi.h", libs = ["mpi"], env_roots = ["MPI_HOME"],
               roots = ["/usr/lib/x86_64-linux-gnu/openmpi", "/usr"])
    # The CUDA runtime linked statically, as NCCL does: libengram.so.0 then
    # needs no libcudart (it loads on hosts without CUDA, and its runtime,
    # hidden by the version script, cannot clash with the one a PyTorch
    # process carries); the driver (libcuda.so.1) is what cudart dlopens.
    system_lib(name = "sys_cuda", pretty = "CUDA", header = "cuda.h", libs = ["cudart_static"],
               env_roots = ["CUDA_HOME"], roots = ["/usr/local/cuda"], archive = True,
               extra_linkopts = ["-ldl", "-lrt", "-lpthread"])
    system_lib(name = "sys_nccl", pretty = "NCCL", header = "nccl.h", libs = ["nccl"],
               env_roots = ["NCCL_HOME", "CUDA_HOME"], roots = ["/usr/local/cuda", "/usr"],
               version_macros = ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"])
    nvcc_toolchain(name = "sys_nvcc")
