"""A cuda layer's first call in a fresh process, without a GPU, for
tests/codegen/cuda/test_cuda_cubin.py.

``python _cuda_cubin_driver.py MODULE.py MAJOR.MINOR OUT.json [numba | device1 | nonumba]``

* numba-cuda's compile entry points (``compile_cuda``, ``compile_ptx``,
  ``Dispatcher.compile``, the code library's ``get_cubin``/``get_asm_str``,
  NVVM) raise ``AssertionError("numba-cuda compiled")``; with ``numba`` as
  the last argument ``Dispatcher.compile`` returns a fake compiled kernel
  instead (a fake PTX and ELF cubin for sm_86), so the save-at-first-use
  path runs;
* ``cuda.core``'s ``ObjectCode`` / ``launch`` / ``LaunchConfig`` /
  ``Stream`` and ``cuda.bindings.driver.cuKernelSetAttribute`` are fakes
  that record what they are given and enforce the driver's documented
  rules (CUDA driver API, cuFuncSetAttribute / cuLaunchKernel): every
  kernel holds STATIC bytes of static shared memory (16, as numba-cuda's
  kernels do; ``NETGEN_FAKE_STATIC`` sets another) on a device with OPTIN
  bytes of opt-in shared memory per block (``NETGEN_FAKE_OPTIN``); a
  request for MAX_DYNAMIC_SHARED_SIZE_BYTES above opt-in - static is
  refused with CUDA_ERROR_INVALID_VALUE; a launch may ask for at most the
  dynamic shared memory its kernel was allowed (min(48 KB, opt-in) - static
  without an opt-in), at most the kernel's max threads per block, and
  threads x registers <= 65,536; a refused launch raises, as the driver's
  would;
* torch.cuda says: one device (two with ``device1``) of compute
  capability MAJOR.MINOR with OPTIN bytes of opt-in shared memory and SMS
  multiprocessors (132, ``NETGEN_FAKE_SMS`` sets another), a
  current device (``torch.cuda.device`` switches it) and a current stream
  per device (a distinct raw handle each); the module's ``_require_cuda``
  accepts CPU tensors. Every launch records the current device and the
  stream it was given; the driver refuses a kernel's attributes or opt-in
  for a device that does not exist.

With ``nonumba``, importing numba or numba-cuda fails (and is recorded):
the cubins must serve the whole first call.

With ``device1``, after the first call on device 0, the layer is called
with tensors that say they are on ``cuda:1`` (CPU tensors under a torch
function mode that reports ``cuda:1`` and keeps data on the CPU: torch
here has no CUDA) while the current device is 0, in float32 and bfloat16;
what it launched, where, and the result dtypes go to ``device1`` in
OUT.json.

Then the layer's first forward + backward (values and P, values only, the
column, W P and P V) runs through the launcher, and ``_handle`` is asked for every
kernel. Writes what was loaded, asked for and launched to OUT.json."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import types

path, cc_arg, out = sys.argv[1], sys.argv[2], sys.argv[3]
ALLOW_NUMBA = sys.argv[4:] == ["numba"]
DEVICE1 = sys.argv[4:] == ["device1"]
NO_NUMBA = sys.argv[4:] == ["nonumba"]
DEVICES = 2 if DEVICE1 else 1
CURRENT = [0]  # the fake current device
STREAM_BASE = 0x7000  # device d's current stream: raw handle STREAM_BASE + d
CC = tuple(int(v) for v in cc_arg.split("."))
OPTIN = int(__import__("os").environ.get("NETGEN_FAKE_OPTIN", str(227 * 1024)))  # an H100's: 232,448 bytes
STATIC = int(__import__("os").environ.get("NETGEN_FAKE_STATIC", "16"))
SMS = int(__import__("os").environ.get("NETGEN_FAKE_SMS", "132"))  # multiprocessors: an H100 SXM's

import numpy as np  # noqa: E402
import torch  # noqa: E402

rec = {"from_cubin": [], "from_ptx": [], "get_kernel": [], "launch": [], "set_attribute": [], "compiled": [],
       "log": [], "errors": [], "refused": [], "attributes_of": [], "opt_in_devices": [],
       "numba_imports": [], "seconds": {}}
ALLOWED = {}  # kernel entry name -> dynamic shared memory the driver accepted for it


class _Log(logging.Handler):
    def emit(self, record):
        rec["log"].append(record.getMessage())


logging.getLogger("netgen").addHandler(_Log())
logging.getLogger("netgen").setLevel(logging.DEBUG)

# ---- numba-cuda may not compile anything (with ``nonumba``: may not even be imported)
class _NoNumba:
    """An import of numba or numba-cuda fails (``nonumba``)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in ("numba", "numba_cuda"):
            rec["numba_imports"].append(name)
            raise ImportError(f"{name}: a first call with cubins present imports no numba")
        return None


