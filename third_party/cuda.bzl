"""cuda_library: .cu sources compiled by the system nvcc into objects wrapped
in a cc_library.

Built in every configuration where @sys_nvcc finds nvcc, so the CPU tier
catches CUDA compile errors too; where nvcc is absent the target is an empty
cc_library (its hdrs only) and the build prints one line saying so. Kernels
are built for Hopper: sm_90 machine code plus compute_90 PTX for newer chips.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("@sys_nvcc//:defs.bzl", NVCC_AVAILABLE = "AVAILABLE", "NVCC", NVCC_REASON = "REASON")

_NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
    "-Xcompiler -fPIC",
    "-Xcompiler -fvisibility=hidden",
    "-Werror all-warnings",
    "-I.",
    "-I$(GENDIR)",
])

def cuda_library(name, srcs, hdrs = [], cu_hdrs = [], deps = [], nvcc_flags = [], **kwargs):
    """srcs: .cu files; hdrs: the library's headers; cu_hdrs: other headers
    the .cu files include (declared so edits rebuild the objects);
    nvcc_flags: added to nvcc's command line (e.g. an -I for cu_hdrs)."""
    if not NVCC_AVAILABLE:
        print("engram: CUDA sources of //%s:%s skipped: %s" % (native.package_name(), name, NVCC_REASON))
        cc_library(name = name, hdrs = hdrs, deps = deps, **kwargs)
        return
    objs = []
    for src in srcs:
        obj = "%s_objs/%s.o" % (name, src.rsplit("/", 1)[-1].rsplit(".", 1)[0])
        native.genrule(
            name = "%s_nvcc_%s" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + hdrs + cu_hdrs,
            outs = [obj],
            cmd = "%s %s %s -c $(location %s) -o $@" % (NVCC, _NVCC_FLAGS, " ".join(nvcc_flags), src),
            message = "nvcc %s" % src,
            target_compatible_with = kwargs.get("target_compatible_with", []),
        )
        objs.append(obj)
    cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@sys_cuda//:lib"],
        linkstatic = 1,
        **kwargs
    )
