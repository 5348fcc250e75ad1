"""A device swap or a what-if device for serving: the speedup of prefill and of decode
apart, each with its reason.

Prefill is mostly compute-bound and decode mostly memory- or overhead-bound, so one
device swap gives the two phases different speedups. Each phase's reason names the bound
that holds most of its time on the source device and how much faster that roof is on the
destination as the analyses cost it (the rates each device was measured to reach), with
the datasheet ratio beside it: "decode: 1.17x from 1.18x the bandwidth it streams at
(1.43x on the datasheets)".

Under tensor parallelism both sides run the traced split (the same GPUs count), and the
communication a step waits for is a bound of its own, faster or slower with the
interconnect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from roofline._si import si
from roofline.analysis.serving import BOUNDS, Serving, serve_trace
from roofline.analysis.timing import ROOFS, Analysis, ratio
from roofline.hardware import DeviceSpec, get_device
from roofline.tracing.serving import ServingTrace

#: A second bound is named in a phase's reason from this share of its time on.
SECOND_SHARE = 0.15
_ROOF_WORDS = {"compute": "FLOP/s", "memory": "bandwidth"}
#: Bounds whose ratio is a time, not a rate: (better, worse, what).
_TIME_WORDS = {"communication": ("faster", "slower", "collectives"),
               "overhead": ("faster", "slower", "kernel launches"),
               "latency": ("shorter", "longer", "DRAM latency")}


@dataclass(frozen=True)
class PhaseReason:
    """Why one phase speeds up as it does.

    Attributes
    ----------
    phase : ``"prefill"`` or ``"decode"``.
    speedup : the phase's speedup (source seconds over destination seconds).
    shares : fraction of the phase's source time per bound.
    roof_ratios : per roof, its seconds on the source over the destination: how much
        faster that roof is as the analyses cost it (host time: 1).
    datasheet_ratios : the datasheet's ``compute`` (peak of the engine carrying most
        FLOPs) and ``memory`` (bandwidth) ratios, destination over source.
    """

    phase: str
    speedup: float
    shares: dict[str, float]
    roof_ratios: dict[str, float]
    datasheet_ratios: dict[str, float]

    def __str__(self) -> str:
        """``decode: 1.41x from 1.52x bandwidth (datasheets: 1.64x) on its memory-bound
        50%; overhead 50% at 1.32x``: the bound whose change moved the time most first."""
        shares = {b: self.shares.get(b, 0.0) for b in BOUNDS if self.shares.get(b, 0.0) > 0}
        if not shares:
            return f"{self.phase}: {self.speedup:.2f}x (no device time)"

        def moved(b: str) -> float:  # the share of the source time this bound's change moves
            return abs(shares[b] * (1.0 - 1.0 / self.roof_ratios.get(b, 1.0)))

        lead = max(shares, key=lambda b: (moved(b), shares[b]))
        text = (f"{self.phase}: {self.speedup:.2f}x from {self._ratio(lead)} on its "
                f"{lead}-bound {shares[lead]:.0%}")
        others = sorted((b for b in shares if b != lead and shares[b] >= SECOND_SHARE),
                        key=lambda b: -shares[b])
        for other in others[:1]:
            text += (f"; {other} {shares[other]:.0%} at "
                     f"{self.roof_ratios.get(other, 1.0):.2f}x")
        return text

    def _ratio(self, bound: str) -> str:
        r = self.roof_ratios.get(bound, 1.0)
        if bound == "host":
            return "nothing: host time stays fixed"
        if bound in _TIME_WORDS:
            better, worse, what = _TIME_WORDS[bound]
            return f"{r:.2f}x {better} {what}" if r >= 1 else f"{1 / r:.2f}x {worse} {what}"
        sheet = self.datasheet_ratios.get(bound)
        extra = f" (datasheets: {sheet:.2f}x)" if sheet and abs(sheet - r) > 0.005 else ""
        return f"{r:.2f}x {_ROOF_WORDS[bound]}{extra}"


def _roof_ratios(src: Sequence[Analysis], dst: Sequence[Analysis]) -> dict[str, float]:
    out = {}
    for roof in ROOFS:
        a = float(sum(x.roof(roof).sum() for x in src))
        b = float(sum(x.roof(roof).sum() for x in dst))
        out[roof] = ratio(a, b)
    return out


def _datasheet(src: Analysis, dst: Analysis) -> dict[str, float]:
    out = {"memory": ratio(dst.device.bandwidth_bytes_per_s, src.device.bandwidth_bytes_per_s)}
    if src.peak_flops_per_s and dst.peak_flops_per_s:
        out["compute"] = dst.peak_flops_per_s / src.peak_flops_per_s
    return out


@dataclass
class ServingComparison:
    """One serving workload on two devices: ``dst`` against ``src``.

    Attributes
    ----------
    src, dst : Serving
        The workload costed on each device.
    """

    src: Serving
    dst: Serving

    @property
    def prefill_speedup(self) -> float:
        """TTFT on ``src`` over TTFT on ``dst`` (>1: ``dst`` is faster)."""
        return ratio(self.src.ttft_seconds, self.dst.ttft_seconds)

    @property
    def decode_speedup(self) -> float:
        """Mean TPOT on ``src`` over mean TPOT on ``dst``."""
        return ratio(self.src.mean_tpot_seconds, self.dst.mean_tpot_seconds)

    @property
    def speedup(self) -> float:
        """The whole static batch, prompt to last token."""
        return ratio(self.src.total_seconds, self.dst.total_seconds)

    def reasons(self) -> dict[str, PhaseReason]:
        """Per phase (``prefill``, ``decode``), why it speeds up as it does."""
        s, d = self.src, self.dst
        src_decode, dst_decode = list(s.decode.values()), list(d.decode.values())
        return {
            "prefill": PhaseReason(
                "prefill", self.prefill_speedup,
                {b: v["fraction"] for b, v in s.prefill_bounds().items()},
                {**_roof_ratios([s.prefill], [d.prefill]),
                 "communication": ratio(s.prefill_communication_seconds,
                                        d.prefill_communication_seconds)},
                _datasheet(s.prefill, d.prefill)),
            "decode": PhaseReason(
                "decode", self.decode_speedup,
                {b: v["fraction"] for b, v in s.decode_bounds().items()},
                {**_roof_ratios(src_decode, dst_decode),
                 "communication": ratio(sum(s.decode_communication_seconds.values()),
                                        sum(d.decode_communication_seconds.values()))},
                _datasheet(src_decode[0], dst_decode[0])),
        }

    def explain(self) -> str:
        """The speedups and their reasons, one line per phase."""
        r = self.reasons()
        return "\n".join([
            f"{self.src.gpus_name} -> {self.dst.gpus_name}: {self.speedup:.2f}x for the "
            f"whole batch ({si(self.src.total_seconds, 's')} -> "
            f"{si(self.dst.total_seconds, 's')})",
            str(r["prefill"]), str(r["decode"])])

    def __repr__(self) -> str:
        return (f"ServingComparison({self.src.gpus_name} -> {self.dst.gpus_name}: "
                f"prefill {self.prefill_speedup:.2f}x, decode {self.decode_speedup:.2f}x, "
                f"all {self.speedup:.2f}x)")


def _trace_of(obj: ServingTrace | Serving) -> ServingTrace:
    return obj.trace if isinstance(obj, Serving) else obj


def compare_serving(obj: ServingTrace | Serving, src: str | DeviceSpec,
                    dst: str | DeviceSpec, *, capacity: bool = False,
                    **options: Any) -> ServingComparison:
    """:func:`roofline.compare` of a serving trace (or a :class:`Serving`'s trace)."""
    st = _trace_of(obj)
    return ServingComparison(serve_trace(st, get_device(src), capacity=capacity, **options),
                             serve_trace(st, get_device(dst), capacity=capacity, **options))


def what_if_serving(obj: ServingTrace | Serving, device: str | DeviceSpec,
                    factors: dict[str, float], **options: Any) -> ServingComparison:
    """:func:`roofline.what_if` of a serving trace: ``factors`` are
    :meth:`DeviceSpec.scaled`'s (``flops_factor``...)."""
    spec = get_device(device)
    dst = spec.scaled(flops_factor=factors.get("flops_factor", 1.0),
                      bandwidth_factor=factors.get("bandwidth_factor", 1.0),
                      clock_factor=factors.get("clock_factor", 1.0),
                      cores_factor=factors.get("cores_factor", 1.0))
    return compare_serving(obj, spec, dst, **options)