if NO_NUMBA:
    sys.meta_path.insert(0, _NoNumba)
else:
    import numba.cuda  # noqa: E402
    import numba.cuda.codegen as _codegen  # noqa: E402
    import numba.cuda.compiler as _compiler  # noqa: E402
    import numba.cuda.cudadrv.driver as _drvmod  # noqa: E402
    import numba.cuda.cudadrv.nvvm as _nvvm  # noqa: E402
    import numba.cuda.dispatcher as _dispatcher  # noqa: E402


    def _boom(*args, **kwargs):
        raise AssertionError("numba-cuda compiled")


    for _mod, _names in ((_compiler, ("compile_cuda", "compile_extra", "compile_ir", "compile", "compile_ptx",
                                      "compile_all", "compile_for_current_device", "compile_ptx_for_current_device")),
                         (numba.cuda, ("compile", "compile_ptx", "compile_for_current_device")),
                         (_nvvm, ("compile_ir",))):
        for _n in _names:
            if hasattr(_mod, _n):
                setattr(_mod, _n, _boom)
    _codegen.CUDACodeLibrary.get_cubin = _boom
    _codegen.CUDACodeLibrary.get_asm_str = _boom
    _codegen.CUDACodeLibrary.get_asm_strs = _boom
    _dispatcher.CUDADispatcher.compile_device = _boom


    def _fake_params(kinds):
        out = []
        for k in kinds:
            out += ["u8"] if k == "bool" else ["u64"] * (5 + 2 * int(k[1]))
        return out


    class _FakeLib:
        """What Dispatcher.compile's result carries: a PTX for sm_86 and its cubin."""

        _setup_functions: list = []

        def __init__(self, fn, params):
            self.entry = f"_ZN6cudapy{len(fn.__name__)}{fn.__name__}E_first_use"
            plist = ",\n".join(f"\t.param .{t} {fn.__name__}_param_{i}" for i, t in enumerate(params))
            self.ptx = (f".version 9.0\n.target sm_86\n.address_size 64\n\n"
                        f".visible .entry {self.entry}(\n{plist}\n)\n{{\n\tret;\n}}\n")

        def get_asm_str(self, cc=None):
            return self.ptx

        def get_cubin(self, cc=None):
            return types.SimpleNamespace(code=b"\x7fELF numba-linked cubin of " + self.entry.encode())

        def get_cufunc(self):
            attrs = types.SimpleNamespace(maxthreads=1024, regs=40, shared=STATIC)
            return types.SimpleNamespace(handle=self.entry, kernel=("numba kernel", self.entry), attrs=attrs,
                                         device=types.SimpleNamespace(id=0))


    def _compile(self, sig):
        if not ALLOW_NUMBA:
            _boom()
        rec["compiled"].append(self.py_func.__name__)
        return types.SimpleNamespace(_codelibrary=_FakeLib(self.py_func, _PARAMS[self.py_func.__name__]))


    _dispatcher.CUDADispatcher.compile = _compile


    class _FakeCudaAPIError(Exception):
        """numba-cuda's wrapper raises on a driver error."""


    def _numba_set_attribute(attr, value, handle, dev):
        rec["set_attribute"].append(("numba", value))
        if value + STATIC > OPTIN:
            rec["refused"].append(("numba", value))
            raise _FakeCudaAPIError("[1] Call to cuKernelSetAttribute results in CUDA_ERROR_INVALID_VALUE")
        ALLOWED[handle] = value


    _drvmod.driver = types.SimpleNamespace(cuKernelSetAttribute=_numba_set_attribute)
    numba.cuda.is_available = lambda: True  # numba-cuda sees the fake device

# ---- cuda.core and the driver binding: record, load nothing
import cuda.core  # noqa: E402
from cuda.bindings import driver as _cu  # noqa: E402


class _Attrs:
    max_threads_per_block = 768
    num_regs = 48
    shared_size_bytes = STATIC

    def __getitem__(self, device):
        if not 0 <= device < DEVICES:
            raise RuntimeError(f"CUDA_ERROR_INVALID_DEVICE: kernel attributes of device {device!r}")
        rec["attributes_of"].append(device)
        return self


