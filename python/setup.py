"""Builds the engram package's C extension against the installed libengram,
found with pkg-config (`pkg-config --cflags --libs engram`; point
PKG_CONFIG_PATH at <prefix>/lib/pkgconfig for a non-system prefix).

    pip install --no-build-isolation ./python
"""
import glob
import os
import re
import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "engram"], check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        return read_pc(*args)  # no pkg-config (a bare GPU host): the same answer from engram.pc itself
    except subprocess.CalledProcessError as e:
        raise SystemExit(
            "engram: pkg-config cannot find engram.pc (%s); set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig"
            % e.stderr.strip())
    return shlex.split(out)


def read_pc(*args):
    """What `pkg-config ARGS engram` prints, from the first engram.pc on
    PKG_CONFIG_PATH (variables, ${var} references, Cflags, Libs)."""
    dirs = [d for d in os.environ.get("PKG_CONFIG_PATH", "").split(os.pathsep) if d]
    dirs += ["/usr/local/lib/pkgconfig", "/usr/lib/pkgconfig", "/usr/share/pkgconfig"]
    path = next((os.path.join(d, "engram.pc") for d in dirs if os.path.isfile(os.path.join(d, "engram.pc"))), None)
    if path is None:
        raise SystemExit("engram: no pkg-config and no engram.pc on PKG_CONFIG_PATH (%s)" % ":".join(dirs))
    variables, fields = {}, {}
    subst = lambda v: re.sub(r"\$\{(\w+)\}", lambda m: variables.get(m.group(1), ""), v)
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            m = re.match(r"^(\w+)\s*=\s*(.*)$", line)
            if m:
                variables[m.group(1)] = subst(m.group(2))
                continue
            m = re.match(r"^([\w.]+)\s*:\s*(.*)$", line)
            if m:
                fields[m.group(1)] = subst(m.group(2))
    out = []
    for a in args:
        if a == "--cflags":
            out += shlex.split(fields.get("Cflags", ""))
        elif a == "--libs":
            out += shlex.split(fields.get("Libs", ""))
        elif a.startswith("--variable="):
            value = variables.get(a.split("=", 1)[1], "")
            out += [value] if value else []
    return out


here = os.path.dirname(os.path.abspath(__file__))
cflags = pkg_config("--cflags")
libs = pkg_config("--libs")
libdirs = [f[2:] for f in libs if f.startswith("-L")]
prefix = pkg_config("--variable=prefix")
bindir = pkg_config("--variable=bindir") or ([os.path.join(prefix[0], "bin")] if prefix else [])

# Where the library and the engram_info tool live, for `python -m engram.info`
# and for finding libengram at run time without LD_LIBRARY_PATH.
with open(os.path.join(here, "engram", "_build_info.py"), "w") as f:
    f.write("# written by setup.py from pkg-config\n")
    f.write("BINDIR = %r\nLIBDIRS = %r\n" % (bindir[0] if bindir else "", libdirs))

ext = Extension(
    "engram._engram",
    sources=sorted(glob.glob(os.path.join("engram", "_src", "*.c"))),
    extra_compile_args=cflags + ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                                 "-Wno-cast-function-type"],
    extra_link_args=libs + ["-Wl,-rpath," + d for d in libdirs],
)

setup(
    name="engram",
    version="0.1.0",
    description="One-sided remote row lookups (the DeepEP engram API) over the engram C library",
    packages=["engram"],
    package_data={"engram": ["*.pyi", "py.typed"]},
    ext_modules=[ext],
    python_requires=">=3.10",
)
