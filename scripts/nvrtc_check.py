"""Compile the CUDA kernels that `flashforward kernels emit --target cuda` wrote, with NVRTC.

Usage: nvrtc_check.py DIR ARCH... (e.g. `nvrtc_check.py target/cuda-kernels 80 90`).

DIR holds one NAME.cu per kernel and kernels.json (name, file, entrypoint, kind, head_dim,
dtype, cube_dim, shared_memory_bytes, tensor_cores). NVRTC and the CUDA headers come from
NVIDIA's wheels (nvidia-cuda-nvrtc, -runtime, -crt, -cccl) in the interpreter's environment; no
driver or GPU is needed. Each kernel is compiled for each `sm_ARCH` with `--ptxas-options=-v`, and
ptxas's report (registers, spill stores/loads, shared memory) is parsed from the program log.
Kernels marked `tensor_cores` are also compiled to PTX (`compute_ARCH`), which must hold `mma`.

Prints one table row per kernel and architecture. Exits 1 on a compile error, on a missing
`mma`, or on spill bytes in an attention kernel at head dim 128 (the check of issue 48); every
such failure is named on stderr.
"""

import ctypes
import json
import pathlib
import re
import sys

import nvidia

ROOT = pathlib.Path(list(nvidia.__path__)[0]) / "cu13"
NVRTC = ctypes.CDLL(str(ROOT / "lib" / "libnvrtc.so.13"))
INCLUDES = [ROOT / "include", ROOT / "include" / "cccl"]


def nvrtc(call, *args):
    status = call(*args)
    if status != 0:
        NVRTC.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(NVRTC.nvrtcGetErrorString(status).decode())


def compile_source(source, name, options):
    """(ok, log, output) for one NVRTC compilation; output is the PTX for `compute_*` targets."""
    prog = ctypes.c_void_p()
    nvrtc(NVRTC.nvrtcCreateProgram, ctypes.byref(prog), source.encode(), name.encode(), 0, None, None)
    opts = [o.encode() for o in options]
    array = (ctypes.c_char_p * len(opts))(*opts)
    ok = NVRTC.nvrtcCompileProgram(prog, len(opts), array) == 0
    size = ctypes.c_size_t()
    nvrtc(NVRTC.nvrtcGetProgramLogSize, prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc(NVRTC.nvrtcGetProgramLog, prog, log)
    ptx = b""
    if ok and any(o.startswith("--gpu-architecture=compute_") for o in options):
        nvrtc(NVRTC.nvrtcGetPTXSize, prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        nvrtc(NVRTC.nvrtcGetPTX, prog, buf)
        ptx = buf.value
    nvrtc(NVRTC.nvrtcDestroyProgram, ctypes.byref(prog))
    return ok, log.value.decode(errors="replace"), ptx.decode(errors="replace")


def ptxas_report(log):
    """Registers, spill store/load bytes, stack frame and shared memory from ptxas's -v lines."""
    num = lambda pattern: int(m.group(1)) if (m := re.search(pattern, log)) else 0
    return {
        "registers": num(r"Used (\d+) registers"),
        "spill_stores": num(r"(\d+) bytes spill stores"),
        "spill_loads": num(r"(\d+) bytes spill loads"),
        "stack": num(r"(\d+) bytes stack frame"),
        "smem": num(r"(\d+) bytes smem"),
    }


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    folder = pathlib.Path(sys.argv[1])
    archs = sys.argv[2:]
    kernels = json.loads((folder / "kernels.json").read_text())["kernels"]
    failures = []
    header = f"{'kernel':<28} {'sm':>3} {'regs':>5} {'spill st/ld B':>14} {'stack B':>8} {'smem B':>7} {'cube':>5}"
    print(header)
    print("-" * len(header))
    for k in kernels:
        source = (folder / k["file"]).read_text()
        include = [f"--include-path={p}" for p in INCLUDES]
        for arch in archs:
            options = [f"--gpu-architecture=sm_{arch}", "--ptxas-options=-v", "-lineinfo", *include]
            ok, log, _ = compile_source(source, k["file"], options)
            if not ok:
                failures.append(f"{k['name']} sm_{arch}: compile error\n{log}")
                print(f"{k['name']:<28} {arch:>3}  COMPILE ERROR")
                continue
            r = ptxas_report(log)
            cube = "x".join(str(d) for d in k["cube_dim"])
            spill = f"{r['spill_stores']}/{r['spill_loads']}"
            # CubeCL declares shared memory dynamic (ptxas sees 0 static bytes); kernels.json has its size.
            smem = r["smem"] + k["shared_memory_bytes"]
            print(f"{k['name']:<28} {arch:>3} {r['registers']:>5} {spill:>14} {r['stack']:>8} {smem:>7} {cube:>5}")
            if k["kind"] == "attention" and k["head_dim"] == 128 and r["spill_stores"] + r["spill_loads"] > 0:
                failures.append(f"{k['name']} sm_{arch}: {r['spill_stores']} bytes spill stores, {r['spill_loads']} bytes spill loads")
            if k.get("tensor_cores"):
                options[0] = f"--gpu-architecture=compute_{arch}"
                _, _, ptx = compile_source(source, k["file"], [o for o in options if not o.startswith("--ptxas")])
                if "mma" not in ptx:
                    failures.append(f"{k['name']} sm_{arch}: tensor-core kernel without mma in its PTX")
    if failures:
        print(f"\n{len(failures)} failure(s):", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        sys.exit(1)
    print(f"\n{len(kernels)} kernels x {len(archs)} architectures compiled, no spill in the attention kernels at head dim 128")


if __name__ == "__main__":
    main()