class _Kernel:
    def __init__(self, code, entry):
        self.code, self.entry, self.handle, self.attributes = code, entry, ("kernel", entry), _Attrs()


class _ObjectCode:
    def __init__(self, kind, data, name):
        self.kind, self.data, self.name = kind, data, name

    @staticmethod
    def from_cubin(data, *, name="", symbol_mapping=None):
        rec["from_cubin"].append({"name": name, "sha": hashlib.sha256(bytes(data)).hexdigest()})
        return _ObjectCode("cubin", data, name)

    @staticmethod
    def from_ptx(data, *, name="", symbol_mapping=None):
        rec["from_ptx"].append({"name": name, "sha": hashlib.sha256(bytes(data)).hexdigest()})
        return _ObjectCode("ptx", data, name)

    def get_kernel(self, entry):
        rec["get_kernel"].append({"name": self.name, "entry": entry, "from": self.kind})
        return _Kernel(self, entry)


def _launch(stream, config, kernel, *words):
    threads, shmem = config["block"], config["shmem_size"]
    entry = kernel.entry if isinstance(kernel, _Kernel) else kernel[1]  # numba's: ("numba kernel", entry)
    allowed = ALLOWED.get(entry, min(48 * 1024, OPTIN) - STATIC)
    # the kernel's own limits: a loaded handle's _Attrs, numba-cuda's compiled kernel's attrs (1024, 40)
    most, regs = (_Attrs.max_threads_per_block, _Attrs.num_regs) if isinstance(kernel, _Kernel) else (1024, 40)
    if shmem > allowed or threads > most or threads * regs > 65536:
        rec["refused"].append({"launch": entry, "threads": threads, "shmem": shmem, "allowed": allowed})
        raise RuntimeError(f"CUDA_ERROR_INVALID_VALUE: launch of {threads} threads with {shmem} bytes of dynamic "
                           f"shared memory (allowed {allowed})")
    rec["launch"].append({"entry": kernel.entry if isinstance(kernel, _Kernel) else repr(kernel),
                          "from_cuda_core": isinstance(kernel, _Kernel), "words": len(words), "shmem": shmem,
                          "threads": threads, "grid": config["grid"], "device": CURRENT[0], "stream": stream})


def _set_attribute(attr, value, handle, dev):
    if not 0 <= dev < DEVICES:
        return (_cu.CUresult.CUDA_ERROR_INVALID_DEVICE,)
    rec["opt_in_devices"].append(dev)
    rec["set_attribute"].append((handle[1], value))
    if value + STATIC > OPTIN:  # the driver's rule: dynamic + static <= opt-in
        rec["refused"].append((handle[1], value))
        return (_cu.CUresult.CUDA_ERROR_INVALID_VALUE,)
    ALLOWED[handle[1]] = value
    return (_cu.CUresult.CUDA_SUCCESS,)


cuda.core.ObjectCode = _ObjectCode
cuda.core.launch = _launch
cuda.core.LaunchConfig = lambda **kw: kw
cuda.core.Stream = types.SimpleNamespace(from_handle=lambda h: ("stream", h))
_cu.cuKernelSetAttribute = _set_attribute

# ---- one fake device of compute capability CC
torch.cuda.get_device_capability = lambda device=None: CC
torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(shared_memory_per_block_optin=OPTIN,
                                                                             multi_processor_count=SMS)


def _device_index(device):
    index = CURRENT[0] if device is None else torch.device("cuda", device).index if isinstance(device, int) else (
        torch.device(device).index)
    index = CURRENT[0] if index is None else index
    if not 0 <= index < DEVICES:
        raise RuntimeError(f"CUDA error: invalid device ordinal {index}")
    return index


def _exchange_device(index):
    prev = CURRENT[0]
    if index >= 0:
        _device_index(index)
        CURRENT[0] = index
    return prev


torch.cuda.current_stream = lambda device=None: types.SimpleNamespace(
    device_index=_device_index(device), cuda_stream=STREAM_BASE + _device_index(device))
torch._C._cuda_getCurrentRawStream = lambda index: STREAM_BASE + _device_index(index)
torch.cuda.is_current_stream_capturing = lambda: False
torch.cuda.current_device = lambda: CURRENT[0]
torch.cuda.device_count = lambda: DEVICES
torch.cuda._exchange_device = _exchange_device
torch.cuda._maybe_exchange_device = _exchange_device

