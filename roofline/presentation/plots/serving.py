"""Charts of serving an LLM: tokens/s against batch up to the capacity wall, and prefill and
decode on one roofline, a point per op group of a layer."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline._si import si
from roofline.analysis import Analysis, Serving
from roofline.presentation.groups import grouped
from roofline.presentation.plots._style import drawing, legend_spot, settle
from roofline.presentation.plots.chart import (
    _draw_roofs,
    _engines,
    _marker_boxes,
    place_labels,
    roofs,
)
from roofline.presentation.serving import where

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Okabe-Ito colours of the two phases (none is a bound's colour).
PHASE_COLORS = {"prefill": "#E69F00", "decode": "#009E73"}
WALL_COLOR = "#CC3311"
#: Batches drawn by default: powers of two up to past the capacity.
MAX_POINTS = 12


def _serving(s: Any, caller: str) -> Serving:
    if not isinstance(s, Serving):
        raise TypeError(f"{caller}() takes a Serving (roofline.serve), got {type(s).__name__}")
    return s


def default_batches(s: Serving) -> list[int]:
    """Powers of two from 1 to past the largest batch that fits (or the asked batch), the
    asked batch and the largest: at most :data:`MAX_POINTS` traced batches."""
    top = max(s.trace.batch, s.capacity.max_batch if s.capacity else 0, 1)
    powers = [2 ** k for k in range(int(math.log2(top)) + 2)]
    step = max(1, math.ceil(len(powers) / (MAX_POINTS - 2)))
    picked = set(powers[::step]) | {s.trace.batch, powers[-1]}
    if s.capacity and s.capacity.max_batch:
        picked.add(s.capacity.max_batch)
    return sorted(picked)


def serving_batch_curve(serving: Serving, batches: list[int] | None = None,
                        ax: Axes | None = None) -> Axes:
    """Decode tokens/s at the full context against batch, with the capacity wall.

    Each point is the decode step at ``prompt + new`` tokens of context traced at that
    batch (:meth:`Serving.batch_sweep`); batches past the wall do not fit the device
    (hollow points, shaded region): their times are what they would take with the memory.

    Parameters
    ----------
    serving : :func:`roofline.serve`'s result (with its capacity, the default).
    batches : the batches to trace; by default powers of two past the capacity, the asked
        batch and the largest that fits.
    ax : draw into this Axes (else a new figure).

    Returns
    -------
    matplotlib.axes.Axes
        With the curve (gid ``tokens``), the wall (``wall``) and the asked batch
        (``asked``).

    Raises
    ------
    TypeError
        Anything but a Serving.
    ValueError
        A Serving without its capacity (``serve(..., capacity=False)``).

    Examples
    --------
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> config = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688,
    ...                      num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
    ...                      max_position_embeddings=8192)
    >>> with torch.device("meta"):
    ...     model = LlamaForCausalLM(config).to(torch.bfloat16)
    >>> s = roofline.serve(model, "rtx 4090", prompt_tokens=4096, new_tokens=4096)
    >>> s.capacity.max_batch  # (24 GB - 0.57 GB of CUDA context and cuBLAS workspace)
    ... # / (8.4 MB of KV cache per sequence of 8192 tokens, and a little activation)
    2786
    >>> ax = roofline.plot.serving_batch_curve(s)
    """
    s = _serving(serving, "serving_batch_curve")
    cap = s.capacity
    if cap is None:
        raise ValueError("serving_batch_curve() draws the capacity wall: serve with "
                         "capacity=True (the default)")
    df = s.batch_sweep(batches or default_batches(s))
    b = df["batch"].to_numpy(float)
    rate = df["tokens_per_s"].to_numpy(float)
    fit = df["fits"].to_numpy(bool)
    with drawing(ax, (8.0, 4.4)) as out:
        given, ax = ax, out
        color = PHASE_COLORS["decode"]
        ax.plot(b, rate, "-", color=color, lw=1.2, gid="tokens",
                label=f"decode tokens/s at {cap.context_tokens} tokens of context")
        ax.plot(b[fit], rate[fit], "o", color=color, ms=5)
        ax.plot(b[~fit], rate[~fit], "o", mfc="white", color=color, ms=5,
                label="does not fit (time as if it did)" if (~fit).any() else None)
        ax.set_xscale("log", base=2)
        lo, hi = b.min() / 1.5, b.max() * 1.5
        ax.set_xlim(lo, hi)
        ax.set_ylim(0, rate.max() * 1.22)
        if cap.max_batch:
            wall = cap.max_batch + 0.5
            ax.axvline(wall, color=WALL_COLOR, lw=1.5, gid="wall",
                       label=f"capacity: {cap.max_batch} sequences fit {where(s)}")
            ax.axvspan(wall, hi, color=WALL_COLOR, alpha=0.07, lw=0)
        asked = float(s.trace.batch)
        ax.plot([asked], [np.interp(asked, b, rate)], "*", ms=12, color="#332288",
                gid="asked", label=f"asked: batch {s.trace.batch}")
        ax.set_xlabel("batch (concurrent sequences)")
        ax.set_ylabel("decode tokens/s (all sequences)")
        ax.grid(True, lw=0.4, alpha=0.4)
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(frameon=False, **({"loc": "upper left"} if given is not None
                                    else legend_spot(ax, given)))
        ax.set_title(f"{s.trace.model} on {where(s)}: decode throughput against batch\n"
                     f"KV {si(s.trace.kv_bytes_per_sequence, 'B')} per sequence, weights "
                     f"{si(s.trace.parameter_bytes, 'B')}{s.trace.per_gpu}", loc="left", fontsize=9)
    return ax


def _groups(a: Analysis) -> list[dict[str, Any]]:
    """The op groups of a step: per layer module (repeated layers folded) and category,
    those with FLOPs and bytes (the others have no place on a roofline)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for g in grouped(a, "module").values():
        for i in g.ops:
            op = a.trace.ops[i]
            key = (g.label, str(op.category))
            row = out.setdefault(key, {"module": g.label, "category": str(op.category),
                                       "flops": 0, "bytes": 0, "seconds": 0.0})
            row["flops"] += op.flops
            row["bytes"] += op.bytes
            row["seconds"] += float(a.op_seconds[i])
    return [r for r in out.values() if r["flops"] > 0 and r["bytes"] > 0 and r["seconds"] > 0]


