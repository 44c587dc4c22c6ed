"""Dependent-path latency of a SASS loop body, for the chain term of
``gpu_model.py`` (ESTIMATES: nothing here runs a GPU).

One warp issues its instructions in order, at most one per cycle; an
instruction waits until the registers and predicates it reads (and those
it overwrites) are ready, and makes its destinations ready ``LAT`` cycles
after it issues; a branch delays the next issue by ``LAT["bra"]``. The
latency of a loop iteration is the steady state of that in-order schedule
(the body run four times, registers carried from one iteration to the
next: loop-carried dependencies count), which is the critical path over
register dependencies where the path is longer than the body's issue, and
the body's issue where it is not. Stores produce no register: a store
waits for its data, nothing waits for the store (a later shared load after
a shared store is ordered by the load/store pipe, not by a register). A
warp waits for itself only; other warps' issue is the issue term's
business.

Global loads are classed by the array they read: the address is traced
back through its defining instructions to the constant-bank word it came
from (Numba's kernel ABI: each array argument is meminfo, parent, size,
itemsize, data, shape, strides, 8 bytes each, parameters from
``c[0x0][0x210]`` on sm_90; flags 1 byte). The arrays named in ``dram``
(the cost model's: float arrays an earlier launch wrote, such as the
forward's d, p and D read by the backward; at B = 4096 they are ~1 GB, far
beyond the 50 MB L2) are DRAM accesses; every other global load (the
tables every block reads; arrays this block wrote a moment before) is an
L2 hit. Without the kernel's argument list (the ``--old`` tree) every
global load is taken as an L2 hit.

Latencies (cycles at 1.98 GHz; Hopper where a Hopper figure was found):

* ``alu`` 4: FADD/FMUL/FFMA/FMNMX/FSEL/FSETP, IMAD/IADD3/LEA/LOP3/ISETP/SEL/
  SHF/MOV, PLOP3, uniform ops. Accel-Sim's H100 configuration
  (accel-sim/gpgpu-sim_distribution, configs/tested-cfgs/SM90_H100/
  gpgpusim.config: ``-ptx_opcode_latency_int 4,...``, ``_fp 4,...``;
  accel-sim/accel-sim-framework, gpu-simulator/configs/tested-cfgs/SM90_H100/
  trace.config: ``-trace_opcode_latency_initiation_int 4,2``, ``_sp 4,2``).
* ``dp`` 8: DADD/DMUL/DFMA (same files, ``_dp 8``).
* ``sfu`` 23: MUFU (same files, ``-ptx_opcode_latency_sfu 23``).
* ``conv`` 23: I2F/F2I/F2F/I2I and other conversions, SHFL, POPC/FLO:
  **assumed** equal to the SFU figure (no Hopper figure found).
* ``lds`` 29: shared loads and shared atomics (gpgpusim.config
  ``-gpgpu_smem_latency 29``).
* ``l1`` 41: local-memory loads (``-gpgpu_l1_latency 41``).
* ``l2`` 278: a global load that misses L1 and hits L2: L1 41 +
  ``-gpgpu_l2_rop_latency 237``.
* ``dram`` 472: a global load from DRAM: L2 278 + ``-dram_latency 194``.
* ``ldc`` 14: a constant-cache hit (LDC, ULDC): **assumed** from an RTX 3070
  measurement (mushihao/cuda, nv_study/README.md: "14 clks (constant cache
  hit)"); no Hopper figure found.
* ``s2r`` 20: special registers (S2R, S2UR, CS2R): **assumed**.
* ``bra`` 4: a branch, taken or not (trace.config: BRA on a unit of
  latency 4).

Not modelled: bank conflicts, L2 and DRAM latency rising under load (these
figures are for an idle memory system), the register-read ports, and the
dual-issue limits inside one warp; the in-order issue charges one cycle
per instruction.
"""

from __future__ import annotations

import re

LAT = {"alu": 4, "dp": 8, "sfu": 23, "conv": 23, "lds": 29, "l1": 41, "l2": 278, "dram": 472, "ldc": 14,
       "s2r": 20, "bra": 4}
PARAM_BASE = 0x210  # first kernel parameter in constant bank 0 on sm_90
#: words of Numba's kernel ABI per argument kind (flags: one byte)
_WORDS = {"f1": 7, "f2": 9, "w1": 7, "u1": 7, "i1": 7, "b1": 7}

