"""Analysis options: which engines PyTorch would use, achievable fractions, host time."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from roofline.hardware.checks import EFFICIENCY_KEYS, check_efficiency

__all__ = ["EFFICIENCY_KEYS", "Options", "OverheadModel", "Peaks"]

Peaks = Literal["achievable", "datasheet"]
OverheadModel = Literal["additive", "max"]

@dataclass(frozen=True)
class Options:
    """Analysis options; every public entry point takes them as keywords.

    Attributes
    ----------
    tf32_matmul : bool
        fp32 matmuls use TF32 tensor cores (``torch.backends.cuda.matmul.allow_tf32``).
    tf32_conv : bool
        fp32 convolutions use TF32 (``torch.backends.cudnn.allow_tf32``, on by default).
    fp16_accumulate : bool
        fp16 matmuls accumulate in fp16 (``torch.backends.cuda.matmul.allow_fp16_accumulation``;
        cuBLAS ``CUBLAS_COMPUTE_16F``, which llama.cpp uses): on a device with a faster
        fp16-accumulate peak (GeForce), that peak.
    efficiency : float or dict, optional
        A fraction in (0, 1] applied to the rates in use: one float for every roof, or a
        dict with keys ``matrix``, ``vector``, ``memory``. Overrides the device's own
        ``efficiency``. With ``peaks="achievable"`` it multiplies the measured rates; with
        ``peaks="datasheet"`` it is a fraction of the datasheet peaks.
    host_seconds : float
        Time per step off the device (data loading, Python), fixed across devices.
    host_fraction : float, optional
        The same, as a fraction of the whole step on the analysed device.
    overhead : bool
        Model per-kernel launch overhead (``False``: a pure roofline).
    peaks : {"achievable", "datasheet"}
        ``"achievable"`` (default): the rates the device was measured to reach (its
        registry entry's ``achievable`` figures, each with its source; a documented
        default for its class where it has none); ``"datasheet"``: the datasheet peaks.
    overhead_model : {"additive", "max"}
        ``"additive"`` (default): a kernel takes its overhead *plus* the slower of its
        compute and memory times, the form ``T = a + V / b`` that small-kernel
        microbenchmarks fit; ``"max"``: the overhead competes in the max (a classic
        roofline with a launch floor).
    graphs : bool
        Kernels are launched from a CUDA graph: the measured graph-launch overhead where
        the device has one. The default for a ``compile={"mode": "reduce-overhead"}``
        trace, which torch.compile replays from CUDA graphs.
    layout_transposes : bool
        Count the NCHW <-> NHWC transposes cuDNN adds around 16-bit convolutions of a
        channels-first model on an NVIDIA GPU (recorded by the capture as ``layout`` ops);
        ``False`` costs them at zero.
    kernel_passes : bool
        On a GPU, cost softmax, log-softmax and layer- and RMS-norm backward with the
        passes PyTorch's CUDA kernels make over rows that do not fit on chip, and their
        extra kernels, and layer (and fused RMS) norm's forward at the bandwidth its
        block-per-row kernel was measured to stream at (``roofline.analysis.passes``),
        and on NVIDIA GPUs a convolution's gradients at the multiples of its forward's time
        cuDNN's were measured to take (``roofline.analysis.gemm.gradient_slowdown``) and
        its FLOPs' time at the measured multiple of cuDNN's algorithm, by size: implicit
        GEMM on the tensor cores, Winograd or the rest in fp32 on CUDA cores before compute
        capability 8.0 (``roofline.analysis.gemm.conv_slowdown``); ``False``: each input
        read once, at the bandwidth of its access pattern, convolutions at their FLOPs'
        time, both gradients at the forward's rate.
    gemm_shapes : bool
        Cost matmuls (``mm``, ``addmm``, ``bmm``...) with the GEMM time model fitted to the
        device's measured per-shape table, or its class's (``roofline.analysis.gemm``);
        ``False``: the matrix figure and the share of the chip the GEMM's tiles fill.
    bytes_in_flight : bool
        On a GPU with a DRAM latency figure, give an attention kernel that launches too
        few thread blocks a ``latency`` roof: its bytes at the bytes its blocks keep in
        flight per latency (Little's law; ``roofline.analysis.inflight``), which more
        bandwidth does not lower; likewise a layer norm whose row's block waits on its
        loads one after another (few rows: the rounds of DRAM latency beyond the first),
        and a channels-first batch norm in training, one block per channel (bf16, and on
        NVIDIA GPUs fp16 and fp32 too, cuDNN's kernels given PyTorch's rounds);
        ``False``: none.
    host_samples_per_s : float, optional
        A ceiling off the device, in samples per second (an input pipeline that delivers
        at most this many): the step takes at least ``batch / host_samples_per_s``
        seconds, the batch being the trace's (``trace.info.batch``).
    """

    tf32_matmul: bool = False
    tf32_conv: bool = True
    fp16_accumulate: bool = False
    efficiency: float | dict[str, float] | None = None
    host_seconds: float = 0.0
    host_fraction: float | None = None
    overhead: bool = True
    peaks: Peaks = "achievable"
    overhead_model: OverheadModel = "additive"
    graphs: bool = False
    layout_transposes: bool = True
    gemm_shapes: bool = True
    kernel_passes: bool = True
    bytes_in_flight: bool = True
    host_samples_per_s: float | None = None

    def __post_init__(self) -> None:
        for name, allowed in (("peaks", get_args(Peaks)),
                              ("overhead_model", get_args(OverheadModel))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r}: expected one of "
                                 f"{', '.join(map(repr, allowed))}")
        for name in ("tf32_matmul", "tf32_conv", "fp16_accumulate", "overhead", "graphs",
                     "layout_transposes", "gemm_shapes", "kernel_passes", "bytes_in_flight"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not _real(self.host_seconds) or not math.isfinite(self.host_seconds) \
                or self.host_seconds < 0:
            raise ValueError(f"host_seconds must be a finite number >= 0, got "
                             f"{self.host_seconds!r}")
        if self.host_fraction is not None and not (
                _real(self.host_fraction) and 0 <= self.host_fraction < 1):
            raise ValueError(f"host_fraction must be in [0, 1), got {self.host_fraction!r}")
        if self.host_samples_per_s is not None and not (
                _real(self.host_samples_per_s) and math.isfinite(self.host_samples_per_s)
                and self.host_samples_per_s > 0):
            raise ValueError(f"host_samples_per_s must be a finite number > 0 (samples per "
                             f"second), got {self.host_samples_per_s!r}")
        check_efficiency(self.efficiency)


def _real(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