# ---- the module, imported as a user would (netgen.load, or from netgen's cache by name)
import importlib.util  # noqa: E402

import time  # noqa: E402

_t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
rec["seconds"]["module import"] = time.perf_counter() - _t0
mod._require_cuda = lambda x: None
if not NO_NUMBA:
    _PARAMS = {k.py_func.__name__: _fake_params(mod.KERNEL_ARGS[name]) for (_, name, _), k in mod.KERNELS.items()}

layer = mod.Layer()
torch.manual_seed(0)
for dt in (torch.float32, torch.float64):
    x = torch.randn(3, mod._N, dtype=dt, requires_grad=True)
    try:
        _t0 = time.perf_counter()
        v, P = layer(x)
        (v.sum() + P.sum()).backward()
        rec["seconds"].setdefault("first rows fwd+bwd", time.perf_counter() - _t0)
        layer.values(x).sum().backward()
        layer.column(x, torch.zeros(3, dtype=torch.int64)).sum().backward()
        # W P (one lane) and P V (two): the lane kernels (lane_ops.py), forward and backward
        W = torch.randn(3, 1, mod._K, dtype=dt, requires_grad=True)
        layer.back(x, W).sum().backward()
        V = torch.randn(mod._N, 2, dtype=dt, requires_grad=True)
        layer.fwd(x, V).sum().backward()
    except Exception as e:  # noqa: BLE001 - reported, the test decides
        rec["errors"].append(f"layer {dt}: {type(e).__name__}: {e}")
first_call_launches = len(rec["launch"])
for (dt, name, variant) in mod.KERNELS:
    try:
        mod._handle(0, dt, name, variant)
    except Exception as e:  # noqa: BLE001
        rec["errors"].append(f"_handle {name} {variant} {dt}: {type(e).__name__}: {e}")
rec["first_call_launches"] = first_call_launches
rec["numba_imported"] = sorted(m for m in sys.modules if m.split(".")[0] in ("numba", "numba_cuda"))


class _OnDevice(torch.Tensor):
    """A CPU tensor that says it is on cuda:1 (its data stays on the CPU)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def device(self):
        return torch.device("cuda", 1)

    @property
    def is_cuda(self):
        return True


def _cpu(d):
    return "cpu" if d is not None and torch.device(d).type == "cuda" else d


class _Device1(torch.overrides.TorchFunctionMode):
    """Every tensor made says it is on cuda:1; a request for a CUDA device
    makes a CPU tensor."""

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        if func in (torch.Tensor.to, torch.Tensor.new_empty, torch.Tensor.new_zeros, torch.Tensor.new_full):
            args = tuple(_cpu(a) if isinstance(a, (str, torch.device)) else a for a in args)
        out = func(*args, **kwargs)
        wrap = (lambda t: t.as_subclass(_OnDevice) if type(t) is torch.Tensor else t)
        if isinstance(out, tuple):
            return tuple(wrap(t) for t in out)
        return wrap(out)


if DEVICE1:
    dev1 = rec["device1"] = {"launch_from": len(rec["launch"]), "dtypes": {}}
    for dt in (torch.float32, torch.bfloat16):
        try:
            with _Device1():
                x = torch.randn(3, mod._N, dtype=dt).requires_grad_(True)
                assert x.device == torch.device("cuda", 1)
                v, P = layer(x)
                (v.float().sum() + P.float().sum()).backward()
                vo = layer.values(x)
                vo.float().sum().backward()
                col = layer.column(x, torch.zeros(3, dtype=torch.int64))
                col.float().sum().backward()
            dev1["dtypes"][str(dt)] = [str(t.dtype) for t in (v, P, vo, col, x.grad)]
        except Exception as e:  # noqa: BLE001 - reported, the test decides
            import traceback

            rec["errors"].append(f"device1 {dt}: {type(e).__name__}: {e} {traceback.format_exc()[-1500:]}")
    dev1["current_after"] = CURRENT[0]
rec["kernels"] = sorted({k.py_func.__name__ for k in mod.KERNELS.values()})
rec["maxthreads"] = sorted({str(v[:2]) for v in mod._LIMITS.values()})
rec["variants"] = {f"{k[0]} {k[1]}": v for k, v in mod._VARIANTS.items()}
with open(out, "w") as fh:
    json.dump(rec, fh)
print("ok", np.__version__)
