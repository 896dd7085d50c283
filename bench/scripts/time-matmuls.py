#!/usr/bin/env python3
"""Times mlpipe's generated matmul kernels against cuBLAS on the GPU host.

    source .device/setup.sh && bench/scripts/time-matmuls.py [--quick] [--repeat N]

For each of the issue's target products it compiles the product with the
tools (trace | fuse | bufferize | outline --pipeline P | lower-nvvm, P being
outline's passes with the matmul fusion inlined first and the chosen pass
options; see OUTLINE_PIPELINE), loads the kernels' PTX with the CUDA driver, launches them on
PyTorch's stream on PyTorch tensors, and times them with CUDA events: the
median over many batches of back-to-back launches after a warm-up, the
operands rotated over several copies so that they come from HBM, not L2. The
same products go through torch.matmul (cuBLAS; TF32 off) on the same
tensors. Each timed kernel's result is checked against a float64 product
first. Beside the default choice it times a few forced configurations (pass
options of mlpipe-generated-matmuls), the data for tuning the heuristics;
--quick times the defaults only.

It prints one compact table: per product and configuration the GPU time,
TFLOP/s, cuBLAS's time, the speed relative to cuBLAS (cuBLAS time / mlpipe
time) and, for the default configuration, the issue's target.
"""

import argparse
import ctypes
import os
import re
import statistics
import subprocess
import sys
import tempfile

# (label, M, K, N, batch, b stored transposed, target). A target is
# ("speed", x): at least x times cuBLAS's speed, or ("time", x): at most x
# times cuBLAS's time.
PRODUCTS = [
    ("c_attn 1024x768x3072", 1024, 768, 3072, 0, False, ("speed", 0.7)),
    ("c_proj 1024x3072x768", 1024, 3072, 768, 0, False, ("speed", 0.7)),
    ("logits 1024x768x50257 wte^T", 1024, 768, 50257, 0, True, ("speed", 0.6)),
    ("decode 16x768x3072", 16, 768, 3072, 0, False, ("time", 1.3)),
    ("q@k^T 12x1024x64x1024", 1024, 64, 1024, 12, True, ("speed", 0.7)),
    ("plain 12x1024x64x1024", 1024, 64, 1024, 12, False, ("speed", 0.7)),
    ("p@v 12x1024x1024x64", 1024, 1024, 64, 12, False, None),
    ("decode logits 16x768x50257", 16, 768, 50257, 0, True, None),
]

# Forced configurations per product (pass options), beside the default.
SWEEP = {
    "c_attn 1024x768x3072": [
        "block-tile=128,128,8 thread-tile=8,8 split-k=1",
        "block-tile=128,128,16 thread-tile=8,8 split-k=1",
        "block-tile=128,64,8 thread-tile=8,4 split-k=1",
        "block-tile=64,64,8 thread-tile=8,4 split-k=1",
    ],
    "c_proj 1024x3072x768": [
        "block-tile=128,128,8 thread-tile=8,8 split-k=1",
        "block-tile=128,128,8 thread-tile=8,8 split-k=3",
        "block-tile=128,64,8 thread-tile=8,4 split-k=1",
        "block-tile=128,64,8 thread-tile=8,4 split-k=2",
        "block-tile=64,64,8 thread-tile=8,4 split-k=1",
        "block-tile=64,64,8 thread-tile=8,4 split-k=3",
    ],
    "logits 1024x768x50257 wte^T": [
        "block-tile=128,64,8 thread-tile=8,4 split-k=1",
        "block-tile=128,128,16 thread-tile=8,8 split-k=1",
    ],
    "decode 16x768x3072": [
        "split-k=3",
        "split-k=12",
        "split-k=24",
        "form=tiled",
    ],
    "q@k^T 12x1024x64x1024": [
        "block-tile=128,64,8 thread-tile=8,4",
        "block-tile=64,64,8 thread-tile=8,4",
    ],
    "p@v 12x1024x1024x64": [
        "block-tile=64,64,8 thread-tile=8,4 split-k=1",
        "block-tile=128,64,8 thread-tile=8,4 split-k=1",
    ],
    "decode logits 16x768x50257": [
        "block-tile=32,128,8 thread-tile=4,8 split-k=1",
        "block-tile=16,128,8 thread-tile=4,8 split-k=1",
    ],
}

# Operand copies rotated so that every product reads from HBM: at least this
# many bytes in all (the H200's L2 is 50 MB).
ROTATION_BYTES = 240 << 20
MAX_COPIES = 16

