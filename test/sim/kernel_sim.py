#!/usr/bin/env python3
"""Runs GPU kernels of an outlined mlpipe module on the CPU, thread by thread.

    kernel_sim.py --reference bufferized.mlir --actual outlined.mlir [--seed N]

Both files are in MLIR's generic form (mlpipe-opt --mlir-print-op-generic
--mlir-print-local-scope). In the first, the public host function (and the
fusion functions it calls) runs linalg.fill, linalg.transpose,
linalg.matmul and linalg.batch_matmul as reference semantics; the second is
the same program after kernel-building passes (one pass, or all of
outline), whose gpu.launch_func are run by executing the kernels' ops
(arith, math, memref, vector, scf, gpu; nvvm.mma.sync and nvgpu.ldmatrix
across a warp's lanes, on 16-bit operands or TF32, whose conversion keeps
the value; nvvm.prefetch, whose address must fall inside the
buffer it was taken from; cp.async as nvgpu.device_async_copy, its data
landing at the wait_group that covers it; dynamic shared memory as the
typed views memref.view makes of it) for every thread of every block:
each kernel is translated once into a Python generator that one thread
runs.
The public function's arguments get the same random
values in both runs (arguments with strided layouts get a buffer large enough
for the layout); afterwards every buffer must match.

The interpreter checks what a GPU would not report: an index out of bounds
(per dimension, so a view cannot reach into a neighbour), a vector access not
aligned as its `alignment` says, a barrier not reached by every thread of the
block, and data races: in shared memory between two barriers (a read and a
write, or two writes, of one address by different threads), and in global
memory within a launch (atomic adds excepted), and a read before a kernel's
griddepcontrol.wait (where the kernel before it may still run) of a buffer
that any launch of the run writes. Values are Python floats
(float64), so a wrong index shows as a large error, not as rounding.
Memory is laid out as LLVM lays it out where that differs from an
element's slot: a vector of i1 is packed into bits (vector<4xi1> loads and
stores one byte), while a memref of i1 holds a byte per element. Float
comparisons keep IEEE's ordered and unordered predicates apart, so NaN
inputs compare as on the GPU; integers are compared with the signedness
and width their op says.

Kept small on purpose: it knows the ops mlpipe's matmul emitter builds, and
those of the loop kernels outline makes of fills.
"""

import argparse
import functools
import gc
import itertools
import math
import operator
import random
import re
import sys


class SimError(Exception):
    pass


# ----------------------------------------------------------------------------
# Parsing the generic form, one op per line.
# ----------------------------------------------------------------------------


class Op:
    __slots__ = ("name", "results", "operands", "attrs", "result_type", "signature", "regions", "line", "scope")

    def __init__(self, name, results, operands, line):
        self.name = name
        self.results = results
        self.operands = operands
        self.attrs = ""
        self.result_type = ""
        self.signature = ""  # the types, '(operands) -> results'
        self.regions = []
        self.line = line
        self.scope = ""  # memref.global and memref.get_global: the gpu.module they are in ("": none)


class Block:
    __slots__ = ("args", "ops")

    def __init__(self, args):
        self.args = args  # [(name, type)]
        self.ops = []


OP_LINE = re.compile(r'^\s*(?:(?P<res>%[\w]+(?::\d+)?(?:, %[\w]+)*) = )?"(?P<name>[\w.]+)"\((?P<ops>[^)]*)\)(?P<rest>.*)$')
BLOCK_LINE = re.compile(r"^\s*\^bb\d+(?:\((?P<args>.*)\))?:\s*$")


def split_top(text, sep=","):
    """Splits at `sep` outside brackets."""
    parts, depth, current = [], 0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        if text.startswith("->", i):
            current += "->"
            i += 2
            continue
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
        i += 1
    if current.strip():
        parts.append(current.strip())
    return parts


def result_names(text):
    if not text:
        return []
    names = []
    for part in text.split(", "):
        m = re.match(r"(%[\w]+)(?::(\d+))?$", part)
        if m.group(2):
            names += ["%s#%d" % (m.group(1), i) for i in range(int(m.group(2)))]
        else:
            names.append(m.group(1))
    return names


def operand_names(text):
    return [t.strip() for t in text.split(",") if t.strip()]


def finish_op(op, rest):
    # rest: ' <{props}> {attrs} : (types) -> result' (any part optional); an
    # op with regions had its properties before them.
    at = rest.rfind(" : ")
    signature = rest[at + 3:] if at >= 0 else ""
    op.attrs += rest[:at] if at >= 0 else rest
    arrow = signature.rfind("-> ")
    op.result_type = signature[arrow + 3:].strip() if arrow >= 0 else ""
    op.signature = signature.strip()


def parse(text):
    lines = text.splitlines()
    root = Block([])
    stack = [(None, root)]  # (op awaiting regions, current block)
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("//") or stripped.startswith("#"):
            continue
        m = BLOCK_LINE.match(line)
        if m:
            op, _ = stack[-1]
            args = []
            if m.group("args"):
                for arg in split_top(m.group("args")):
                    name, _, type_ = arg.partition(": ")
                    args.append((name.strip(), type_.strip()))
            block = Block(args)
            op.regions[-1].append(block)
            stack[-1] = (op, block)
            continue
        if stripped == "}, {":
            op, _ = stack[-1]
            op.regions.append([])
            stack[-1] = (op, None)
            continue
        if stripped.startswith("})"):
            op, _ = stack.pop()
            finish_op(op, stripped[2:])
            continue
        m = OP_LINE.match(line)
        if not m:
            raise SimError("line %d: cannot parse: %s" % (number, stripped[:100]))
        op = Op(m.group("name"), result_names(m.group("res")), operand_names(m.group("ops")), number)
        parent, block = stack[-1]
        if block is None:  # a region without a block header
            block = Block([])
            parent.regions[-1].append(block)
            stack[-1] = (parent, block)
        block.ops.append(op)
        rest = m.group("rest")
        if rest.rstrip().endswith("({"):
            op.attrs = rest.rstrip()[:-2]
            op.regions.append([])
            stack.append((op, None))
        else:
            finish_op(op, rest)
    return root


# ----------------------------------------------------------------------------
# Types and memory.
# ----------------------------------------------------------------------------


class FloatBits(int):
    """The i32 bits of an f32 value the simulator holds in float64 (an
    arith.bitcast), with that value, which a bitcast back returns."""

    def __new__(cls, bits, value):
        self = super().__new__(cls, bits)
        self.value = value
        return self

MEMREF = re.compile(r"memref<((?:\d+x)*)(f32|f64|bf16|f16|index|i\d+)(?:, strided<\[([-\d, ]*)\](?:, offset: (\d+|\?))?>)?(, #gpu\.address_space<workgroup>)?>")


def parse_memref(type_):
    m = MEMREF.match(type_)
    if not m:
        raise SimError("unsupported memref type " + type_)
    sizes = [int(d) for d in m.group(1).split("x") if d]
    if m.group(3) is not None:
        strides = [int(s) for s in m.group(3).split(",") if s.strip()]
    else:
        strides, acc = [], 1
        for size in reversed(sizes):
            strides.insert(0, acc)
            acc *= size
    offset = 0 if m.group(4) in (None, "?") else int(m.group(4))  # "?": a dynamic offset, known from the view
    element_bytes = {"f64": 8, "index": 8, "i64": 8, "bf16": 2, "f16": 2, "i16": 2, "i8": 1, "i1": 1}.get(m.group(2), 4)
    return sizes, strides, offset, element_bytes, bool(m.group(5))


@functools.lru_cache(maxsize=None)
def vector_width(type_):
    m = re.match(r"vector<(\d+)x", type_)
    return int(m.group(1)) if m else None


class Buffer:
    counter = 0

    def __init__(self, size, name, shared=False):
        self.data = [0.0] * size
        self.name = name
        self.shared = shared
        self.device = False  # in device memory, where host code may not load or store
        Buffer.counter += 1
        self.id = Buffer.counter


class MemRef:
    __slots__ = ("buf", "offset", "sizes", "strides", "element_bytes")

    def __init__(self, buf, offset, sizes, strides, element_bytes):
        self.buf = buf
        self.offset = offset
        self.sizes = sizes
        self.strides = strides
        self.element_bytes = element_bytes

    def address(self, indices, op):
        sizes = self.sizes
        if len(sizes) == 2 and len(indices) == 2:  # the common case, without a loop
            i, j = indices
            if 0 <= i < sizes[0] and 0 <= j < sizes[1]:
                strides = self.strides
                return self.offset + i * strides[0] + j * strides[1]
        elif len(indices) == len(sizes):
            a = self.offset
            for i, size, stride in zip(indices, sizes, self.strides):
                if not 0 <= i < size:
                    break
                a += i * stride
            else:
                return a
        if len(indices) != len(self.sizes):
            raise SimError("line %d: %d indices into a rank-%d memref" % (op.line, len(indices), len(self.sizes)))
        a = self.offset
        for i, size, stride in zip(indices, self.sizes, self.strides):
            if not 0 <= i < size:
                raise SimError("line %d (%s): index %s out of bounds of %s (%s)" %
                               (op.line, op.name, indices, self.sizes, self.buf.name))
            a += i * stride
        return a


# ----------------------------------------------------------------------------
# Race tracking.
# ----------------------------------------------------------------------------


class SharedLog:
    """Accesses to shared memory since the last barrier."""

    def __init__(self):
        self.writer = {}
        self.readers = {}

    def read(self, key, thread, op):
        w = self.writer.get(key)
        if w is not None and w != thread:
            raise SimError("line %d: shared race: thread %s reads what thread %s wrote before the same barrier" %
                           (op.line, thread, w))
        readers = self.readers.get(key)
        if readers is None:
            self.readers[key] = {thread}
        else:
            readers.add(thread)

    def read_range(self, number, base, width, thread, op):
        """`read` of the elements base .. base + width - 1 of buffer `number`."""
        writer, readers = self.writer, self.readers
        for a in range(base, base + width):
            key = (number, a)
            w = writer.get(key)
            if w is not None and w != thread:
                raise SimError("line %d: shared race: thread %s reads what thread %s wrote before the same "
                               "barrier" % (op.line, thread, w))
            seen = readers.get(key)
            if seen is None:
                readers[key] = {thread}
            else:
                seen.add(thread)

    def write(self, key, thread, op):
        w = self.writer.get(key)
        if w is not None and w != thread:
            raise SimError("line %d: shared race: threads %s and %s write one address between barriers" %
                           (op.line, w, thread))
        readers = self.readers.get(key)
        if readers and (len(readers) > 1 or thread not in readers):
            raise SimError("line %d: shared race: thread %s overwrites what other threads read before the same "
                           "barrier" % (op.line, thread))
        self.writer[key] = thread


class GlobalLog:
    """Accesses to global memory within one launch. A write is the writing
    thread's own until a barrier of its block, then its block's: a read or
    write by another thread before that barrier, or by another block at
    all, is a race, unless the writes were released and acquired through
    an atomic: a GPU-scope fence (llvm.fence) by a writing thread, or by
    any thread of the block once the writes are its block's (after a
    barrier), then an atomic of the block on some element releases them;
    an atomic of another block on that element after it, then a fence of
    that block, makes them the reading block's to read."""

    def __init__(self):
        self.writer = {}
        self.pending = {}  # block -> keys its threads wrote since its last barrier
        self.published = {}  # key -> the block whose barrier made the write its block's
        self.by_block = {}  # block -> keys published as its
        self.atomic = set()
        self.fenced = {}  # block -> writes its fences ordered before its later atomics
        self.released = {}  # atomic element -> writes released through it
        self.acquiring = {}  # block -> writes its atomics saw released, not yet fenced
        self.visible = {}  # block -> other blocks' writes it acquired

    def read(self, key, thread, op):
        w = self.writer.get(key)
        if w is not None and w != thread:
            raise SimError("line %d: global race: %s reads what %s wrote in the same launch" % (op.line, thread, w))
        block = self.published.get(key)
        if block is not None and block != thread[0] and key not in self.visible.get(thread[0], ()):
            raise SimError("line %d: global race: %s reads what block %s wrote in the same launch" %
                           (op.line, thread, block))
        if key in self.atomic:
            raise SimError("line %d: global race: %s reads an element being added to atomically" % (op.line, thread))

    def read_range(self, number, base, width, thread, op):
        for a in range(base, base + width):
            self.read((number, a), thread, op)

    def write(self, key, thread, op):
        w = self.writer.get(key)
        block = self.published.get(key)
        if (w is not None and w != thread) or (block is not None and block != thread[0]) or key in self.atomic:
            raise SimError("line %d: global race: %s and %s both write one element in a launch" %
                           (op.line, w if w is not None else block, thread))
        self.writer[key] = thread
        self.pending.setdefault(thread[0], []).append(key)

    def barrier(self, block):
        """The block's threads passed a barrier: what they wrote is the block's."""
        for key in self.pending.pop(block, []):
            if self.writer.pop(key, None) is not None:
                self.published[key] = block
                self.by_block.setdefault(block, []).append(key)

    def add(self, key, thread, op):
        if key in self.writer or key in self.published:
            raise SimError("line %d: global race: atomic add to an element written plainly" % op.line)
        self.atomic.add(key)
        block = thread[0]
        released = self.released.setdefault(key, set())
        released.update(self.fenced.get(block, ()))
        self.acquiring.setdefault(block, set()).update(released)

    def fence(self, thread):
        """A GPU-scope fence by `thread`: it releases the thread's own
        writes and its block's, and acquires what its block's atomics saw."""
        block = thread[0]
        fenced = self.fenced.setdefault(block, set())
        fenced.update(self.by_block.get(block, ()))
        fenced.update(key for key in self.pending.get(block, ()) if self.writer.get(key) == thread)
        self.visible.setdefault(block, set()).update(self.acquiring.get(block, ()))