def _label(row: dict[str, Any]) -> str:
    """``q_proj`` for a layer's projection, ``self_attn: attention`` for the rest."""
    leaf = row["module"].rsplit(".", 1)[-1]
    return leaf if row["category"] in ("matmul", leaf) else f"{leaf}: {row['category']}"


def serving_roofline(serving: Serving, ax: Axes | None = None, top: int = 6) -> Axes:
    """Prefill and decode on one roofline: a point per op group of a layer.

    Groups are the model's modules with the repeated layers folded (``layers.*.q_proj``),
    split by op category; each point sits at the group's FLOPs per byte and the FLOP/s it
    attains (its FLOPs over its predicted time), its area the share of its phase's time.
    Prefill is the prefill step, decode the decode step at the full context. The roofs are
    the rates the device runs the step's engines at.

    Parameters
    ----------
    serving : :func:`roofline.serve`'s result.
    ax : draw into this Axes (else a new figure).
    top : label this many groups of each phase, the ones with the most time.

    Returns
    -------
    matplotlib.axes.Axes
        The points of each phase carry gid ``prefill`` and ``decode``.

    Examples
    --------
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> config = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688,
    ...                      num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4)
    >>> with torch.device("meta"):
    ...     model = LlamaForCausalLM(config).to(torch.bfloat16)
    >>> s = roofline.serve(model, "h100", prompt_tokens=512, new_tokens=64, capacity=False)
    >>> ax = roofline.plot.serving_roofline(s)
    """
    s = _serving(serving, "serving_roofline")
    phases = {"prefill": s.prefill, "decode": s.decode[max(s.decode)]}
    rows = {name: _groups(a) for name, a in phases.items()}
    every = [r for rs in rows.values() for r in rs]
    if not every:
        raise ValueError("serving_roofline(): no op group has FLOPs to place on a roofline")
    x = np.array([r["flops"] / r["bytes"] for r in every])
    y = np.array([r["flops"] / r["seconds"] for r in every])
    rs = roofs(s.device, _engines(s.prefill), analysis=s.prefill)
    peak = max((r.flops_per_s for r in rs), default=float(y.max()))
    ridge = max((r.ridge_point for r in rs), default=float(x.max()))
    x_lo, x_hi = x.min() / 4, max(x.max(), ridge) * 8
    with drawing(ax, (10.0, 6.0)) as out:
        given, ax = ax, out
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(min(y.min(), s.prefill.stream_bytes_per_s() * x_lo) / 3, peak * 3)
        _draw_roofs(ax, rs, x_lo, x_hi, s.device.name)
        drawn = _points(ax, rows, phases)
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("attained FLOP/s (group FLOPs / predicted time)")
        ax.grid(True, which="major", lw=0.4, alpha=0.4)
        _legend(ax, rs, given)
        st = s.trace
        ax.set_title(f"{st.model} on {where(s)}: prefill ({st.batch} x "
                     f"{st.prompt_tokens} tokens) and decode (batch {st.batch}, "
                     f"{st.contexts[-1]} cached tokens)\none point per layer op group, area "
                     "~ share of its phase's time", loc="left", fontsize=9)
        settle(ax)  # labels are placed in pixels: lay the figure out first
        placed: list[Any] = []
        markers = [m for _, xy, area in drawn for m in _marker_boxes(ax, xy[:, 0], xy[:, 1],
                                                                      area)]
        for name, xy, _ in drawn:
            labels = [_label(r) for r in sorted(rows[name], key=lambda r: -r["seconds"])]
            place_labels(ax, xy[:top, 0], xy[:top, 1], labels[:top], placed, markers,
                         color=PHASE_COLORS[name])
    return ax