# outline's passes, with the matmul fusion inlined before the matmul pass:
# its zero fill then folds into the kernel (C written, not added to), as a
# matmul emitter taking the fusion whole will have it. (outline's own
# pipeline, until then, emits the fill as a loop kernel of its own, and the
# product adds into C.)
OUTLINE_PIPELINE = """builtin.module(
  func.func(mlpipe-transposed-operand-views),
  inline,
  mlpipe-generated-matmuls{chip={chip} %s},
  mlpipe-emit-fusions{chip={chip}},
  canonicalize,
  mlpipe-buffer-plan,
  canonicalize, cse)
"""

MEMREF = re.compile(r"memref<(?:[^<>]|<[^<>]*>)*>")


def memref_layout(type_):
    """(sizes, strides, offset, element) of a static memref type."""
    m = re.match(r"memref<((?:\d+x)*)(f32|f64)(?:, strided<\[([\d, ]*)\](?:, offset: (\d+))?>)?>", type_)
    if not m:
        raise SystemExit("time-matmuls: unsupported memref type " + type_)
    sizes = [int(d) for d in m.group(1).split("x") if d]
    if m.group(3) is not None:
        strides = [int(s) for s in m.group(3).split(",")]
    else:
        strides, acc = [], 1
        for size in reversed(sizes):
            strides.insert(0, acc)
            acc *= size
    return sizes, strides, int(m.group(4) or 0), m.group(2)


def parse_host(outlined):
    """The entry's arguments, views and launches from outline's output."""
    start = outlined.index("func.func @")
    end = outlined.index("\n  }\n", start)
    host = outlined[start:end]
    signature = host[host.index("(") + 1:host.index(") attributes")]
    arguments = {}
    for m in re.finditer(r"(%arg\d+): (" + MEMREF.pattern + r") \{[^}]*mlpipe\.name = \"(\w+)\"", signature):
        arguments[m.group(1)] = (m.group(3), m.group(2))
    # Temporaries the buffer plan put in the arena (split-K's partial
    # products): each timed as a tensor of its own.
    for m in re.finditer(r"(%[\w]+) = memref\.view %arg\d+\[%[\w]+\]\[\] : memref<\d+xi8> to (" + MEMREF.pattern +
                         ")", host):
        arguments[m.group(1)] = ("temporary" + m.group(1).lstrip("%"), m.group(2))
    views = {m.group(1): m.group(2) for m in re.finditer(r"(%[\w]+) = memref\.transpose (%[\w]+) ", host)}
    constants = {m.group(1): int(m.group(2)) for m in re.finditer(r"(%[\w]+) = arith\.constant (\d+) : index", host)}
    launches = []
    for m in re.finditer(r"gpu\.launch_func\s+@(\w+)::@(\w+) blocks in \(([^)]*)\) threads in \(([^)]*)\)\s+args\((.*)\)",
                         host):
        grid = [constants[v.strip()] for v in m.group(3).split(",")]
        block = [constants[v.strip()] for v in m.group(4).split(",")]
        args = []
        for a in re.finditer(r"(%[\w]+) : (" + MEMREF.pattern + ")", m.group(5)):
            root = a.group(1)
            while root in views:
                root = views[root]
            args.append((arguments[root][0], a.group(2)))
        launches.append({"module": m.group(1), "kernel": m.group(2), "grid": grid, "block": block, "args": args})
    return arguments, launches


def parse_ptx(lowered):
    ptx = {}
    for line in lowered.splitlines():
        m = re.search(r'gpu\.binary @(\w+)\s+\[#gpu\.object<.*assembly = "(.*)">\]', line)
        if m:
            ptx[m.group(1)] = re.sub(r"\\([0-9A-Fa-f]{2})", lambda x: chr(int(x.group(1), 16)), m.group(2))
    return ptx