# ----------------------------------------------------------------------------
# The interpreter.
# ----------------------------------------------------------------------------


# Ops run many times over (once per thread, per loop iteration), so what
# they read from their attributes and types is parsed once per distinct
# text: the helpers below are cached on the text they parse.
@functools.lru_cache(maxsize=None)
def attrs_int(attrs, key):
    m = re.search(key + r" = (-?\d+)", attrs)
    return int(m.group(1)) if m else None


def attr_int(op, key):
    value = attrs_int(op.attrs, key)
    if value is None:
        raise SimError("line %d: %s has no %s" % (op.line, op.name, key))
    return value


def scalar_value(text, type_):
    """One element of an attribute: true/false, an integer, a float, or a
    float's bits in hex (as MLIR prints NaNs and infinities)."""
    text = text.strip()
    if text in ("true", "false"):
        return int(text == "true")
    if type_ in ("f32", "f64", "bf16", "f16"):
        if text.startswith("0x"):
            import struct
            bits = int(text, 16)
            if type_ == "f32":
                return struct.unpack("<f", struct.pack("<I", bits))[0]
            if type_ == "bf16":
                return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
            if type_ == "f16":
                return struct.unpack("<e", struct.pack("<H", bits))[0]
            return struct.unpack("<d", struct.pack("<Q", bits))[0]
        return float(text)
    return int(text)


def constant_value(op):
    value = parsed_constant(op.attrs, op.result_type)
    return list(value) if isinstance(value, list) else value


@functools.lru_cache(maxsize=None)
def parsed_constant(attrs, result_type):
    """The value of an arith.constant with these attributes and result type
    (a list for a vector; callers copy it)."""
    m = re.search(r"value = (.*?)(?: : ([\w<>]+))?\}>", attrs)
    text = m.group(1)
    if text.startswith("dense<"):
        inner = re.match(r"dense<([^>]*)>", text).group(1)
        width = vector_width(result_type)
        element = re.search(r"x(\w+)>", result_type).group(1)
        if inner.startswith("["):
            return [scalar_value(v, element) for v in inner.strip("[]").split(",")]
        return [scalar_value(inner, element)] * width
    return scalar_value(text, result_type)


# memref.global of the module run, by name: (type, elements, constant).
# A global that is not constant (a kernel's counters) is one buffer for
# the run, by (name, type): two kernel modules' globals of one name and
# type share it (each launch that counts in it leaves it as it found it).
GLOBALS = {}
MUTABLE_GLOBALS = {}


def collect_globals(block, scope=""):
    """The memref.global ops, keyed by (gpu.module, name): each kernel
    module is a module of its own on the GPU, with globals of its own (two
    may share a name)."""
    for op in block.ops:
        op.scope = scope
        if op.name == "memref.global":
            name = re.search(r'sym_name = "([\w]+)"', op.attrs).group(1)
            type_ = re.search(r"type = (memref<[^>]*>)", op.attrs).group(1)
            element = re.match(r"memref<(?:\d+x)*(\w+)>", type_).group(1)
            inner = re.search(r"initial_value = dense<(\[[^\]]*\]|[^>]*)>", op.attrs).group(1)
            sizes = parse_memref(type_)[0]
            if inner.startswith("["):
                values = [scalar_value(v, element) for v in inner.strip("[]").split(",")]
            else:
                values = [scalar_value(inner, element)] * math.prod(sizes)
            GLOBALS[(scope, name)] = (type_, values, re.search(r"\bconstant\b", op.attrs) is not None)
        inner_scope = scope
        if op.name == "gpu.module":
            inner_scope = re.search(r'sym_name = "([\w]+)"', op.attrs).group(1)
        for region in op.regions:
            for inner_block in region:
                collect_globals(inner_block, inner_scope)


CMP = {0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b, 3: lambda a, b: a <= b,
       4: lambda a, b: a > b, 5: lambda a, b: a >= b, 6: lambda a, b: a < b, 7: lambda a, b: a <= b,
       8: lambda a, b: a > b, 9: lambda a, b: a >= b}


# arith.cmpf predicates: an ordered one is false where either side is NaN,
# an unordered one true.
def _ordered(test):
    return lambda a, b: a == a and b == b and test(a, b)


def _unordered(test):
    return lambda a, b: a != a or b != b or test(a, b)


CMPF = {0: lambda a, b: False, 1: _ordered(lambda a, b: a == b), 2: _ordered(lambda a, b: a > b),
        3: _ordered(lambda a, b: a >= b), 4: _ordered(lambda a, b: a < b), 5: _ordered(lambda a, b: a <= b),
        6: _ordered(lambda a, b: a != b), 7: _ordered(lambda a, b: True), 8: _unordered(lambda a, b: a == b),
        9: _unordered(lambda a, b: a > b), 10: _unordered(lambda a, b: a >= b), 11: _unordered(lambda a, b: a < b),
        12: _unordered(lambda a, b: a <= b), 13: _unordered(lambda a, b: a != b),
        14: _unordered(lambda a, b: False), 15: lambda a, b: True}


def operand_bits(op):
    """The width of an integer op's first operand (index: 64)."""
    return signature_operand_bits(op.signature)


@functools.lru_cache(maxsize=None)
def signature_operand_bits(signature):
    m = re.match(r"\((i(\d+)|index)", signature)
    return 64 if not m or m.group(1) == "index" else int(m.group(2))


# Integers are Python ints, and bit operations can leave a negative one as
# its two's complement (-1 as 2^64 - 1, from halves joined after a shuffle):
# comparisons read them as the op says.
def as_signed(value, bits):
    if isinstance(value, bool) or bits == 1:
        return int(value) & 1
    value = int(value) & ((1 << bits) - 1)
    return value - (1 << bits) if value >> (bits - 1) else value


def as_unsigned(value, bits):
    return int(value) & ((1 << bits) - 1)


def position(op):
    return static_position(op.attrs)


@functools.lru_cache(maxsize=None)
def static_position(attrs):
    return int(re.search(r"static_position = array<i64: (\d+)>", attrs).group(1))


@functools.lru_cache(maxsize=None)
def static_positions(attrs):
    return tuple(int(i) for i in re.search(r"static_position = array<i64: ([\d, ]+)>", attrs).group(1).split(","))


def bit_packed_access(thread, memref, base, width, value, op):
    """A vector of i1 in memory as LLVM lays it out: packed, eight elements
    to a byte (vector<4xi1> is one byte), where a memref of i1 holds a byte
    per element. A load reads the bits of the bytes from `base` on; a store
    writes the group's bits into them."""
    count = (width + 7) // 8
    out = []
    for k in range(count):
        a = base + k
        access(thread, memref, a, op, "write" if value is not None else "read")
        if value is not None:
            memref.buf.data[a] = sum(int(bool(value[j])) << (j - 8 * k) for j in range(8 * k, min(width, 8 * k + 8)))
        else:
            byte = int(memref.buf.data[a])
            out.extend((byte >> (j - 8 * k)) & 1 for j in range(8 * k, min(width, 8 * k + 8)))
    return None if value is not None else out


def check_alignment(op, memref, address):
    alignment = attrs_alignment(op.attrs)
    if alignment is not None and (address * memref.element_bytes) % alignment != 0:
        raise SimError("line %d: %s at element %d of %s is not %d-byte aligned" %
                       (op.line, op.name, address, memref.buf.name, alignment))


@functools.lru_cache(maxsize=None)
def attrs_alignment(attrs):
    m = re.search(r"alignment = (\d+)", attrs)
    return int(m.group(1)) if m else None


class RetiredView:
    """The data of a view of dynamic shared memory whose bytes a later view
    took: any access is an error."""

    def __init__(self, name, line, count):
        self.name, self.line, self.count = name, line, count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        raise SimError("an access to %s, whose bytes the view of line %d has taken over" % (self.name, self.line))

    def __setitem__(self, index, value):
        self.__getitem__(index)


class DynamicShared:
    """A block's dynamic shared memory (gpu.dynamic_shared_memory), of the
    launch's size in bytes, as the typed buffers memref.view makes of it:
    one per byte offset and type, shared by the block's threads. Each view
    must lie inside the size and be aligned to its element. A view over
    bytes that earlier views hold takes them over (as a kernel reuses its
    stages for its output tile): its data starts uninitialised, and any
    later access through the earlier views is an error, as is taking
    bytes a wgmma not yet waited for reads."""

    def __init__(self, size, block):
        self.size = size
        self.block = block
        self.views = {}

    def view(self, op, offset):
        key = (offset, op.result_type)
        if key not in self.views:
            sizes, strides, _, element_bytes, _ = parse_memref(op.result_type)
            end = offset + math.prod(sizes) * element_bytes
            if offset % element_bytes != 0 or end > self.size:
                raise SimError("line %d: a view of bytes %d..%d of %d bytes of dynamic shared memory" %
                               (op.line, offset, end, self.size))
            for (other, _), view in self.views.items():
                if offset < other + view.buf.bytes and other < end and not isinstance(view.buf.data, RetiredView):
                    if any(getattr(view.buf, "inflight", {}).values()):
                        raise SimError("line %d: a view of dynamic shared memory over %s, which a wgmma not yet "
                                       "waited for reads" % (op.line, view.buf.name))
                    view.buf.data = RetiredView(view.buf.name, op.line, len(view.buf.data))
            buf = Buffer(math.prod(sizes), "dynamic shared at %d" % offset, shared=True)
            buf.data = [float("nan")] * len(buf.data)  # uninitialised
            buf.bytes = end - offset
            self.views[key] = MemRef(buf, 0, sizes, strides, element_bytes)
        return self.views[key]


class Thread:
    __slots__ = ("tid", "bid", "key", "shared_log", "global_log", "pending", "groups", "dynamic_shared",
                 "before_wait")

    def __init__(self, tid, bid, shared_log, global_log, dynamic_shared=None, before_wait=False):
        self.tid = tid
        # In a kernel that waits for the one before it: not yet past the wait.
        self.before_wait = before_wait
        self.bid = bid
        self.key = (bid, tid)
        self.shared_log = shared_log
        self.global_log = global_log
        self.dynamic_shared = dynamic_shared
        # cp.async copies issued and not yet committed, and the committed
        # groups not yet waited for (oldest first): (memref, address, values).
        self.pending = []
        self.groups = []


# Global buffers read before a kernel's wait for the kernel before it, and
# buffers any launch writes: (buffer id) -> (name, line of the first access).
# No buffer may be in both (checked at the end of the run).
reads_before_wait = {}
writes_by_launches = {}


def note_global_access(thread, memref, op, kind):
    if memref.buf.shared:
        return
    if kind == "read":
        if thread.before_wait:
            reads_before_wait.setdefault(memref.buf.id, (memref.buf.name, op.line))
    else:
        writes_by_launches.setdefault(memref.buf.id, (memref.buf.name, op.line))


def check_reads_before_wait():
    for number, (name, line) in reads_before_wait.items():
        if number in writes_by_launches:
            raise SimError("line %d: a kernel reads %s before it waits for the kernel before it, and a launch writes "
                           "it (line %d)" % (line, name, writes_by_launches[number][1]))


def access(thread, memref, address, op, kind):
    if thread is None or isinstance(thread, Indices):  # host code, or a linalg body run as a reference
        return
    note_global_access(thread, memref, op, kind)
    log = thread.shared_log if memref.buf.shared else thread.global_log
    key = (memref.buf.id, address)
    if kind == "read":
        log.read(key, thread.key if not memref.buf.shared else thread.tid, op)
        if block_lines["prefetched"]:
            note_loaded(memref, address, 1)
    elif kind == "write":
        inflight = getattr(memref.buf, "inflight", None)
        if inflight and inflight.get(address):
            raise SimError("line %d: a write to %s at element %d, which a wgmma not yet waited for reads" %
                           (op.line, memref.buf.name, address))
        log.write(key, thread.key if not memref.buf.shared else thread.tid, op)
    else:
        log.add(key, thread.key, op)


def access_range(thread, memref, base, width, op, kind):
    """`access` of `width` elements from `base` on, in order ("read" or "write")."""
    if thread is None or isinstance(thread, Indices):
        return
    buf = memref.buf
    note_global_access(thread, memref, op, kind)
    log, who = (thread.shared_log, thread.tid) if buf.shared else (thread.global_log, thread.key)
    if kind == "read":
        log.read_range(buf.id, base, width, who, op)
        if block_lines["prefetched"]:
            note_loaded(memref, base, width)
        return
    number = buf.id
    inflight = getattr(buf, "inflight", None)
    for a in range(base, base + width):
        if inflight and inflight.get(a):
            raise SimError("line %d: a write to %s at element %d, which a wgmma not yet waited for reads" %
                           (op.line, buf.name, a))
        log.write((number, a), who, op)