_REG = re.compile(r"(?<![\w.])(U?R\d+|U?P\d)(\.64|\.128)?(?![\w])")
_NO_EFFECT = re.compile(r"^(BAR|WARPSYNC|BSSY|BSYNC|NOP|YIELD|DEPBAR|MEMBAR|ERRBAR|CCTL|EXIT|RET|CALL|WARPGROUP)")
_STORE = re.compile(r"^(STS|STG|ST|STL|RED|REDG)\b")


def _regs(text):
    """Registers named in an operand (pairs for ``.64``, quads for
    ``.128``); RZ, PT, URZ, UPT are constants and left out."""
    out = []
    for m in _REG.finditer(text):
        name, wide = m.group(1), m.group(2)
        out.append(name)
        if wide and name[0] in "RU" and not name.startswith("UP"):
            pre, num = re.match(r"(U?R)(\d+)", name).groups()
            out += [f"{pre}{int(num) + i}" for i in range(1, 2 if wide == ".64" else 4)]
    return out


def parse(text):
    """(opcode, destinations, sources, constant-bank offsets) of one SASS
    instruction's text."""
    guard = re.match(r"@!?(U?P\d|U?PT)\s+", text)
    srcs = [guard.group(1)] if guard and "T" not in guard.group(1) else []
    body = text[guard.end():] if guard else text
    op, _, rest = body.partition(" ")
    ops = [o.strip() for o in rest.split(",")] if rest.strip() else []
    consts = [int(m, 16) for m in re.findall(r"c\[0x0\]\[(0x[0-9a-f]+)\]", rest)]
    dests = []
    if ops and not _STORE.match(op) and not _NO_EFFECT.match(op) and not op.startswith("BRA"):
        first = ops[0]
        if re.fullmatch(r"U?P(\d|T)", first):  # ISETP P0, P1, ... / PLOP3: two predicate results
            n_dst = 2 if len(ops) > 1 and re.fullmatch(r"U?P(\d|T)", ops[1]) else 1
        elif "[" in first:
            n_dst = 0
        else:
            n_dst = 1
            while n_dst < len(ops) and re.fullmatch(r"U?P(\d|T)", ops[n_dst]):  # carry-outs: LEA R, P, ...
                n_dst += 1
        for o in ops[:n_dst]:
            regs = _regs(o)
            if regs and n_dst == 1 and re.search(r"\.(WIDE|64)\b|^D(ADD|MUL|FMA)|^LD\w*\.64", op) and len(regs) == 1:
                pre, num = re.match(r"(U?R)(\d+)", regs[0]).groups()
                regs.append(f"{pre}{int(num) + 1}")
            elif regs and re.search(r"\.128\b", op) and len(regs) == 1:
                pre, num = re.match(r"(U?R)(\d+)", regs[0]).groups()
                regs += [f"{pre}{int(num) + i}" for i in (1, 2, 3)]
            dests += regs
        ops = ops[n_dst:]
    for i, o in enumerate(ops):
        regs = _regs(o)
        if ".WIDE" in op and i == len(ops) - 1 and len(regs) == 1 and regs[0][0] in "RU" and "P" not in regs[0]:
            pre, num = re.match(r"(U?R)(\d+)", regs[0]).groups()
            regs.append(f"{pre}{int(num) + 1}")  # IMAD.WIDE's addend is a register pair
        srcs += regs
    return op, dests, srcs, consts


def param_map(args):
    """{constant-bank offset of an array's data pointer: (name, kind)} for
    a kernel's ``args`` ((name, kind) in order)."""
    out, off = {}, PARAM_BASE
    for name, kind in args:
        if kind == "bool":
            off += 1
            continue
        off = (off + 7) // 8 * 8
        out[off + 4 * 8] = (name, kind)
        off += 8 * _WORDS[kind]
    return out


def _array_of(parsed, j, params):
    """The argument whose data pointer the address of memory instruction
    ``j`` was computed from (its registers traced back through their
    defining instructions), or None."""
    text = parsed[j][4]
    addr = re.search(r"\[([^\]]*R\d+[^\]]*)\]\s*(,|$)", text)
    todo = [(r, j) for r in _regs(addr.group(1))] if addr else []
    seen = set()
    while todo:
        reg, at = todo.pop(0)
        if (reg, at) in seen or len(seen) > 64:
            continue
        seen.add((reg, at))
        d = next((i for i in range(at - 1, -1, -1) if reg in parsed[i][1]), None)
        if d is None:
            continue
        for off in parsed[d][3]:
            if off in params:
                return params[off]
        todo += [(r, d) for r in parsed[d][2]]
    return None