def run(command, stdin=None):
    result = subprocess.run(command, input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("%s failed: %s" % (command[0], result.stderr.strip().splitlines()[-1:]))
    return result.stdout, result.stderr


def compile_product(work, m, k, n, batch, transpose_b, options):
    """outline's and lower-nvvm's output for one product and pass options."""
    # --shape gives each input as stored: b as [N, K] when transposed.
    trace = ["trace", "matmul", "--shape", "%dx%d" % (m, k), "--shape", "%dx%d" % ((n, k) if transpose_b else (k, n))]
    if batch:
        trace += ["--batch", str(batch)]
    if transpose_b:
        trace += ["--transpose-b"]
    bufferized, _ = run(["bufferize"], run(["fuse"], run(trace)[0])[0])
    pipeline_file = os.path.join(work, "outline.pipeline")
    with open(pipeline_file, "w") as f:
        f.write(OUTLINE_PIPELINE % options)
    outlined, _ = run(["outline", "--chip", "sm_90", "--pipeline", pipeline_file], bufferized)
    lowered, _ = run(["lower-nvvm", "--chip", "sm_90", "--format", "isa"], outlined)
    # The emitter's choice, as the pipeline's first passes make it.
    passes = "builtin.module(func.func(mlpipe-transposed-operand-views), inline, mlpipe-generated-matmuls{chip=sm_90 %s})"
    _, choice = run(["mlpipe-opt", "--pass-pipeline=" + passes % options, "--debug-only=mlpipe-emitters",
                     "-o", os.devnull], bufferized)
    return outlined, lowered, choice.strip()


class Driver:
    def __init__(self):
        self.cuda = ctypes.CDLL("libcuda.so.1")

    def check(self, result, what):
        if result != 0:
            message = ctypes.c_char_p()
            self.cuda.cuGetErrorString(result, ctypes.byref(message))
            raise RuntimeError("%s: %s" % (what, message.value.decode() if message.value else result))

    def load(self, ptx, kernel):
        module = ctypes.c_void_p()
        self.check(self.cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(ptx.encode())), "cuModuleLoadData")
        function = ctypes.c_void_p()
        self.check(self.cuda.cuModuleGetFunction(ctypes.byref(function), module, kernel.encode()),
                   "cuModuleGetFunction " + kernel)
        return function

    def launch(self, function, grid, block, params, stream):
        self.check(self.cuda.cuLaunchKernel(function, *[ctypes.c_uint(v) for v in grid],
                                            *[ctypes.c_uint(v) for v in block], ctypes.c_uint(0),
                                            ctypes.c_void_p(stream), params, None), "cuLaunchKernel")


def param_values(args, pointers):
    """The kernel's parameters: each memref as (allocated, aligned, offset,
    sizes..., strides...), all 64-bit."""
    values = []
    for name, type_ in args:
        sizes, strides, offset, _ = memref_layout(type_)
        values += [pointers[name], pointers[name], offset] + sizes + strides
    return values


def ptx_param_count(ptx, kernel):
    entry = re.search(r"\.entry " + kernel + r"\((.*?)\)", ptx, re.S)
    return len(re.findall(r"\.param ", entry.group(1))) if entry else -1


def kernel_params(args, tensors):
    values = param_values(args, {name: t.data_ptr() for name, t in tensors.items()})
    holders = [ctypes.c_uint64(v) for v in values]
    array = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders])
    return array, holders