def mma_lanes(a, b, c):
    """D = A B + C of an m16n8 mma.sync, as the lanes hold it: lane l (g = l
    / 4, t = l % 4) gets rows g, g+8 at columns 2t, 2t+1."""
    columns = list(zip(*b))  # B's columns
    results = []
    for lane in range(32):
        g, t = lane // 4, lane % 4
        d = []
        for i in range(4):
            row, col = g + 8 * (i // 2), 2 * t + i % 2
            d.append(c[row][col] + sum(map(operator.mul, a[row], columns[col])))
        results.append(d)
    return results


class Tf32:
    """An f32 converted to TF32 for an mma.sync operand
    (nvvm.convert.float.to.tf32): the value as it was, for the simulator
    compares in float64 (a wrong index shows as a large error, not as
    rounding); an mma.sync .tf32 takes only registers made by it."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def warp_mma_tf32(op, lanes):
    """mma.sync m16n8k8 .tf32, row-major A and column-major B, f32
    accumulation, from the 32 lanes' fragments (lane l: g = l / 4, t = l %
    4; A's registers hold rows g, g+8 at column t, then the same at t+4;
    B's rows t, t+4 at column g; C as for m16n8k16), each register one Tf32."""
    a = [[0.0] * 8 for _ in range(16)]
    b = [[0.0] * 8 for _ in range(8)]
    c = [[0.0] * 8 for _ in range(16)]

    def word(register):
        if not isinstance(register, Tf32):
            raise SimError("line %d: an mma.sync .tf32 operand not made by nvvm.convert.float.to.tf32" % op.line)
        return register.value
    for lane, args in enumerate(lanes):
        g, t = lane // 4, lane % 4
        for reg in range(4):
            a[g + 8 * (reg % 2)][t + 4 * (reg // 2)] = word(args[reg])
        for reg in range(2):
            b[t + 4 * reg][g] = word(args[4 + reg])
        for i in range(4):
            c[g + 8 * (i // 2)][2 * t + i % 2] = args[6 + i]
    return mma_lanes(a, b, c)


def warp_mma(op, lanes):
    """mma.sync m16n8k16, row-major A and column-major B, f32 accumulation:
    D = A B + C from the 32 lanes' fragments (lane l: g = l / 4, t = l % 4;
    A's registers hold rows g, g+8 at columns 2t, 2t+1, then 8 further; B's
    rows 2t, 2t+1 (then 8 further) at column g; C's rows g, g+8 at columns
    2t, 2t+1). A 32-bit register of two 16-bit values is a pair (first the
    lower half). m16n8k8 on TF32: warp_mma_tf32."""
    if "operandSegmentSizes = array<i32: 4, 2, 4>" in op.attrs and "m = 16, n = 8, k = 8" in op.attrs and \
            "mma_type<tf32>" in op.attrs:
        return warp_mma_tf32(op, lanes)
    if "m = 16, n = 8, k = 16" not in op.attrs or "operandSegmentSizes = array<i32: 4, 2, 4>" not in op.attrs:
        raise SimError("line %d: the simulator knows mma.sync m16n8k16, and m16n8k8 on tf32, only" % op.line)
    a = [[0.0] * 16 for _ in range(16)]
    b = [[0.0] * 8 for _ in range(16)]
    c = [[0.0] * 8 for _ in range(16)]
    for lane, args in enumerate(lanes):
        g, t = lane // 4, lane % 4
        for reg in range(4):
            for e in range(2):
                a[g + 8 * (reg % 2)][2 * t + e + 8 * (reg // 2)] = args[reg][e]
        for reg in range(2):
            for e in range(2):
                b[2 * t + e + 8 * reg][g] = args[4 + reg][e]
        for i in range(4):
            c[g + 8 * (i // 2)][2 * t + i % 2] = args[6 + i]
    return mma_lanes(a, b, c)


# The address gpu.dynamic_shared_memory's bytes start at in shared memory
# (memref.extract_aligned_pointer_as_index): only 16-byte aligned, as the
# hardware promises, so a kernel that needs more aligns its views itself.
DYNAMIC_SHARED_BASE = 48


@functools.lru_cache(maxsize=None)
def wgmma_form(attrs):
    shape = re.search(r"m = (\d+), n = (\d+), k = (\d+)", attrs)
    m, n, k = (int(v) for v in shape.groups())
    layouts = re.findall(r"layout([AB]) = #nvvm.mma_layout<(\w+)>", attrs)
    layout = dict(layouts)
    scale_d = re.search(r"scaleD = #nvvm.wgmma_scale_out<(\w+)>", attrs).group(1)
    return m, n, k, layout.get("A", "row"), layout.get("B", "col"), scale_d == "one"


def wgmma_element(dynamic, op, address):
    """The element of dynamic shared memory at a shared address, after the
    128-byte swizzle: address bits 4-6 are XORed with bits 7-9."""
    address ^= ((address >> 7) & 7) << 4
    relative = address - DYNAMIC_SHARED_BASE
    for (offset, _), view in dynamic.views.items():
        if offset <= relative < offset + view.buf.bytes and not isinstance(view.buf.data, RetiredView):
            index, rest = divmod(relative - offset, view.element_bytes)
            if rest:
                break
            return view.buf, index
    raise SimError("line %d: a wgmma operand at shared address %d, in no view of dynamic shared memory" %
                   (op.line, address))


def wgmma_descriptor(op, descriptor):
    """A wgmma matrix descriptor: start address, leading and stride byte
    offsets (16-byte units), swizzle mode (bits 62-63: 1 is 128 bytes, the
    only one mlpipe's kernels use)."""
    if descriptor >> 62 != 1 or (descriptor >> 49) & 7:
        raise SimError("line %d: a wgmma descriptor without the 128-byte swizzle, or with a base offset" % op.line)
    return ((descriptor & 0x3FFF) << 4, ((descriptor >> 16) & 0x3FFF) << 4, ((descriptor >> 32) & 0x3FFF) << 4)


def warpgroup_wgmma(op, lanes, dynamic, reads):
    """wgmma.mma_async m64nNk16 on 16-bit A and B from shared memory, f32
    accumulation, for the 128 threads of a warpgroup (each (inouts,
    descriptor A, descriptor B)). A is K-major (layout row): element (r, k)
    at start + (r / 8) SBO + (r mod 8) 128 + 2k; B K-major (layout col):
    (k, n) at start + (n / 8) SBO + (n mod 8) 128 + 2k; B N-major (layout
    row): at start + (n / 64) LBO + (k / 8) SBO + (k mod 8) 128 + 2 (n mod
    64); every address swizzled (wgmma_element). D as mma.sync's C for
    each warp's 16 rows: thread t (w = t / 32, g = t mod 32 / 4, q = t mod
    4) holds D[16w + g + 8r][8j + 2q + e] in value 4j + 2r + e. The
    elements read are added to `reads`: they may not be written until a
    wait_group retires this product."""
    m, n, k, layout_a, layout_b, accumulate = wgmma_form(op.attrs)
    if (m, k) != (64, 16) or layout_a != "row":
        raise SimError("line %d: the simulator knows wgmma m64nNk16 with K-major A only" % op.line)
    descriptors = set((args[1], args[2]) for args in lanes)
    if len(descriptors) != 1:
        raise SimError("line %d: the warpgroup's threads give different wgmma descriptors" % op.line)
    start_a, _, stride_a = wgmma_descriptor(op, lanes[0][1])
    start_b, leading_b, stride_b = wgmma_descriptor(op, lanes[0][2])

    def element(address):
        buf, index = wgmma_element(dynamic, op, address)
        reads.append((buf, index))
        return buf.data[index]

    a = [[element(start_a + (r // 8) * stride_a + (r % 8) * 128 + 2 * kk) for kk in range(k)] for r in range(m)]
    if layout_b == "col":
        b = [[element(start_b + (c // 8) * stride_b + (c % 8) * 128 + 2 * kk) for c in range(n)] for kk in range(k)]
    else:
        b = [[element(start_b + (c // 64) * leading_b + (kk // 8) * stride_b + (kk % 8) * 128 + 2 * (c % 64))
              for c in range(n)] for kk in range(k)]
    columns = list(zip(*b))
    results = []
    for t, args in enumerate(lanes):
        w, g, q = t // 32, t % 32 // 4, t % 4
        d = []
        for j in range(n // 8):
            for r in range(2):
                for e in range(2):
                    row, col = 16 * w + g + 8 * r, 8 * j + 2 * q + e
                    product = sum(map(operator.mul, a[row], columns[col]))
                    d.append(args[0][4 * j + 2 * r + e] + product if accumulate else product)
        results.append(d)
    return results


@functools.lru_cache(maxsize=None)
def ldmatrix_shape(attrs):
    count = int(re.search(r"numTiles = (\d+)", attrs).group(1))
    return count, "transpose = true" in attrs


def warp_ldmatrix(op, lanes):
    """ldmatrix .x1/.x2/.x4 of 16-bit 8x8 matrices, as PTX documents it:
    lanes 8j .. 8j+7 give the addresses of rows 0..7 of matrix j (each row
    8 consecutive elements, 16-byte aligned, in shared memory); lane l
    receives, of each matrix, row l / 4 at columns 2(l % 4) and the next
    (with .trans: column l / 4 at rows 2(l % 4) and the next), as a
    vector<2> per matrix. From a memref of 32-bit elements (f32 operands
    of mma.sync .tf32) a row is 4 elements, and lane l receives element l %
    4 of row l / 4 of each matrix, a vector<1> (no .trans: it moves 16-bit
    words). Every lane reads the rows it is given: the reads are checked
    for races as that lane's."""
    count, transpose = ldmatrix_shape(op.attrs)
    per_row = 16 // lanes[0][0][0].element_bytes
    if per_row not in (4, 8) or (per_row == 4 and transpose):
        raise SimError("line %d: ldmatrix of %d-byte elements%s" %
                       (op.line, 16 // per_row, " transposed" if transpose else ""))
    rows = []
    for lane in range(8 * count):
        args, thread = lanes[lane]
        memref, indices = args[0], list(args[1:])
        if not memref.buf.shared:
            raise SimError("line %d: ldmatrix from memory that is not shared" % op.line)
        if memref.strides[-1] != 1 or not 0 <= indices[-1] <= memref.sizes[-1] - per_row:
            raise SimError("line %d: ldmatrix row of %d at %s runs out of %s" %
                           (op.line, per_row, indices, memref.sizes))
        base = memref.address(indices, op)
        if (base * memref.element_bytes) % 16 != 0:
            raise SimError("line %d: ldmatrix row at element %d is not 16-byte aligned" % (op.line, base))
        for j in range(per_row):
            access(thread, memref, base + j, op, "read")
        rows.append((memref.buf, base))
    results = []
    for lane in range(32):
        value = []
        for j in range(count):
            if per_row == 4:
                buf, base = rows[8 * j + lane // 4]
                value.append([buf.data[base + lane % 4]])
                continue
            pair = []
            for e in range(2):
                row, col = (2 * (lane % 4) + e, lane // 4) if transpose else (lane // 4, 2 * (lane % 4) + e)
                buf, base = rows[8 * j + row]
                pair.append(buf.data[base + col])
            value.append(pair)
        results.append(value)
    return results


@functools.lru_cache(maxsize=None)
def async_copy_segments(attrs):
    return [int(v) for v in re.search(r"operandSegmentSizes = array<i32: ([\d, ]+)>", attrs).group(1).split(",")]


def async_copy(op, args, thread):
    """nvgpu.device_async_copy (cp.async): the source is read when the copy
    is issued; the destination is written when a wait_group covering it
    completes (device_async_wait), as this thread's write. With a source
    count below the copy's, the rest is zero (nothing read past it)."""
    dst_count, dst_indices, src_count, src_indices, elements = async_copy_segments(op.attrs)
    dst, src = args[0], args[1 + dst_indices]
    dst_at = list(args[1:1 + dst_indices])
    src_at = list(args[2 + dst_indices:2 + dst_indices + src_indices])
    count = attrs_int(op.attrs, "dstElements")
    present = args[-1] if elements else count
    if not dst.buf.shared or src.buf.shared:
        raise SimError("line %d: cp.async copies from global to shared memory" % op.line)
    if count * dst.element_bytes not in (4, 8, 16) or not 0 <= present <= count:
        raise SimError("line %d: cp.async of %d elements, %d read" % (op.line, count, present))
    for memref, at, n in ((dst, dst_at, count), (src, src_at, present)):
        if n == 0:
            continue
        if memref.strides[-1] != 1 or not 0 <= at[-1] <= memref.sizes[-1] - n:
            raise SimError("line %d: cp.async of %d at %s runs out of %s (%s)" %
                           (op.line, n, at, memref.sizes, memref.buf.name))
    base = dst.address(dst_at, op)
    if (base * dst.element_bytes) % (count * dst.element_bytes) != 0:
        raise SimError("line %d: cp.async destination at element %d is not %d-byte aligned" %
                       (op.line, base, count * dst.element_bytes))
    inflight = getattr(dst.buf, "inflight", None)
    if inflight and any(inflight.get(a) for a in range(base, base + count)):
        # (the copy may land any time from now on)
        raise SimError("line %d: a cp.async into %s at element %d, which a wgmma not yet waited for reads" %
                       (op.line, dst.buf.name, base))
    values = [0.0] * count
    if present:
        source = src.address(src_at, op)
        if (source * src.element_bytes) % (count * src.element_bytes) != 0:
            raise SimError("line %d: cp.async source at element %d is not %d-byte aligned" %
                           (op.line, source, count * src.element_bytes))
        access_range(thread, src, source, present, op, "read")
        values[:present] = src.buf.data[source:source + present]
    thread.pending.append((dst, base, values, op))
    return "token"


def async_wait(op, thread):
    """nvgpu.device_async_wait (cp.async.wait_group N): the thread's oldest
    committed groups complete until at most N are pending."""
    keep = attrs_int(op.attrs, "numGroups")
    keep = 0 if keep is None else keep
    while len(thread.groups) > keep:
        for dst, base, values, copy in thread.groups.pop(0):
            access_range(thread, dst, base, len(values), copy, "write")
            dst.buf.data[base:base + len(values)] = values


def insert_value(struct, value, position):
    struct = list(struct)
    struct[position] = value
    return struct


def maximumf(a, b):
    if a == 0 and b == 0:  # +0 above -0
        return a if math.copysign(1.0, a) > 0 else b
    return a if a != a else (b if b != b else max(a, b))  # NaN propagates


def maxnumf(a, b):
    return b if a != a else (a if b != b else max(a, b))  # NaN loses


def minimumf(a, b):
    if a == 0 and b == 0:  # -0 below +0
        return a if math.copysign(1.0, a) < 0 else b
    return a if a != a else (b if b != b else min(a, b))  # NaN propagates


def minnumf(a, b):
    return b if a != a else (a if b != b else min(a, b))  # NaN loses


def exp(x):
    if x != x:
        return x  # NaN stays NaN
    return 0.0 if x < -700 else (math.inf if x > 700 else math.exp(x))


def exp2(x):
    if x != x:
        return x
    return 0.0 if x < -1100 else (math.inf if x > 1100 else 2.0**x)


def floorf(x):
    """math.floor of a float: NaN and the infinities as they are."""
    return float(math.floor(x)) if math.isfinite(x) else x


def flush_subnormal(x):
    """An f32 below the smallest normal (2^-126) as ftz instructions take it: a zero of its sign."""
    return math.copysign(0.0, x) if x == x and abs(x) < 2.0**-126 else x


def memref_load(thread, op, memref, indices):
    a = memref.address(indices, op)
    access(thread, memref, a, op, "read")
    return memref.buf.data[a]


def memref_store(thread, op, value, memref, indices):
    a = memref.address(indices, op)
    access(thread, memref, a, op, "write")
    memref.buf.data[a] = value


def vector_access(thread, op, memref, indices, value, width):
    """vector.load (value None: returns the elements) or vector.store."""
    name = op.name
    last = memref.sizes[-1]
    if not 0 <= indices[-1] <= last - width:
        raise SimError("line %d (%s): vector of %d at %s runs out of %s (%s)" %
                       (op.line, name, width, indices, memref.sizes, memref.buf.name))
    base = memref.address(indices, op)
    check_alignment(op, memref, base)
    if memref.strides[-1] != 1:
        raise SimError("line %d: %s along a dimension of stride %d" % (op.line, name, memref.strides[-1]))
    if has_i1_vector(op.signature):
        return bit_packed_access(thread, memref, base, width, value, op)
    # The accesses are checked first, then made: a race stops the run either way.
    if value is not None:
        access_range(thread, memref, base, width, op, "write")
        memref.buf.data[base:base + width] = [value[j] for j in range(width)]
        return None
    access_range(thread, memref, base, width, op, "read")
    return memref.buf.data[base:base + width]


# Buffers whose address a kernel took (memref.extract_aligned_pointer_as_index):
# its bytes stand at its identity times 2^40, so an address tells which
# buffer it falls in. ADDRESSED holds each one's extent in bytes and name.
# Per block, the 128-byte lines a prefetch brought and the lines the block
# then loaded from those buffers: a block must prefetch every line it loads
# from a buffer it prefetches from (checked when the block ends).
ADDRESSED = {}
ADDRESS_BITS = 40
LINE_BYTES = 128
block_lines = {"prefetched": {}, "loaded": {}}
stats_prefetches = [0]


def buffer_address(memref):
    ADDRESSED[memref.buf.id] = (len(memref.buf.data) * memref.element_bytes, memref.buf.name)
    block_lines["prefetched"].setdefault(memref.buf.id, set())
    return memref.buf.id << ADDRESS_BITS


def check_prefetch(op, address):
    """nvvm.prefetch changes nothing a kernel sees; its address must lie in a buffer."""
    owner = address >> ADDRESS_BITS
    byte = address - (owner << ADDRESS_BITS)
    if owner not in ADDRESSED or not 0 <= byte < ADDRESSED[owner][0]:
        where = ADDRESSED[owner][1] if owner in ADDRESSED else "no buffer"
        raise SimError("line %d: a prefetch at byte %d of %s, outside its bytes" % (op.line, byte, where))
    block_lines["prefetched"][owner].add(byte // LINE_BYTES)
    stats_prefetches[0] += 1


def note_loaded(memref, base, width):
    if memref.buf.id in block_lines["prefetched"]:
        lines = block_lines["loaded"].setdefault(memref.buf.id, set())
        size = memref.element_bytes
        lines.update(range(base * size // LINE_BYTES, ((base + width) * size - 1) // LINE_BYTES + 1))


def check_block_prefetches(block_id):
    for owner, loaded in block_lines["loaded"].items():
        missed = loaded - block_lines["prefetched"][owner]
        if missed:
            raise SimError("block %s loads %d lines of %s that it did not prefetch (line %d first)" %
                           (block_id, len(missed), ADDRESSED[owner][1], min(missed)))
    block_lines["prefetched"], block_lines["loaded"] = {}, {}


def execute(op, args, thread):
    name = op.name
    if name == "memref.extract_aligned_pointer_as_index":
        if isinstance(args[0], DynamicShared):
            return DYNAMIC_SHARED_BASE
        return buffer_address(args[0])
    if name in ("nvvm.fence.proxy", "nvvm.wgmma.fence.aligned"):
        return None  # the simulator's shared memory has one proxy
    if name == "llvm.inttoptr":
        return args[0]
    if name == "nvvm.prefetch":
        check_prefetch(op, args[0])
        return None
    if name == "llvm.fence":
        if 'syncscope = "device"' not in op.attrs and "syncscope" in op.attrs:
            raise SimError("line %d: only GPU-scope and system fences are simulated" % op.line)
        if thread is not None and not isinstance(thread, Indices):
            thread.global_log.fence(thread.key)
        return None
    if name == "nvvm.griddepcontrol":  # every launch here runs after the one before it
        if "wait" in op.attrs:
            thread.before_wait = False
        return None
    if name == "nvgpu.device_async_copy":
        return async_copy(op, args, thread)
    if name == "nvgpu.device_async_create_group":
        thread.groups.append(thread.pending)
        thread.pending = []
        return "token"
    if name == "nvgpu.device_async_wait":
        async_wait(op, thread)
        return None
    if name == "nvvm.convert.float.to.tf32":
        return Tf32(args[0])
    if name == "llvm.bitcast":
        # Two 16-bit values as one 32-bit register (an mma operand): kept as a pair.
        if op.result_type == "i32" and isinstance(args[0], list) and len(args[0]) == 2:
            return tuple(args[0])
        raise SimError("line %d: the simulator knows llvm.bitcast of two 16-bit values to i32 only" % op.line)
    if name == "llvm.extractvalue":
        return args[0][extract_position(op.attrs)]
    if name == "arith.constant":
        return constant_value(op)
    if name in ("arith.addi", "arith.addf"):
        return [x + y for x, y in zip(*args)] if isinstance(args[0], list) else args[0] + args[1]
    if name in ("arith.subi", "arith.subf"):
        return [x - y for x, y in zip(*args)] if isinstance(args[0], list) else args[0] - args[1]
    if name in ("arith.muli", "arith.mulf"):
        return [x * y for x, y in zip(*args)] if isinstance(args[0], list) else args[0] * args[1]
    if name == "arith.divf":
        return [x / y for x, y in zip(*args)] if isinstance(args[0], list) else args[0] / args[1]
    if name == "arith.maximumf":
        return maximumf(*args)
    if name == "arith.maxnumf":
        return maxnumf(*args)
    if name == "arith.bitcast":
        import struct
        if op.signature.startswith("(i") and op.signature.split(") -> ")[0][1:] == op.result_type:
            return args[0]  # integer to the same integer type
        if op.result_type == "i64":
            return struct.unpack("<Q", struct.pack("<d", args[0]))[0]
        if op.result_type == "f64":
            return struct.unpack("<d", struct.pack("<Q", args[0] & (2**64 - 1)))[0]
        if op.result_type == "i32":
            # f32 values are held in float64 here: the bits keep the value,
            # so that a bitcast back gives it exactly (as on the GPU).
            return FloatBits(struct.unpack("<I", struct.pack("<f", args[0]))[0], args[0])
        if op.result_type == "f32":
            if isinstance(args[0], FloatBits):
                return args[0].value
            return struct.unpack("<f", struct.pack("<I", args[0] & (2**32 - 1)))[0]
        raise SimError("line %d: bitcast to %s" % (op.line, op.result_type))
    if name == "arith.trunci":
        return args[0] & ((1 << int(op.result_type[1:])) - 1)
    if name == "arith.extui":
        return args[0]
    if name == "arith.shrui":
        return args[0] >> args[1]
    if name == "arith.shli":
        return (args[0] << args[1]) & (2**64 - 1)
    if name in ("arith.index_cast", "arith.index_castui", "arith.extsi"):
        return args[0]
    if name in ("arith.sitofp", "arith.uitofp", "arith.extf", "arith.truncf"):
        # Values are float64: widening and rounding to 16 bits leave them.
        if isinstance(args[0], list):
            return [float(v) for v in args[0]]
        return float(args[0])
    if name == "arith.cmpf":
        return CMPF[attr_int(op, "predicate")](args[0], args[1])
    if name == "arith.minimumf":
        return minimumf(*args)
    if name == "arith.minnumf":
        return minnumf(*args)
    if name == "math.rsqrt":
        return 1.0 / math.sqrt(args[0])
    if name == "math.sqrt":
        return math.sqrt(args[0])
    if name == "math.log":
        return math.log(args[0])
    if name == "math.absf":
        return abs(args[0])
    if name == "math.floor":
        return floorf(args[0])
    if name == "arith.negf":
        return -args[0]
    if name == "math.exp":
        return exp(args[0])
    if name == "math.exp2":
        return exp2(args[0])
    if name == "llvm.call_intrinsic":
        intrinsic = re.search(r'intrin = "([\w.]+)"', op.attrs).group(1)
        if intrinsic == "llvm.nvvm.ex2.approx.ftz.f32":
            return flush_subnormal(exp2(flush_subnormal(args[0])))
        raise SimError("line %d: the simulator does not know the intrinsic %s" % (op.line, intrinsic))
    if name == "memref.get_global":
        global_name = re.search(r"name = @([\w]+)", op.attrs).group(1)
        key = (op.scope, global_name)
        type_, values, constant = GLOBALS[key]
        sizes, strides, offset, element_bytes, _ = parse_memref(type_)
        if constant:
            buf = Buffer(len(values), "global")
            buf.data = list(values)
        else:  # one buffer for the whole run, kept from launch to launch
            buf = MUTABLE_GLOBALS.get(key)
            if buf is None:
                buf = Buffer(len(values), "global " + global_name)
                buf.data = list(values)
                buf.device = True
                MUTABLE_GLOBALS[key] = buf
        return MemRef(buf, offset, sizes, strides, element_bytes)
    if name == "affine.apply":
        # affine_map<(d0, ...)[s0, ...] -> (expr)>: the operands are the
        # dimensions, then the symbols.
        return eval(affine_apply_code(op.attrs), {"v": args})
    if name == "linalg.index":
        return thread.index[attr_int(op, "dim")]
    if name in ("arith.divui", "arith.divsi"):
        return args[0] // args[1]
    if name in ("arith.remui", "arith.remsi"):
        return args[0] % args[1]
    if name in ("arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui"):
        bits = operand_bits(op)
        wrap = as_signed if name.endswith("si") else as_unsigned
        a, b = wrap(args[0], bits), wrap(args[1], bits)
        return min(a, b) if "min" in name else max(a, b)
    if name == "arith.andi":
        return args[0] & args[1]
    if name == "arith.ori":
        return args[0] | args[1]
    if name == "arith.xori":
        return args[0] ^ args[1]
    if name == "arith.cmpi":
        predicate, bits = attr_int(op, "predicate"), operand_bits(op)
        wrap = as_signed if 2 <= predicate <= 5 else as_unsigned
        return CMP[predicate](wrap(args[0], bits), wrap(args[1], bits))
    if name == "arith.select":
        return args[1] if args[0] else args[2]
    if name == "math.tanh":
        return math.tanh(args[0])
    if name == "vector.fma":
        return [a * b + c for a, b, c in zip(*args)]
    if name == "vector.from_elements":
        return list(args)
    if name == "vector.broadcast":
        return [args[0]] * vector_width(op.result_type)
    if name == "vector.extract":
        value = args[0]
        for i in static_positions(op.attrs):  # one index a dimension (of a vector<4x2x...>)
            value = value[i]
        return value
    if name == "vector.shuffle":
        both = list(args[0]) + list(args[1])
        return [both[i] for i in shuffle_mask(op.attrs)]
    if name == "vector.insert":
        v = list(args[1])
        v[position(op)] = args[0]
        return v
    if name == "memref.load":
        return memref_load(thread, op, args[0], args[1:])
    if name == "memref.store":
        memref_store(thread, op, args[0], args[1], args[2:])
        return None
    if name == "memref.atomic_rmw":
        kind = attr_int(op, "kind")  # arith::AtomicRMWKind
        if kind not in (0, 1, 3):
            raise SimError("line %d: only atomic addf, addi and assign are simulated" % op.line)
        memref = args[1]
        a = memref.address(args[2:], op)
        access(thread, memref, a, op, "add")
        old = memref.buf.data[a]
        memref.buf.data[a] = args[0] if kind == 3 else old + args[0]
        return old
    if name == "vector.load":
        return vector_access(thread, op, args[0], list(args[1:]), None, vector_width(op.result_type))
    if name == "vector.store":
        return vector_access(thread, op, args[1], list(args[2:]), args[0], len(args[0]))
    if name == "memref.transpose":
        src = args[0]
        m = re.search(r"affine_map<\(([^)]*)\) -> \(([^)]*)\)>", op.attrs)
        dims = [d.strip() for d in m.group(1).split(",")]
        order = [dims.index(d.strip()) for d in m.group(2).split(",")]
        return MemRef(src.buf, src.offset, [src.sizes[i] for i in order], [src.strides[i] for i in order],
                      src.element_bytes)
    if name == "memref.collapse_shape":
        # Each group of dimensions becomes one (a view of contiguous groups).
        src = args[0]
        groups = re.search(r"reassociation = \[(.*)\]\}", op.attrs).group(1)
        sizes, strides = [], []
        for group in re.findall(r"\[([\d, ]+)\]", groups):
            dims = [int(d) for d in group.split(",")]
            sizes.append(math.prod(src.sizes[d] for d in dims))
            strides.append(src.strides[dims[-1]])
        return MemRef(src.buf, src.offset, sizes, strides, src.element_bytes)
    if name == "memref.cast":
        return args[0]
    if name == "memref.expand_shape":
        src = args[0]
        shape = [int(d) for d in re.search(r"static_output_shape = array<i64: ([\d, ]+)>", op.attrs).group(1).split(",")]
        if re.search(r"reassociation = \[\]", op.attrs):  # a 0-d memref to unit dimensions
            return MemRef(src.buf, src.offset, shape, [1] * len(shape), src.element_bytes)
        groups = re.search(r"reassociation = \[(.*?)\]\]", op.attrs).group(1) + "]"
        sizes, strides = [], []
        for source_dim, group in enumerate(re.findall(r"\[([\d, ]+)\]", groups)):
            dims = [int(d) for d in group.split(",")]
            stride = src.strides[source_dim]
            inner = []
            for d in reversed(dims):
                inner.insert(0, stride)
                stride *= shape[d]
            sizes += [shape[d] for d in dims]
            strides += inner
        return MemRef(src.buf, src.offset, sizes, strides, src.element_bytes)
    if name == "memref.subview":
        src = args[0]
        def array(key):
            return [int(v) for v in re.search(key + r" = array<i64: ([-\d, ]+)>", op.attrs).group(1).split(",")]
        offsets, sizes, steps = array("static_offsets"), array("static_sizes"), array("static_strides")
        dynamic = iter(args[1:])  # dynamic offsets (only offsets), in order
        offsets = [next(dynamic) if o == -9223372036854775808 else o for o in offsets]
        offset = src.offset + sum(o * st for o, st in zip(offsets, src.strides))
        strides = [st * k for st, k in zip(src.strides, steps)]
        wanted = parse_memref(op.result_type)[0]
        if len(wanted) < len(sizes):  # a rank-reducing subview drops unit dimensions
            kept = []
            for size, stride in zip(sizes, strides):
                if len(kept) < len(wanted) and size == wanted[len(kept)]:
                    kept.append((size, stride))
            if [k[0] for k in kept] != wanted:
                raise SimError("line %d: cannot match a rank-reducing subview" % op.line)
            sizes, strides = [k[0] for k in kept], [k[1] for k in kept]
        return MemRef(src.buf, offset, sizes, strides, src.element_bytes)
    if name == "gpu.dynamic_shared_memory":
        # The block's dynamic shared memory (launch): its bytes, viewed
        # by memref.view below.
        return thread.dynamic_shared
    if name == "memref.view" and isinstance(args[0], DynamicShared):
        return args[0].view(op, args[1])
    if name == "gpu.thread_id":
        return thread.tid[gpu_dimension(op.attrs)]
    if name == "gpu.block_id":
        return thread.bid[gpu_dimension(op.attrs)]
    raise SimError("line %d: the simulator does not know %s" % (op.line, name))


@functools.lru_cache(maxsize=None)
def extract_position(attrs):
    return int(re.search(r"position = array<i64: (\d+)>", attrs).group(1))


@functools.lru_cache(maxsize=None)
def affine_apply_code(attrs):
    """affine.apply's map compiled to Python over v, its operands."""
    return compile(affine_apply_expression(attrs, None), "<affine.apply>", "eval")


@functools.lru_cache(maxsize=None)
def affine_apply_expression(attrs, operands):
    """affine.apply's map as Python over `operands` (their names), or over
    v, the list of them, where None."""
    m = re.search(r"affine_map<\(([^)]*)\)(?:\[([^\]]*)\])? -> \(([^>]*)\)>", attrs)
    names = [d.strip() for d in m.group(1).split(",") if d.strip()]
    names += [d.strip() for d in (m.group(2) or "").split(",") if d.strip()]
    def operand(v):
        at = names.index(v.group(1))
        return "v[%d]" % at if operands is None else operands[at]
    expr = re.sub(r"\b([ds]\d+)\b", operand, m.group(3))
    return expr.replace("floordiv", "//").replace(" mod ", " % ").replace("ceildiv", "//")


@functools.lru_cache(maxsize=None)
def shuffle_mask(attrs):
    return tuple(int(i) for i in re.search(r"mask = array<i64: ([\d, ]+)>", attrs).group(1).split(","))


@functools.lru_cache(maxsize=None)
def has_i1_vector(signature):
    return re.search(r"vector<\d+xi1>", signature) is not None


@functools.lru_cache(maxsize=None)
def gpu_dimension(attrs):
    return "xyz".index(re.search(r"dim (\w)", attrs).group(1))


# ----------------------------------------------------------------------------
# Kernels compiled to Python.
# ----------------------------------------------------------------------------

# A kernel runs for every thread of every block, its loops many times over:
# rather than dispatch each op on its name and keep values in a dict, each
# gpu.func is translated once into the source of a Python generator, its SSA
# values local variables, scf.for and scf.if Python loops and branches. The
# common ops become Python expressions of what `execute` computes for them;
# the others call `execute` itself. The generator yields as the interpreter
# did: at a gpu.barrier the op, at a warp-wide op (gpu.shuffle, mma,
# ldmatrix) what the launcher needs to answer it.

BINARY = {"arith.addi": "+", "arith.addf": "+", "arith.subi": "-", "arith.subf": "-", "arith.muli": "*",
          "arith.mulf": "*", "arith.divf": "/"}
INTEGER_BINARY = {"arith.divui": "//", "arith.divsi": "//", "arith.remui": "%", "arith.remsi": "%",
                  "arith.andi": "&", "arith.ori": "|", "arith.xori": "^", "arith.shrui": ">>"}
SAME_VALUE = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "memref.cast")
CALLS = {"arith.maximumf": "maximumf", "arith.maxnumf": "maxnumf", "arith.minimumf": "minimumf",
         "arith.minnumf": "minnumf", "math.exp": "exp", "math.exp2": "exp2", "math.sqrt": "math.sqrt",
         "math.log": "math.log", "math.absf": "abs", "math.tanh": "math.tanh", "math.floor": "floorf"}


class KernelCompiler:
    def __init__(self):
        self.names = {}  # SSA name -> Python local
        self.locals = 0  # the locals named so far: v0, v1, ...
        self.free = []  # locals whose values are dead, for the next values
        self.namespace = {"execute": execute, "SimError": SimError, "math": math, "maximumf": maximumf,
                          "maxnumf": maxnumf, "minimumf": minimumf, "minnumf": minnumf, "exp": exp, "exp2": exp2, "floorf": floorf,
                          "memref_load": memref_load, "memref_store": memref_store,
                          "vector_access": vector_access, "MemRef": MemRef, "insert_value": insert_value}
        self.lines = []
        self.loops = 0

    def var(self, name):
        local = self.names.get(name)
        if local is None:
            if self.free:
                local = self.free.pop()
            else:
                local = "v%d" % self.locals
                self.locals += 1
            self.names[name] = local
        return local

    def constant(self, value):
        key = "K%d" % len(self.namespace)
        self.namespace[key] = value
        return key

    def emit(self, depth, line):
        self.lines.append("    " * depth + line)

    def compile(self, kernel):
        body = kernel.regions[0][0]
        self.emit(0, "def kernel(thread, env):")
        self.emit(1, "if thread is None:")  # a generator, even without a barrier
        self.emit(2, "yield")
        for name, _ in body.args:
            self.emit(1, "%s = env[%r]" % (self.var(name), name))
        self.block(body, 1, None)
        source = "\n".join(self.lines) + "\n"
        exec(compile(source, "<kernel %s>" % kernel.line, "exec"), self.namespace)
        return self.namespace["kernel"]

    def compile_body(self, body):
        """A linalg body: values from outside it are read from `outer`."""
        self.emit(0, "def body(thread, outer, values):")
        defined = set()
        for k, (name, _) in enumerate(body.args):
            self.emit(1, "%s = values[%d]" % (self.var(name), k))
            defined.add(name)
        for op in body.ops:
            for name in op.operands:
                if name not in defined:
                    self.emit(1, "%s = outer[%r]" % (self.var(name), name))
                    defined.add(name)
            defined.update(op.results)
        for op in body.ops:
            if op.name == "linalg.yield":
                self.emit(1, "return [%s]" % ", ".join(self.var(o) for o in op.operands))
                break
            self.op(op, 1, None)
        source = "\n".join(self.lines) + "\n"
        exec(compile(source, "<linalg body>", "exec"), self.namespace)
        return self.namespace["body"]

    def block(self, block, depth, targets):
        """Emits a block's ops; its scf.yield assigns `targets`. A value
        the block defines gives its local to later values after its last
        use (within the block, or inside a region of an op of it): a
        kernel's frame stays small. Each thread's generator starts as a
        copy of it, and CPython allocates, and frees, a chunk of its frame
        stack for every frame over 16 KiB: a millisecond or so a thread."""
        start = len(self.lines)
        defined = {name: -1 for name, _ in block.args if name in self.names}
        last = {}
        for k, op in enumerate(block.ops):
            for name in used_values(op):
                if name in defined:
                    last[name] = k
            for name in op.results:
                defined[name] = k
        dying = {}
        for name, k in defined.items():
            dying.setdefault(last.get(name, max(k, 0)), []).append(name)
        for name in dying.pop(-1, []):
            self.release(name)
        for k, op in enumerate(block.ops):
            self.op(op, depth, targets)
            for name in dying.get(k, []):
                self.release(name)
        if len(self.lines) == start:
            self.emit(depth, "pass")

    def release(self, name):
        local = self.names.pop(name, None)
        if local is not None:
            self.free.append(local)

    def op(self, op, depth, targets):
        name = op.name
        args = [self.var(o) for o in op.operands]
        results = [self.var(r) for r in op.results]
        if name == "scf.for":
            n = self.loops
            self.loops += 1
            body = op.regions[0][0]
            carried = ["c%d_%d" % (n, k) for k in range(len(args) - 3)]
            self.emit(depth, "i%d, upper%d, step%d = %s, %s, %s" % (n, n, n, args[0], args[1], args[2]))
            for c, a in zip(carried, args[3:]):
                self.emit(depth, "%s = %s" % (c, a))
            self.emit(depth, "while i%d < upper%d:" % (n, n))
            self.emit(depth + 1, "%s = i%d" % (self.var(body.args[0][0]), n))
            for (arg, _), c in zip(body.args[1:], carried):
                self.emit(depth + 1, "%s = %s" % (self.var(arg), c))
            self.block(body, depth + 1, carried)
            self.emit(depth + 1, "i%d += step%d" % (n, n))
            for r, c in zip(results, carried):
                self.emit(depth, "%s = %s" % (r, c))
            return
        if name == "scf.if":
            self.emit(depth, "if %s:" % args[0])
            self.block(op.regions[0][0], depth + 1, results)
            if len(op.regions) > 1 and op.regions[1]:
                self.emit(depth, "else:")
                self.block(op.regions[1][0], depth + 1, results)
            return
        if name == "scf.yield":
            for t, a in zip(targets or [], args):
                self.emit(depth, "%s = %s" % (t, a))
            return
        if name in ("gpu.return", "func.return"):
            if name == "gpu.return":
                self.emit(depth, "if thread.pending or thread.groups:")
                self.emit(depth + 1, "raise SimError(%r)" %
                          ("line %d: cp.async copies never waited for at the kernel's end" % op.line))
            self.emit(depth, "return")
            return
        K = self.constant(op)
        if name == "gpu.barrier":
            self.emit(depth, "yield %s" % K)
            return
        if name == "gpu.shuffle":
            self.emit(depth, "%s = yield (%s, %s, %s, %s, %s)" % (results[0], K, K, args[0], args[1], args[2]))
            if len(results) > 1:
                self.emit(depth, "%s = True" % results[1])
            return
        if name == "nvvm.mma.sync":
            self.emit(depth, "%s = yield (%s, 'mma', [%s])" % (results[0], K, ", ".join(args)))
            return
        if name == "nvvm.wgmma.mma_async":
            self.emit(depth, "%s = yield (%s, 'wgmma', [%s], thread)" % (results[0], K, ", ".join(args)))
            return
        if name in ("nvvm.wgmma.commit.group.sync.aligned", "nvvm.wgmma.wait.group.sync.aligned"):
            self.emit(depth, "yield (%s, 'wgmma', [], thread)" % K)
            return
        if name == "nvgpu.ldmatrix":
            self.emit(depth, "%s = yield (%s, 'ldmatrix', [%s], thread)" % (results[0], K, ", ".join(args)))
            return
        if name == "memref.extract_strided_metadata":
            m = args[0]
            self.emit(depth, "m_ = %s" % m)
            values = ["MemRef(m_.buf, 0, [], [], m_.element_bytes)", "m_.offset"]
            values += ["m_.sizes[%d]" % k for k in range((len(results) - 2) // 2)]
            values += ["m_.strides[%d]" % k for k in range((len(results) - 2) // 2)]
            for r, value in zip(results, values):
                self.emit(depth, "%s = %s" % (r, value))
            return
        try:
            expression = self.expression(op, args)
        except Exception:  # what cannot be read now fails, as before, when it runs
            expression = None
        if expression is None:
            expression = "execute(%s, [%s], thread)" % (K, ", ".join(args))
        if results:
            self.emit(depth, "%s = %s" % (results[0], expression))
        else:
            self.emit(depth, expression)

    def expression(self, op, args):
        """Python for what `execute` computes for this op, or None."""
        name = op.name
        vector = op.result_type.startswith("vector<")
        if name == "arith.constant":
            value = parsed_constant(op.attrs, op.result_type)
            if isinstance(value, list):
                return "list(%s)" % self.constant(value)
            if value.__class__ is int or (value.__class__ is float and math.isfinite(value)):
                return "(%r)" % value  # repr gives back the same number
            return self.constant(value)
        if name in BINARY:
            if vector:
                return "[x %s y for x, y in zip(%s, %s)]" % (BINARY[name], args[0], args[1])
            return "%s %s %s" % (args[0], BINARY[name], args[1])
        if name in INTEGER_BINARY and not vector:
            return "%s %s %s" % (args[0], INTEGER_BINARY[name], args[1])
        if name in SAME_VALUE:
            return args[0]
        if name in CALLS and not vector:
            return "%s(%s)" % (CALLS[name], ", ".join(args))
        if name == "arith.shli" and not vector:
            return "(%s << %s) & %d" % (args[0], args[1], 2**64 - 1)
        if name == "arith.trunci" and not vector:
            return "%s & %d" % (args[0], (1 << int(op.result_type[1:])) - 1)
        if name in ("arith.sitofp", "arith.uitofp", "arith.extf", "arith.truncf"):
            return "[float(v) for v in %s] if isinstance(%s, list) else float(%s)" % (args[0], args[0], args[0])
        if name == "arith.negf" and not vector:
            return "-%s" % args[0]
        if name == "math.rsqrt" and not vector:
            return "1.0 / math.sqrt(%s)" % args[0]
        if name == "arith.cmpf" and not vector:
            return "%s(%s, %s)" % (self.constant(CMPF[attr_int(op, "predicate")]), args[0], args[1])
        if name == "arith.cmpi" and not vector:
            predicate, bits = attr_int(op, "predicate"), operand_bits(op)
            wrap = self.constant(as_signed if 2 <= predicate <= 5 else as_unsigned)
            general = "%s(%s(%s, %d), %s(%s, %d))" % (self.constant(CMP[predicate]), wrap, args[0], bits, wrap,
                                                      args[1], bits)
            # Integers from 0 below 2^(bits-1) read the same signed and unsigned: compared as they are.
            return "(%s %s %s) if %s else %s" % (args[0], CMP_OPERATOR[predicate], args[1],
                                                 small_integers(args, bits), general)
        if name in ("arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui") and not vector:
            bits = operand_bits(op)
            wrap = self.constant(as_signed if name.endswith("si") else as_unsigned)
            which = "min" if "min" in name else "max"
            general = "%s(%s(%s, %d), %s(%s, %d))" % (which, wrap, args[0], bits, wrap, args[1], bits)
            return "%s(%s, %s) if %s else %s" % (which, args[0], args[1], small_integers(args, bits), general)
        if name == "arith.select":
            return "%s if %s else %s" % (args[1], args[0], args[2])
        if name == "vector.fma":
            return "[a * b + c for a, b, c in zip(%s, %s, %s)]" % tuple(args)
        if name == "vector.from_elements":
            return "[%s]" % ", ".join(args)
        if name == "vector.broadcast":
            return "[%s] * %d" % (args[0], vector_width(op.result_type))
        if name == "vector.extract" and len(args) == 1:
            return args[0] + "".join("[%d]" % i for i in static_positions(op.attrs))
        if name == "vector.insert" and len(args) == 2:
            return "%s(%s, %s, %d)" % (self.constant(vector_insert), args[0], args[1], position(op))
        if name == "vector.shuffle":
            return "%s(%s, %s, %r)" % (self.constant(vector_shuffle), args[0], args[1], shuffle_mask(op.attrs))
        if name == "memref.load":
            return "memref_load(thread, %s, %s, [%s])" % (self.constant(op), args[0], ", ".join(args[1:]))
        if name == "memref.store":
            return "memref_store(thread, %s, %s, %s, [%s])" % (self.constant(op), args[0], args[1],
                                                              ", ".join(args[2:]))
        if name == "vector.load":
            return "vector_access(thread, %s, %s, [%s], None, %d)" % (self.constant(op), args[0],
                                                                     ", ".join(args[1:]), vector_width(op.result_type))
        if name == "vector.store":
            return "vector_access(thread, %s, %s, [%s], %s, len(%s))" % (self.constant(op), args[1],
                                                                        ", ".join(args[2:]), args[0], args[0])
        if name == "affine.apply":
            return "(%s)" % affine_apply_expression(op.attrs, tuple(args))
        if name == "llvm.extractvalue":
            return "%s[%d]" % (args[0], extract_position(op.attrs))
        if name == "llvm.insertvalue":
            return "insert_value(%s, %s, %d)" % (args[0], args[1], extract_position(op.attrs))
        if name == "llvm.mlir.undef":
            return "[None] * %d" % op.result_type.count("f32")
        if name == "llvm.bitcast" and op.result_type == "i32":
            return "tuple(%s) if isinstance(%s, list) and len(%s) == 2 else execute(%s, [%s], thread)" % (
                args[0], args[0], args[0], self.constant(op), args[0])
        if name == "linalg.index":
            return "thread.index[%d]" % attr_int(op, "dim")
        if name == "gpu.thread_id":
            return "thread.tid[%d]" % gpu_dimension(op.attrs)
        if name == "gpu.block_id":
            return "thread.bid[%d]" % gpu_dimension(op.attrs)
        return None


CMP_OPERATOR = {0: "==", 1: "!=", 2: "<", 3: "<=", 4: ">", 5: ">=", 6: "<", 7: "<=", 8: ">", 9: ">="}


def used_values(op):
    """The values an op reads, in its regions too."""
    names = list(op.operands)
    for region in op.regions:
        for block in region:
            for inner in block.ops:
                names += used_values(inner)
    return names


def small_integers(names, bits):
    """Python that is true where the values of `names` are ints (not bools)
    from 0 below 2^(bits-1): as_signed and as_unsigned leave those as they are."""
    return " and ".join("%s.__class__ is int and 0 <= %s < %d" % (n, n, 1 << (bits - 1)) for n in names[:2])


def vector_insert(value, vector, at):
    v = list(vector)
    v[at] = value
    return v


def vector_shuffle(a, b, mask):
    both = list(a) + list(b)
    return [both[i] for i in mask]


@functools.lru_cache(maxsize=None)
def compiled_kernel(kernel):
    return KernelCompiler().compile(kernel)


@functools.lru_cache(maxsize=None)
def compiled_body(op):
    """A linalg op's body as a function of (Indices, the enclosing
    function's values, the body's arguments) that returns what it yields;
    None for a body without linalg.yield (run_body reports it)."""
    body = op.regions[0][0]
    if not any(inner.name == "linalg.yield" for inner in body.ops):
        return None
    return KernelCompiler().compile_body(body)


def kernel_waits(op):
    """Whether the kernel waits for the one before it (griddepcontrol.wait)."""
    for region in op.regions:
        for block in region:
            for inner in block.ops:
                if inner.name == "nvvm.griddepcontrol" and "wait" in inner.attrs:
                    return True
                if kernel_waits(inner):
                    return True
    return False


def launch(module_ops, op, args, stats):
    m = re.search(r"kernel = @([\w]+)::@([\w]+)", op.attrs)
    segments = [int(s) for s in re.search(r"operandSegmentSizes = array<i32: ([\d, ]+)>", op.attrs).group(1).split(",")]
    kernel = module_ops[(m.group(1), m.group(2))]
    start = segments[0]
    grid = args[start:start + 3]
    block = args[start + 3:start + 6]
    operands = args[-segments[11]:] if segments[11] else []
    dynamic_bytes = args[sum(segments[:10])] if segments[10] else 0
    body = kernel.regions[0][0]
    workgroup = body.args[len(operands):]
    waits = kernel_waits(kernel)
    global_log = GlobalLog()
    stats["launches"] += 1
    for bz in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                shared_log = SharedLog()
                dynamic_shared = DynamicShared(dynamic_bytes, (bx, by, bz))
                env = {}
                for (name, _), value in zip(body.args, operands):
                    env[name] = value
                for name, type_ in workgroup:
                    sizes, strides, offset, element_bytes, _ = parse_memref(type_)
                    buf = Buffer(math.prod(sizes), "shared " + name, shared=True)
                    # Shared memory starts uninitialised: NaN shows any read before a write.
                    buf.data = [float("nan")] * len(buf.data)
                    env[name] = MemRef(buf, 0, sizes, strides, element_bytes)
                threads = []
                for tz in range(block[2]):
                    for ty in range(block[1]):
                        for tx in range(block[0]):
                            t = Thread((tx, ty, tz), (bx, by, bz), shared_log, global_log, dynamic_shared, waits)
                            threads.append(compiled_kernel(kernel)(t, env))
                stats["threads"] += len(threads)
                run_threads(threads, (bx, by, bz), stats, shared_log, global_log)
                check_block_prefetches((bx, by, bz))


def run_threads(threads, block_id, stats, shared_log, global_log):
    """Runs a block's threads: each warp (32 consecutive threads) on its own
    up to a shuffle, which every live thread of the warp must reach together
    (it answers from the warp's lanes), or a barrier, which every thread of
    the block must reach together."""
    warps = [list(range(w, min(w + 32, len(threads)))) for w in range(0, len(threads), 32)]
    live = set(range(len(threads)))
    answers = [None] * len(threads)
    # Per warpgroup (4 warps): the shared elements its wgmma read since the
    # last commit, and its committed groups not yet retired by a wait.
    warpgroups = {}
    while live:
        at_barrier = {}
        parked = {}  # warps stopped at a warpgroup instruction, until all four are
        pending = list(range(len(warps)))
        while pending:
            for w in pending:
                park_warp(w, warps[w], threads, live, answers, at_barrier, parked)
            pending = resolve_warpgroups(warps, live, answers, parked, warpgroups)
            if not pending and parked:
                op = next(iter(parked.values()))[1][next(iter(parked.values()))[0][0]][0]
                raise SimError("line %d: not every warp of a warpgroup reaches the %s" % (op.line, op.name))
        if not live:
            break
        ops = set(id(op) for op in at_barrier.values())
        if len(at_barrier) != len(threads) or len(ops) != 1:
            raise SimError("block %s: threads stop at different barriers (or some finished)" % (block_id,))
        stats["barriers"] += 1
        shared_log.writer.clear()
        shared_log.readers.clear()
        global_log.barrier(block_id)
    for state in warpgroups.values():
        if state["open"] or state["groups"]:
            raise SimError("block %s: a wgmma never waited for (wgmma.wait_group 0)" % (block_id,))


def resolve_warpgroups(warps, live, answers, parked, warpgroups):
    """Runs the warpgroup instruction every warp of a warpgroup stopped at
    (wgmma.mma_async, commit_group, wait_group), for the first warpgroup
    whose warps all have; returns the warps to run on. One warpgroup at a
    time: it runs ahead of the others (to its next such instruction or
    barrier), as a warpgroup may on the GPU."""
    resumed = []
    for group in sorted(set(w // 4 for w in parked)):
        members = [w for w in range(4 * group, min(4 * group + 4, len(warps))) if any(t in live for t in warps[w])]
        if any(w not in parked for w in members):
            continue
        stops = {}
        for w in members:
            stops.update(parked[w][1])
        ts = sorted(stops)
        first = stops[ts[0]]
        if len(ts) != 128 or any(stops[t][0] is not first[0] for t in ts):
            raise SimError("line %d: not every thread of a warpgroup reaches the %s" % (first[0].line, first[0].name))
        op, thread = first[0], first[3]
        state = warpgroups.setdefault(group, {"open": [], "groups": []})
        results = [None] * len(ts)
        if op.name == "nvvm.wgmma.mma_async":
            results = warpgroup_wgmma(op, [stops[t][2] for t in ts], thread.dynamic_shared, state["open"])
        elif op.name == "nvvm.wgmma.commit.group.sync.aligned":
            for buf, index in state["open"]:
                if not hasattr(buf, "inflight"):
                    buf.inflight = {}
                buf.inflight[index] = buf.inflight.get(index, 0) + 1
            state["groups"].append(state["open"])
            state["open"] = []
        else:  # wait_group N: all but the newest N groups are done
            keep = int(re.search(r"group = (\d+)", op.attrs).group(1))
            while len(state["groups"]) > keep:
                for buf, index in state["groups"].pop(0):
                    buf.inflight[index] -= 1
        for t, result in zip(ts, results):
            answers[t] = result
        for w in members:
            del parked[w]
        resumed.extend(members)
        break
    return resumed


def park_warp(w, lanes, threads, live, answers, at_barrier, parked):
    """Runs one warp until a barrier, its end, or a warpgroup instruction
    (parked until its warpgroup's four warps reach it)."""
    running = [t for t in lanes if t in live]
    while running:
        stops = {}
        for t in running:
            try:
                stops[t] = threads[t].send(answers[t])
            except StopIteration:
                stops[t] = None
                live.discard(t)
        shuffles = [stops[t] for t in running if isinstance(stops[t], tuple)]
        if shuffles and shuffles[0][1] == "wgmma":
            parked[w] = (running, stops)
            break
        if shuffles and shuffles[0][1] in ("mma", "ldmatrix"):
            first = shuffles[0]
            if any(not isinstance(stops[t], tuple) or stops[t][0] is not first[0] for t in running) or \
                    len(running) != 32:
                raise SimError("line %d: not every lane of a warp reaches the %s" %
                               (first[0].line, first[0].name))
            if first[1] == "mma":
                results = warp_mma(first[0], [stops[t][2] for t in running])
            else:
                results = warp_ldmatrix(first[0], [(stops[t][2], stops[t][3]) for t in running])
            for t, result in zip(running, results):
                answers[t] = result
            continue
        if shuffles:
            first = shuffles[0]
            # gpu.shuffle xor: every thread of the warp at the same one.
            if any(not isinstance(stops[t], tuple) or stops[t][0] is not first[0] for t in running) or \
                    len(running) != len(lanes):
                raise SimError("line %d: not every thread of a warp reaches the shuffle" % first[0].line)
            for t in running:
                _, _, _, offset, width = stops[t]
                partner = (t % 32) ^ offset
                if partner >= width:
                    raise SimError("line %d: shuffle partner outside the width" % first[0].line)
                if t - t % 32 + partner >= len(threads):
                    raise SimError("line %d: shuffle partner beyond the block" % first[0].line)
                answers[t] = stops[t - t % 32 + partner][2]
            continue
        for t in running:
            answers[t] = None
            if stops[t] is not None:
                at_barrier[t] = stops[t]
        break


# Integer arguments (token ids, a position) are drawn from [0, this).
INTEGER_INPUT_LIMIT = 40
# Integer arguments given a value instead (--set NAME=VALUE), by mlpipe.name.
INTEGER_INPUTS = {}


def fill_random(buf, rng):
    # rng.uniform(-1.0, 1.0), as it computes it, without a call per element.
    draw = rng.random
    buf.data[:] = [-1.0 + 2.0 * draw() for _ in range(len(buf.data))]


def linalg_reference(op, args, outer=None):
    name = op.name
    if name == "linalg.fill":
        value, out = args[0], args[1]
        data = out.buf.data
        for a in flat_addresses(out.offset, out.sizes, out.strides):
            data[a] = value
        return
    if name == "linalg.transpose":
        source, target = args
        order = [int(d) for d in re.search(r"permutation = array<i64: ([\d, ]+)>", op.attrs).group(1).split(",")]
        if len(order) == len(target.sizes) == len(source.sizes) and \
                all(target.sizes[i] <= source.sizes[d] for i, d in enumerate(order)):  # every index in bounds
            copy_elements(source.offset, [source.strides[d] for d in order], source.buf.data, target)
            return
        for index in all_indices(target.sizes):
            source_index = [0] * len(index)
            for i, d in enumerate(order):
                source_index[d] = index[i]
            target.buf.data[target.address(index, op)] = source.buf.data[source.address(source_index, op)]
        return
    if name == "linalg.copy":
        source, target = args
        if source.sizes == target.sizes:
            copy_elements(source.offset, source.strides, source.buf.data, target)
            return
        for index in all_indices(target.sizes):
            target.buf.data[target.address(index, op)] = source.buf.data[source.address(index, op)]
        return
    if name == "linalg.generic":
        return generic_reference(op, args, outer or {})
    if name == "linalg.reduce":
        return reduce_reference(op, args, outer or {})
    if name not in ("linalg.matmul", "linalg.batch_matmul"):
        raise SimError("line %d: the simulator has no reference for %s" % (op.line, name))
    a, b, c = args
    depth = a.sizes[-1]
    # Along k, A's and B's elements lie a stride apart: the first of each is
    # checked against its view's bounds, and A's k stays inside A's. Should
    # k run past B's rows, every element is checked, to name the first out
    # of bounds. Sums run in k's order, as before.
    strided = depth > 0 and depth <= b.sizes[-2]
    a_step, b_step = a.strides[-1], b.strides[-2]
    # A's rows and B's columns taken once each, where C is neither.
    sliced = strided and a_step > 0 and b_step > 0 and c.buf is not a.buf and c.buf is not b.buf
    rows, columns = {}, {}
    c_data = c.buf.data
    for index, c_at in zip(all_indices(c.sizes), flat_addresses(c.offset, c.sizes, c.strides)):
        *batch, i, j = index
        total = c_data[c_at]
        if sliced:
            key = (*batch, i)
            a_row = rows.get(key)
            if a_row is None:
                a_at = a.address(batch + [i, 0], op)
                a_row = rows[key] = a.buf.data[a_at:a_at + (depth - 1) * a_step + 1:a_step]
            key = (*batch, j)
            b_column = columns.get(key)
            if b_column is None:
                b_at = b.address(batch + [0, j], op)
                b_column = columns[key] = b.buf.data[b_at:b_at + (depth - 1) * b_step + 1:b_step]
            if len(a_row) == depth == len(b_column):
                c_data[c_at] = dot(total, a_row, b_column)
                continue
        if strided:
            a_at = a.address(batch + [i, 0], op)
            b_at = b.address(batch + [0, j], op)
            a_data, b_data = a.buf.data, b.buf.data
            for k in range(depth):
                total += a_data[a_at + k * a_step] * b_data[b_at + k * b_step]
        else:
            for k in range(depth):
                total += a.buf.data[a.address(batch + [i, k], op)] * b.buf.data[b.address(batch + [k, j], op)]
        c_data[c_at] = total


if sys.version_info < (3, 12):
    def dot(total, xs, ys):
        """total + xs[0] ys[0] + xs[1] ys[1] + ..., added in order (as sum
        adds floats before Python 3.12; later ones compensate)."""
        return sum(map(operator.mul, xs, ys), total)
else:
    def dot(total, xs, ys):
        for x, y in zip(xs, ys):
            total += x * y
        return total


class Indices:
    """What linalg.index reads inside a body."""
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def affine_python(expr):
    """One result of an affine map as Python over dims."""
    expr = re.sub(r"\bd(\d+)\b", lambda m: "dims[%s]" % m.group(1), expr)
    return expr.replace("floordiv", "//").replace(" mod ", " % ").replace("ceildiv", "//")


@functools.lru_cache(maxsize=None)
def affine_map_code(results):
    """All the results of an affine map (a tuple of them) compiled to one
    Python list over dims: one eval an element, not one a result."""
    return compile("[%s]" % ", ".join("(%s)" % affine_python(e) for e in results), "<affine_map>", "eval")


def parse_maps(op):
    maps = []
    for m in re.finditer(r"affine_map<\(([^)]*)\) -> \(([^>]*)\)>", op.attrs):
        maps.append(split_top(m.group(2)))
    return maps


def run_body(op, values, index, outer):
    compiled = compiled_body(op)
    if compiled is not None:
        return compiled(Indices(index), outer, values)
    body = op.regions[0][0]
    env = dict(outer)
    env.update({name: value for (name, _), value in zip(body.args, values)})
    thread = Indices(index)
    for inner in body.ops:
        args = [env[o] for o in inner.operands]
        if inner.name == "linalg.yield":
            return args
        result = execute(inner, args, thread)
        if inner.results:
            env[inner.results[0]] = result
    raise SimError("line %d: a body without linalg.yield" % op.line)


def generic_reference(op, args, outer):
    maps = parse_maps(op)
    iterators = re.findall(r"#linalg.iterator_type<(\w+)>", op.attrs)
    loops = len(iterators)
    sizes = [None] * loops
    for memref, results in zip(args, maps):
        for d, expr in enumerate(results):
            m = re.fullmatch(r"d(\d+)", expr.strip())
            if m and sizes[int(m.group(1))] is None:
                sizes[int(m.group(1))] = memref.sizes[d]
    outputs = int(re.search(r"operandSegmentSizes = array<i32: (\d+), (\d+)>", op.attrs).group(2))
    inputs = len(args) - outputs
    columns = [projected_addresses(memref, results, sizes) if isinstance(memref, MemRef) else
               (itertools.repeat(None) if not results else None) for memref, results in zip(args, maps)]
    if len(maps) == len(args) and None not in columns and all(isinstance(m, MemRef) for m in args[inputs:]):
        # Every map a projection in bounds: the addresses of each operand, made at once.
        datas = [memref.buf.data if isinstance(memref, MemRef) else None for memref in args]
        for index, *at in zip(all_indices(sizes), *columns):
            values = [memref if data is None else data[a] for memref, data, a in zip(args, datas, at)]
            results = run_body(op, values, index, outer)
            for data, a, value in zip(datas[inputs:], at[inputs:], results):
                data[a] = value
        return
    codes = [affine_map_code(tuple(results)) for results in maps]
    for index in all_indices(sizes):
        at = [eval(code, {"dims": index}) for code in codes]
        values = [memref.buf.data[memref.address(i, op)] if isinstance(memref, MemRef) else memref
                  for memref, i in zip(args, at)]
        results = run_body(op, values, index, outer)
        for memref, i, value in zip(args[inputs:], at[inputs:], results):
            memref.buf.data[memref.address(i, op)] = value


def reduce_reference(op, args, outer):
    source, target = args
    dims = [int(d) for d in re.search(r"dimensions = array<i64: ([\d, ]+)>", op.attrs).group(1).split(",")]
    kept = [d for d in range(len(source.sizes)) if d not in dims]
    if len(kept) == len(target.sizes) and all(source.sizes[d] <= size for d, size in zip(kept, target.sizes)):
        # Every index in bounds: the addresses made at once.
        strides = [0] * len(source.sizes)
        for d, stride in zip(kept, target.strides):
            strides[d] = stride
        sources = flat_addresses(source.offset, source.sizes, source.strides)
        targets = flat_addresses(target.offset, source.sizes, strides)
        source_data, target_data = source.buf.data, target.buf.data
        for index, s, a in zip(all_indices(source.sizes), sources, targets):
            target_data[a] = run_body(op, [source_data[s], target_data[a]], index, outer)[0]
        return
    for index in all_indices(source.sizes):
        kept = [i for d, i in enumerate(index) if d not in dims]
        a = target.address(kept, op)
        target.buf.data[a] = run_body(op, [source.buf.data[source.address(index, op)], target.buf.data[a]], index, outer)[0]


def flat_addresses(offset, sizes, strides):
    """offset + index . strides for every index of `sizes`, in row-major
    order (the order of all_indices)."""
    addresses = [offset]
    for size, stride in zip(sizes, strides):
        steps = [i * stride for i in range(size)]
        addresses = [a + step for a in addresses for step in steps]
    return addresses


def copy_elements(offset, strides, data, target):
    """Copies into every element of `target` (in row-major order) the
    element of `data` at offset + index . strides."""
    target_data = target.buf.data
    for t, s in zip(flat_addresses(target.offset, target.sizes, target.strides),
                    flat_addresses(offset, target.sizes, strides)):
        target_data[t] = data[s]


def projected_addresses(memref, results, sizes):
    """The addresses of `memref` for every index of loops of `sizes`, where
    each of its map's `results` is one loop (dN) whose every index is in the
    memref's bounds; None otherwise."""
    if len(results) != len(memref.sizes) or None in sizes:
        return None
    strides = [0] * len(sizes)
    for r, expr in enumerate(results):
        m = re.fullmatch(r"d(\d+)", expr.strip())
        if not m or sizes[int(m.group(1))] > memref.sizes[r]:
            return None
        strides[int(m.group(1))] += memref.strides[r]
    return flat_addresses(memref.offset, sizes, strides)


def all_indices(sizes):
    """Every index of a shape, in row-major order, each a list."""
    return map(list, itertools.product(*[range(size) for size in sizes]))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def run_module(text, seed, epilogue, stats, entry=None):
    root = parse(text)
    module = root.ops[0]
    GLOBALS.clear()
    collect_globals(module.regions[0][0])
    functions = {re.search(r'sym_name = "([\w]+)"', op.attrs).group(1): op
                 for op in module.regions[0][0].ops if op.name == "func.func" and op.regions and op.regions[0]}
    # The entry: the one public function (fusion functions are private).
    entries = [f for f in functions.values() if 'sym_visibility = "private"' not in f.attrs]
    if entry is not None:  # one of several public functions, by name
        entries = [f for name, f in functions.items() if name == entry]
    kernels = {}
    for op in module.regions[0][0].ops:
        if op.name == "gpu.module":
            module_name = re.search(r'sym_name = "([\w]+)"', op.attrs).group(1)
            for inner in op.regions[0][0].ops:
                if inner.name == "gpu.func":
                    kernel_name = re.search(r'sym_name = "([\w]+)"', inner.attrs).group(1)
                    kernels[(module_name, kernel_name)] = inner
    if len(entries) != 1:
        raise SimError("expected one public host function, found %d (choose one with --function)" % len(entries))
    function = entries[0]
    body = function.regions[0][0]
    rng = random.Random(seed)
    env = {}
    buffers = []
    names = re.findall(r'mlpipe\.name = "([\w.]+)"', function.attrs)
    # Arguments of the same types and names as the other run's get its values, copied, not drawn again.
    key = (seed, tuple((type_, names[p] if p < len(names) else name) for p, (name, type_) in enumerate(body.args)))
    drawn_before = DRAWN.get(key)
    for position_, (name, type_) in enumerate(body.args):
        sizes, strides, offset, element_bytes, _ = parse_memref(type_)
        extent = offset + sum((s - 1) * st for s, st in zip(sizes, strides)) + 1
        label = names[position_] if position_ < len(names) else name
        buf = Buffer(extent, label)
        if drawn_before is not None:
            buf.data = list(drawn_before[position_])
        elif re.search(r"[x<]i1>", type_):
            # Predicates: a byte each in memory, 0 or 1.
            for i in range(len(buf.data)):
                buf.data[i] = rng.randrange(2)
        elif re.search(r"[x<]i(32|64)>", type_):
            # Token ids and positions: small integers, valid for any table.
            for i in range(len(buf.data)):
                drawn = rng.randrange(0, INTEGER_INPUT_LIMIT)
                given = INTEGER_INPUTS.get(label)
                buf.data[i] = drawn if given is None else given[i % len(given)]
        else:
            fill_random(buf, rng)
        # An outlined module's arguments are device memory.
        buf.device = "mlpipe.arena" in function.attrs
        buffers.append(buf)
        env[name] = MemRef(buf, offset, sizes, strides, element_bytes)
    if drawn_before is None:
        DRAWN[key] = [list(buf.data) for buf in buffers]
    run_host(body, env, functions, kernels, stats, epilogue, (body, names, env), "mlpipe.arena" in function.attrs)
    return buffers


# The arguments' values drawn by run_module, by seed and the arguments' types and names.
DRAWN = {}


def new_memref(type_, name):
    """A fresh buffer of a memref type, NaN everywhere: a read before a
    write shows."""
    sizes, strides, offset, element_bytes, _ = parse_memref(type_)
    buf = Buffer(math.prod(sizes), name)
    buf.data = [float("nan")] * len(buf.data)
    return MemRef(buf, offset, sizes, strides, element_bytes)


class DeviceHeap:
    """What host code allocates at run time (gpu.alloc) and frees
    (gpu.dealloc), by buffer: a double free, a free of what it did not
    allocate, and a leak at the end are errors, as the GPU runtime would
    report (or crash on) them."""

    def __init__(self):
        self.live = {}

    def allocate(self, memref, op):
        self.live[memref.buf.id] = op.line

    def free(self, memref, op):
        if memref.buf.id not in self.live:
            raise SimError("line %d (gpu.dealloc): frees %s, which is not a live run-time allocation" %
                           (op.line, memref.buf.name))
        del self.live[memref.buf.id]


def run_host(body, env, functions, kernels, stats, epilogue, entry, outlined=False):
    """Runs host code: launches, linalg ops as reference semantics, calls of
    (fusion) functions, views and constants; and the host's own control
    flow and memory: scf.while (a loop the host runs, its condition read
    back with gpu.memcpy), scf.if and scf.for (a dealloc helper's), gpu.alloc,
    gpu.dealloc, gpu.memcpy, memref.alloca and arena views."""
    heap = DeviceHeap()
    # Host code may not touch device memory once outline is done (its
    # buffer plan has run); a module between kernel-building passes still
    # reads scalars where a later pass moves the read into a kernel.
    run_host_block(body, env, functions, kernels, stats, epilogue, entry, heap, {}, outlined)
    if heap.live:
        raise SimError("%d run-time allocations were never freed (the first at line %d)" %
                       (len(heap.live), min(heap.live.values())))


def run_host_block(body, env, functions, kernels, stats, epilogue, entry, heap, views, host):
    """Runs one host block; returns its terminator's operands (for
    scf.condition, the condition first). `host`: the block is host code
    (not a fusion function run as the reference of the kernel it becomes),
    which may not load or store device memory."""
    def run(block, inner_env=None, inner_host=True):
        return run_host_block(block, env if inner_env is None else inner_env, functions, kernels, stats, epilogue,
                              entry, heap, views, host and inner_host)

    for op in body.ops:
        args = [env[o] for o in op.operands]
        name = op.name
        if name in ("func.return", "scf.yield", "scf.condition"):
            return args
        if name == "gpu.launch_func":
            launch(kernels, op, args, stats)
            if op.results:  # an asynchronous launch's token
                env[op.results[0]] = None
        elif name == "func.call":
            function = functions[re.search(r"callee = @([\w]+)", op.attrs).group(1)]
            callee = function.regions[0][0]
            inner = {arg: value for (arg, _), value in zip(callee.args, args)}
            returned = run(callee, inner, "mlpipe.fusion" not in function.attrs)
            for r, value in zip(op.results, returned):
                env[r] = value
        elif name in ("memref.alloc", "memref.alloca"):
            env[op.results[0]] = new_memref(op.result_type, op.results[0])
        elif name == "memref.dealloc":
            continue
        elif name == "llvm.intr.stacksave":  # host code gives back a trip's stack: nothing to model
            env[op.results[0]] = ("stack pointer", op.line)
        elif name == "llvm.intr.stackrestore":
            if not (isinstance(args[0], tuple) and args[0][0] == "stack pointer"):
                raise SimError("line %d: restores a stack pointer no stacksave gave" % op.line)
        elif name == "gpu.wait":
            if op.results:
                env[op.results[0]] = None
        elif host and name in ("memref.load", "memref.store") and args[0 if name == "memref.load" else 1].buf.device:
            raise SimError("line %d (%s): the host accesses device memory (%s)" %
                           (op.line, name, args[0 if name == "memref.load" else 1].buf.name))
        elif name == "gpu.alloc":
            memref = new_memref(op.result_type.split(",")[0].strip("( "), op.results[0])
            memref.buf.device = True
            heap.allocate(memref, op)
            env[op.results[0]] = memref
            if len(op.results) > 1:
                env[op.results[1]] = None
        elif name == "gpu.dealloc":
            heap.free([a for a in args if isinstance(a, MemRef)][0], op)
            if op.results:
                env[op.results[0]] = None
        elif name in ("gpu.memcpy", "memref.copy"):
            memrefs = [a for a in args if isinstance(a, MemRef)]
            target, source = (memrefs[0], memrefs[1]) if name == "gpu.memcpy" else (memrefs[1], memrefs[0])
            if target.sizes != source.sizes:
                raise SimError("line %d (%s): copies %s into %s" % (op.line, name, source.sizes, target.sizes))
            for index in all_indices(source.sizes):
                target.buf.data[target.address(index, op)] = source.buf.data[source.address(index, op)]
            if op.results:
                env[op.results[0]] = None
        elif name == "memref.view":
            # A temporary in the arena: one buffer per offset and type, so
            # temporaries the plan gives the same bytes (and type) share them.
            key = (args[0].buf.id, args[1], op.result_type)
            if key not in views:
                views[key] = new_memref(op.result_type, "arena view at %d" % args[1])
                views[key].buf.device = True
            env[op.results[0]] = views[key]
        elif name == "memref.extract_strided_metadata":
            m = args[0]
            base = MemRef(m.buf, 0, [], [], m.element_bytes)
            for r, value in zip(op.results, [base, m.offset] + list(m.sizes) + list(m.strides)):
                env[r] = value
        elif name == "memref.extract_aligned_pointer_as_index":
            env[op.results[0]] = args[0].buf.id  # a buffer's identity stands for its address
        elif name == "memref.dim":
            env[op.results[0]] = args[0].sizes[args[1]]
        elif name == "scf.while":
            before, after = op.regions[0][0], op.regions[1][0]
            carried = args
            while True:
                for (arg, _), value in zip(before.args, carried):
                    env[arg] = value
                condition = run(before)
                if not condition[0]:
                    break
                for (arg, _), value in zip(after.args, condition[1:]):
                    env[arg] = value
                carried = run(after)
            for r, value in zip(op.results, condition[1:]):
                env[r] = value
        elif name == "scf.if":
            region = op.regions[0] if args[0] else (op.regions[1] if len(op.regions) > 1 else [])
            values = run(region[0]) if region else []
            for r, value in zip(op.results, values):
                env[r] = value
        elif name == "scf.for":
            lower, upper, step = args[0], args[1], args[2]
            carried = args[3:]
            loop = op.regions[0][0]
            i = lower
            while i < upper:
                env[loop.args[0][0]] = i
                for (arg, _), value in zip(loop.args[1:], carried):
                    env[arg] = value
                carried = run(loop)
                i += step
            for r, value in zip(op.results, carried):
                env[r] = value
        elif name.startswith("linalg."):
            linalg_reference(op, args, env)
            if epilogue and name in ("linalg.matmul", "linalg.batch_matmul"):
                entry_body, names, entry_env = entry
                apply_test_epilogue(op, entry_env, entry_body, names, args[2])
        else:
            value = execute(op, args, None)
            if op.results:
                env[op.results[0]] = value
    return []


def apply_test_epilogue(op, env, body, names, c):
    """The pass's test-epilogue=bias-gelu-residual, on the reference."""
    by_name = {n: env[arg] for n, (arg, _) in zip(names, body.args)}
    bias, residual = by_name["bias"], by_name["residual"]
    for index in all_indices(c.sizes):
        a = c.address(index, op)
        x = c.buf.data[a] + bias.buf.data[bias.address([index[-1]], op)]
        c.buf.data[a] = gelu_tanh(x) + residual.buf.data[residual.address(index, op)]


def main():
    global INTEGER_INPUT_LIMIT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True, help="the module before the pass (generic form)")
    parser.add_argument("--actual", required=True, help="the module after the pass (generic form)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epilogue", default="", help="bias-gelu-residual: the pass's test epilogue")
    parser.add_argument("--rtol", type=float, default=1e-9)
    parser.add_argument("--function", help="the public function to run, where there are several")
    parser.add_argument("--integer-limit", type=int, default=INTEGER_INPUT_LIMIT,
                        help="integer arguments are drawn from [0, LIMIT) (indices into a small operand)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE[,VALUE...]",
                        help="an integer argument (by its mlpipe.name) given this value, not drawn; with "
                             "several, element i is given the (i mod count)-th")
    options = parser.parse_args()
    # Nearly everything a run allocates lives to its end, and what it frees
    # goes by reference counts: the cycle collector would only walk the
    # large buffers over and over.
    gc.disable()
    INTEGER_INPUT_LIMIT = options.integer_limit
    for setting in options.set:
        name, _, value = setting.partition("=")
        if not name or not re.fullmatch(r"-?\d+(,-?\d+)*", value):
            parser.error("--set takes NAME=INTEGER[,INTEGER...], not %r" % setting)
        INTEGER_INPUTS[name] = [int(v) for v in value.split(",")]
    try:
        stats = {"launches": 0, "threads": 0, "barriers": 0}
        with open(options.reference) as f:
            expected = run_module(f.read(), options.seed, options.epilogue,
                                  {"launches": 0, "threads": 0, "barriers": 0}, options.function)
        with open(options.actual) as f:
            actual = run_module(f.read(), options.seed, "", stats, options.function)
        check_reads_before_wait()
    except SimError as error:
        print("kernel_sim: error: %s" % error)
        return 1
    worst = 0.0
    for e, a in zip(expected, actual):
        if e.data == a.data:  # equal element by element (NaN only where both hold the same NaN object)
            continue
        scale = max([1.0] + [abs(v) for v in e.data if math.isfinite(v)])
        for i, (x, y) in enumerate(zip(e.data, a.data)):
            if x != x or y != y or math.isinf(x) or math.isinf(y):  # NaN matches NaN, infinities themselves
                if not (x != x and y != y or x == y):
                    print("kernel_sim: FAIL: %s[%d] is %r, expected %r" % (e.name, i, y, x))
                    return 1
                continue
            if not (abs(x - y) <= options.rtol * scale):
                print("kernel_sim: FAIL: %s[%d] is %r, expected %r" % (e.name, i, y, x))
                return 1
            worst = max(worst, abs(x - y) / scale)
    if reads_before_wait:
        print("kernel_sim: %d buffers read before a wait for the kernel before, none of them written by a launch" %
              len(reads_before_wait))
    if stats_prefetches[0]:
        print("kernel_sim: %d prefetches, each inside its buffer, every line a block loads from it prefetched by the "
              "block" % stats_prefetches[0])
    print("kernel_sim: PASS: %d launches, %d threads, %d barriers, max relative error %.1e" %
          (stats["launches"], stats["threads"], stats["barriers"], worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