def _points(ax: Axes, rows: dict[str, list[dict[str, Any]]],
            phases: dict[str, Analysis]) -> list[tuple[str, Any, Any]]:
    """Each phase's points: per phase, their coordinates (most time first) and marker
    areas, for the labels to avoid."""
    out = []
    for name, rs in rows.items():
        rs = sorted(rs, key=lambda r: -r["seconds"])
        x = np.array([r["flops"] / r["bytes"] for r in rs])
        y = np.array([r["flops"] / r["seconds"] for r in rs])
        area = np.array([max(8.0, 400.0 * r["seconds"] / phases[name].seconds) for r in rs])
        ax.scatter(x, y, s=area, color=PHASE_COLORS[name], alpha=0.75,
                   marker="o" if name == "prefill" else "s", edgecolors="white",
                   linewidths=0.5, zorder=4, gid=name)
        out.append((name, np.column_stack([x, y]), area))
    return out


def _legend(ax: Axes, rs: list[Any], given: Axes | None) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="", marker="o", ms=8, color=PHASE_COLORS["prefill"],
                      label="prefill"),
               Line2D([], [], ls="", marker="s", ms=7, color=PHASE_COLORS["decode"],
                      label="decode")]
    for r in sorted(rs, key=lambda r: -r.flops_per_s):
        handles.append(Line2D([], [], color=r.color, ls=r.linestyle,
                              label=f"{r.engine}: {si(r.flops_per_s, 'FLOP/s')}"))
    if rs:
        handles.append(Line2D([], [], color=rs[0].color,
                              label=f"memory: {si(rs[0].bandwidth_bytes_per_s, 'B/s')}"))
    ax.legend(handles=handles, frameon=False, fontsize=8, **legend_spot(ax, given))