def median_time(torch, work, repeat):
    """Median milliseconds of one call of `work(i)` over batches of back-to-back calls."""
    for i in range(10):
        work(i)
    torch.cuda.synchronize()
    batch = 10
    samples = []
    count = 0
    for _ in range(max(1, repeat // batch)):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            work(count)
            count += 1
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / batch)
    return statistics.median(samples)


def copy_bandwidth(torch):
    source = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    target = torch.empty_like(source)
    ms = median_time(torch, lambda i: target.copy_(source), 50)
    return 2 * source.numel() * 4 / ms / 1e9  # TB/s, read plus write


def compile_and_check(work, product, config):
    """Compiles one configuration; checks each launch's parameters against
    its PTX entry. Returns (launches, ptx, choice, arguments)."""
    label, m, k, n, batch, transpose_b, _ = product
    outlined, lowered, choice = compile_product(work, m, k, n, batch, transpose_b, config)
    arguments, launches = parse_host(outlined)
    ptx = parse_ptx(lowered)
    for launch in launches:
        count = len(param_values(launch["args"], {name: 0 for name, _ in arguments.values()}))
        expected = ptx_param_count(ptx[launch["module"]], launch["kernel"])
        if count != expected:
            raise RuntimeError("%s takes %d parameters, not %d" % (launch["kernel"], expected, count))
    summary = re.sub(r".*?\(batch x M x N x K\), ", "", choice.splitlines()[-1]) if choice else ""
    return launches, ptx, summary, arguments


def verdict(target, speed):
    if target is None:
        return ""
    kind, value = target
    if kind == "speed":
        return "%s (>= %.2fx)" % ("met" if speed >= value else "MISSED", value)
    return "%s (<= %.1fx cuBLAS time)" % ("met" if 1 / speed <= value else "MISSED", value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="time the default configurations only")
    parser.add_argument("--repeat", type=int, default=200, help="timed launches per configuration")
    parser.add_argument("--only", help="time only products whose label contains this")
    parser.add_argument("--dry-run", action="store_true",
                        help="compile and check every configuration's launches against its PTX; no GPU")
    options = parser.parse_args()
    products = [p for p in PRODUCTS if not options.only or options.only in p[0]]

    if options.dry_run:
        failures = 0
        with tempfile.TemporaryDirectory() as work:
            for product in products:
                for config in [""] + ([] if options.quick else SWEEP.get(product[0], [])):
                    try:
                        launches, _, summary, _ = compile_and_check(work, product, config)
                        print("%-30s %-50s %d launches: %s" % (product[0], config or "default", len(launches),
                                                                summary))
                    except Exception as error:
                        print("%-30s %-50s error: %s" % (product[0], config or "default", error))
                        failures += 1
        return 1 if failures else 0

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    driver = Driver()
    bandwidth = copy_bandwidth(torch)
    print("matmul timings on %s: f32, TF32 off; GPU time per product (median over %d launches after warm-up, "
          "CUDA events), operands rotated over >= %d MB; copy bandwidth %.2f TB/s" %
          (torch.cuda.get_device_name(), options.repeat, ROTATION_BYTES >> 20, bandwidth))
    rows = []
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for product in products:
            label, m, k, n, batch, transpose_b, target = product
            flops = 2.0 * max(batch, 1) * m * n * k
            cublas_ms = None
            for config in [""] + ([] if options.quick else SWEEP.get(label, [])):
                try:
                    launches, ptx, summary, arguments = compile_and_check(work, product, config)
                    functions = [driver.load(ptx[l["module"]], l["kernel"]) for l in launches]
                except Exception as error:  # report it and go on with the next configuration
                    rows.append((label, config or "default", "error: %s" % error))
                    failures += 1
                    continue
                # Operand copies: a, b (as stored: [N, K] when transposed) and y.
                shapes = {name: memref_layout(type_)[0] for name, type_ in arguments.values()}
                per_copy = sum(4 * torch.Size(s).numel() for s in shapes.values())
                copies = max(1, min(MAX_COPIES, -(-ROTATION_BYTES // per_copy)))
                sets = [{name: torch.empty(s, device="cuda").uniform_(-1, 1) for name, s in shapes.items()}
                        for _ in range(copies)]
                params = [[kernel_params(l["args"], tensors) for l in launches] for tensors in sets]

                def mlpipe(i):
                    for launch, function, (array, _) in zip(launches, functions, params[i % copies]):
                        driver.launch(function, launch["grid"], launch["block"], array, stream)

                def cublas(i):
                    s = sets[i % copies]
                    torch.matmul(s["a"], s["b"].transpose(-1, -2) if transpose_b else s["b"], out=s["y"])

                # What is timed computes the product: checked against float64.
                mlpipe(0)
                a, b, y = sets[0]["a"], sets[0]["b"], sets[0]["y"]
                expected = torch.matmul(a.double(), (b.transpose(-1, -2) if transpose_b else b).double())
                error = (torch.linalg.norm((y.double() - expected).flatten()) /
                         torch.linalg.norm(expected.flatten())).item()
                if not error < 1e-5:
                    failures += 1
                ms = median_time(torch, mlpipe, options.repeat)
                if cublas_ms is None:
                    cublas_ms = median_time(torch, cublas, options.repeat)
                speed = cublas_ms / ms
                shown = config or "default: " + summary
                rows.append((label, shown, ms * 1e3, flops / ms / 1e9, cublas_ms * 1e3, speed, error,
                             verdict(target, speed) if not config else ""))
                del sets, params

    print()
    print("%-30s %-64s %9s %8s %9s %7s %8s  %s" %
          ("product", "configuration", "mlpipe us", "TFLOP/s", "cuBLAS us", "speed", "rel err", "target"))
    for row in rows:
        if len(row) == 3:
            print("%-30s %-64s %s" % row)
            continue
        label, config, us, tflops, cublas_us, speed, error, met = row
        print("%-30s %-64s %9.1f %8.1f %9.1f %6.2fx %8.1e  %s" %
              (label, config[:64], us, tflops, cublas_us, speed, error, met))
    print("speed = cuBLAS time / mlpipe time. A rel err above 1e-5 (against float64) fails the step.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