def classes(ins, args=None, dram=()):
    """Latency class of every instruction of a kernel's SASS ``ins``
    ([(address, text)]), with ``args`` the kernel's (name, kind) list (None:
    global loads are L2 hits) and ``dram`` the arrays it reads from DRAM."""
    parsed = [(*parse(t), t) for _, t in ins]
    params = param_map(args) if args else {}
    out = []
    for j, (op, dests, srcs, consts, text) in enumerate(parsed):
        if re.match(r"(LDG|LD\b|LD\.|ATOMG|ATOM\b|ATOM\.)", op):
            arr = _array_of(parsed, j, params) if params else None
            cls = "dram" if arr and arr[0] in dram else "l2"
        elif re.match(r"(LDS|ATOMS|LDSM)", op):
            cls = "lds"
        elif op.startswith("LDL"):
            cls = "l1"
        elif re.match(r"U?LDC", op):
            cls = "ldc"
        elif re.match(r"(S2R|S2UR|CS2R)", op):
            cls = "s2r"
        elif op.startswith("MUFU"):
            cls = "sfu"
        elif re.match(r"(I2F|F2I|F2F|I2I|FRND|SHFL|POPC|FLO|BREV)(\.|$)", op) and not re.match(r"(I2FP|F2FP)", op):
            cls = "conv"
        elif re.match(r"D(ADD|MUL|FMA|SETP|MNMX)", op):
            cls = "dp"
        elif op.startswith("BRA"):
            cls = "bra"
        else:
            cls = "alu"
        out.append((op, dests, srcs, cls))
    return out


def _run(cls, idxs, ready, t):
    """Issue ``idxs`` in order from cycle ``t`` (the last issue); returns
    the last issue cycle. ``ready``: register -> cycle it is ready."""
    for j in idxs:
        op, dests, srcs, c = cls[j]
        if _NO_EFFECT.match(op):
            continue
        at = max([t + 1] + [ready.get(r, 0) for r in srcs] + [ready.get(r, 0) for r in dests])
        for r in dests:
            ready[r] = at + LAT[c]
        t = at + (LAT["bra"] - 1 if c == "bra" else 0)
    return t


def loop_latency(cls, lo, hi, skip=(), runs=4):
    """Steady-state cycles per iteration of the loop body ``lo..hi``
    (instruction indices, inclusive), the ranges in ``skip`` (inner loops)
    left out."""
    idxs = [j for j in range(lo, hi + 1) if not any(a <= j <= b for a, b in skip)]
    ready, t, starts = {}, -1, []
    for _ in range(runs):
        starts.append(t)
        t = _run(cls, idxs, ready, t)
    return (starts[-1] - starts[1]) / (runs - 2)


def sweep_latency(cls, outer, inner, iters, barriers, skip=(), inner_skip=(), peeled=False):
    """Cycles of each layer of a sweep: the layer loop ``outer`` run once per
    layer, in order, its comparator loop ``inner`` ``iters[l]`` times (one
    fewer where the kernel ``peeled`` a layer's first comparator into a copy
    before the loop), then the layer's barrier (``barriers[l]`` cycles);
    registers carried throughout, from layer to layer too (a load issued
    at the end of one layer for the next is waited for where the next layer
    uses it). Index ranges inclusive; ``skip``: other loops inside
    ``outer``, ``inner_skip``: loops inside ``inner``."""
    def part(lo, hi, out=()):
        return [j for j in range(lo, hi + 1) if not any(a <= j <= b for a, b in (*skip, *out))]

    before, body = part(outer[0], inner[0] - 1), part(inner[0], inner[1], inner_skip)
    after = part(inner[1] + 1, outer[1])
    ready, t, out = {}, -1, []
    for it, bar in zip(iters, barriers):
        t0 = t
        t = _run(cls, before, ready, t)
        for _ in range(max(0, it - peeled)):
            t = _run(cls, body, ready, t)
        t = _run(cls, after, ready, t) + bar
        out.append(t - t0)
    return out
