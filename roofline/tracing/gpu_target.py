"""A CUDA device for inductor's scheduler on a machine that has none.

``compile=True`` runs inductor's *GPU* scheduler (its triton fusion rules, split
reductions sized from the SM count) on a CPU-only build, stopping before triton codegen,
which is the only part that needs triton or a GPU. Three things make torch believe a
CUDA device exists for that long, each undone on exit:

* :func:`fake_cuda_device`: a ``DeviceInterface`` and ``torch.cuda`` queries answering
  with :data:`H100_PROPERTIES`, and ``has_triton`` answering True for the scheduler;
* :func:`cuda_guard`: c10's own ``FakeGuardImpl<CUDA>`` registered as the CUDA device
  guard (a CUDA build without a GPU registers it itself, ``_ensureCUDADeviceGuardSet``);
  Python code over fake cuda tensors (``t[i]``, ``~t`` in metas and decompositions)
  opens a guard and needs one;
* :func:`patterns_on_cpu`: inductor's pattern matcher traces its example patterns with
  real tensors on the graph's device; the patterns do not depend on it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import struct
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest import mock

import torch

#: What inductor reads of the target GPU (``torch.cuda.get_device_properties`` fields), for
#: an H100 SXM: 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper, v1.04, table
#: 3), compute capability 9.0 with 2048 threads, 64 Ki registers and up to 228 KiB of
#: shared memory per SM, 227 KiB per block opt-in, 50 MiB L2 (CUDA C++ Programming Guide,
#: "Features and Technical Specifications", compute capability 9.0). Inductor sizes split
#: reductions from the SM count; the A100's 108 SMs gave the same kernels for a Llama block.
H100_PROPERTIES = SimpleNamespace(
    name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
    total_memory=80 * 2**30, regs_per_multiprocessor=65536,
    max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32,
    shared_memory_per_block_optin=227 * 1024, shared_memory_per_multiprocessor=228 * 1024,
    L2_cache_size=50 * 2**20, gcnArchName="", uuid="roofline-fake-h100")


@contextlib.contextmanager
def fake_cuda_device(props: Any = H100_PROPERTIES) -> Iterator[None]:
    """Inductor sees one CUDA device with ``props`` and a triton it may schedule for."""
    import torch._inductor.scheduler as scheduler
    from torch._dynamo import device_interface as di

    di.get_interface_for_device("cpu")  # the registry's own initialisation first

    class _FakeCuda(di.CudaInterface):  # type: ignore[misc]
        class Worker:
            set_device = staticmethod(lambda device: None)
            current_device = staticmethod(lambda: 0)
            get_device_properties = staticmethod(lambda device=None: props)

        current_device = staticmethod(lambda: 0)
        set_device = staticmethod(lambda device: None)
        device_count = staticmethod(lambda: 1)
        is_available = staticmethod(lambda: True)
        get_device_properties = staticmethod(lambda device=None: props)
        get_compute_capability = staticmethod(lambda device=None: props.major * 10 + props.minor)
        is_bf16_supported = staticmethod(lambda including_emulation=False: True)
        is_triton_capable = staticmethod(lambda device=None: True)
        raise_if_triton_unavailable = staticmethod(lambda device=None: None)
        synchronize = staticmethod(lambda device=None: None)
        get_raw_stream = staticmethod(lambda index: 0)

    saved = dict(di.device_interfaces)

    def restore() -> None:
        di.device_interfaces.clear()
        di.device_interfaces.update(saved)

    patches: list[Any] = [
        mock.patch.object(scheduler, "has_triton", lambda: True),
        mock.patch("torch.cuda.get_device_properties", lambda device=None: props),
        mock.patch("torch.cuda.get_device_capability",
                   lambda device=None: (props.major, props.minor)),
        mock.patch("torch.cuda.current_device", lambda: 0),
        mock.patch("torch.cuda.device_count", lambda: 1),
    ]
    with contextlib.ExitStack() as stack:
        stack.callback(restore)
        di.device_interfaces["cuda"] = _FakeCuda
        di.device_interfaces["cuda:0"] = _FakeCuda
        for p in patches:
            stack.enter_context(p)
        yield


@contextlib.contextmanager
def patterns_on_cpu() -> Iterator[None]:
    """Inductor's joint-graph pattern initialisation, traced on the CPU whatever the graph's
    device (it traces with real tensors, which a CPU build cannot make on cuda)."""
    import torch._inductor.fx_passes.joint_graph as joint

    original = joint.lazy_init

    def lazy_init(input_device: Any = None, *args: Any, **kwargs: Any) -> Any:
        return original(torch.device("cpu"), *args, **kwargs)

    with mock.patch.object(joint, "lazy_init", lazy_init):
        yield


# c10::impl::FakeGuardImpl<DeviceType::CUDA>'s vtable, and c10::impl::registerDeviceGuard
_VTABLE = b"_ZTVN3c104impl13FakeGuardImplILNS_10DeviceTypeE1EEE"
_REGISTER = (b"_ZN3c104impl19registerDeviceGuardENS_10DeviceTypeEPKNS0_24"
             b"DeviceGuardImplInterfaceE")
_CUDA = 1  # c10::DeviceType::CUDA
_kept: list[Any] = []  # the guard objects handed to c10 stay alive with the process


@contextlib.contextmanager
def cuda_guard() -> Iterator[bool]:
    """c10's ``FakeGuardImpl<CUDA>`` as the CUDA device guard while inside; yields whether
    one is registered (False: the library's symbols are stripped).

    A CUDA build registers it itself. A CPU build's registry slot is empty: the guard's
    vtable is a local symbol of ``libc10.so``, found in its ELF symbol table and rebased
    on the exported ``registerDeviceGuard``; the object is the vtable pointer alone (the
    class has no data members). On exit the slot is emptied again.
    """
    if torch.backends.cuda.is_built():
        torch._C._ensureCUDADeviceGuardSet()
        yield True
        return
    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so")
    symbols = _elf_symbols(path, frozenset({_VTABLE, _REGISTER})) if os.path.exists(path) else {}
    if len(symbols) < 2:
        yield False
        return
    lib = ctypes.CDLL(path)
    register = getattr(lib, _REGISTER.decode())
    register.argtypes = [ctypes.c_int8, ctypes.c_void_p]
    base = ctypes.cast(register, ctypes.c_void_p).value - symbols[_REGISTER]  # type: ignore[operator]
    guard = ctypes.c_void_p(base + symbols[_VTABLE] + 16)  # vptr: past offset-to-top, RTTI
    _kept.append(guard)
    register(_CUDA, ctypes.addressof(guard))
    try:
        yield True
    finally:
        register(_CUDA, None)


@functools.cache
def _elf_symbols(path: str, wanted: frozenset[bytes]) -> dict[bytes, int]:
    """The values of the ``wanted`` symbols in an ELF64 little-endian file's symbol tables."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    found: dict[bytes, int] = {}
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind not in (2, 11) or not entsize:  # SHT_SYMTAB, SHT_DYNSYM
            continue
        strings = sections[link][4]
        for i in range(size // entsize):
            name_at, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data,
                                                           offset + i * entsize)
            start = strings + name_at
            name = data[start:data.index(b"\0", start)]
            if name in wanted and value:
                found[name] = value
    return found
