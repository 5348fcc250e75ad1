"""One self-contained HTML page of an analysis or a comparison (``roofline analyze --html``).

The page holds the charts as base64 PNGs, the tables, the explanation and the
assumptions, so it can be attached to a pull request or opened offline.
"""

from __future__ import annotations

import base64
import dataclasses
import io
from html import escape
from typing import Any

from roofline._si import si
from roofline._table import html_table
from roofline.analysis import Analysis, Comparison, what_if
from roofline.presentation.explain import explain
from roofline.presentation.plots._style import require_ops
from roofline.presentation.tables import intensity, seconds

#: Resolution of the embedded charts (a page of four stays well under a megabyte).
DPI = 100


def png_base64(fig: Any) -> str:
    """``fig`` as a base64 PNG, then closed (the page owns no open figures)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(fig: Any, alt: str) -> str:
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{png_base64(fig)}">'


def _analysis_tables(a: Analysis, top: int) -> str:
    total = a.seconds or 1.0
    ops = [[op.name.removeprefix("aten."), op.module or "-", op.phase, op.dtype, bound,
            si(op.flops), si(op.bytes, "B"), intensity(op), seconds(s),
            f"{s / total:.1%}"] for op, s, bound in a.top(top)]
    parts = [
        f"<p>{escape(a.device.name)}: predicted step {seconds(a.seconds)} "
        f"({len(a.trace.ops)} ops, {si(a.trace.total_flops, 'FLOP')}, "
        f"{si(a.trace.total_bytes, 'B')}), achieved {si(a.achieved_flops_per_s, 'FLOP/s')} = "
        f"{a.mfu:.1%} of peak</p>",
        html_table(["op", "module", "phase", "dtype", "bound", "FLOPs", "bytes", "FLOP/B",
                    "time", "share"], ops, caption=f"top {len(ops)} ops"),
    ]
    for name, groups in (("bound", a.by_bound()), ("category", a.by_category()),
                         ("phase", a.by_phase())):
        rows = [[k, seconds(v["seconds"]), f"{v['fraction']:.1%}"] for k, v in groups.items()
                if v["seconds"]]
        parts.append(html_table([name, "time", "share"], rows, caption=f"by {name}"))
    return "\n".join(parts)


def page(analysis_or_comparison: Analysis | Comparison, top: int = 15,
         title: str | None = None) -> str:
    """The HTML page: roofline chart, speedup curve, time breakdown, tables, explanation
    and assumptions."""
    from roofline.presentation import plots

    if isinstance(analysis_or_comparison, Comparison):
        c: Comparison | None = analysis_or_comparison
        a = analysis_or_comparison.src
    elif isinstance(analysis_or_comparison, Analysis):
        c, a = None, analysis_or_comparison
    else:
        raise TypeError(f"page() takes an Analysis or a Comparison, got "
                        f"{type(analysis_or_comparison).__name__}")
    require_ops(a, "page")
    options = dataclasses.asdict(a.options)
    # the explanation: of the comparison, or of the seed question on this device (its
    # assumptions have a section of their own)
    said = explain(c if c is not None else what_if(a.trace, a.device, **options),
                   assumptions=False)
    model = a.trace.info.model or "step"
    title = title or (f"roofline: {model} on {a.device.name}" if c is None else
                      f"roofline: {model}, {c.src.device.name} -> {c.dst.device.name}")
    charts = [_img(plots.roofline_chart(analysis_or_comparison).figure, "roofline chart")]
    if a.seconds > 0:
        charts.append(_img(plots.speedup_curve(a.trace, a.device, **options).figure,
                           "speedup curve"))
    charts.append(_img(plots.time_breakdown(analysis_or_comparison).figure, "time breakdown"))
    sections = [f"<h1>{escape(title)}</h1>", f"<p><b>{escape(said)}"
                "</b></p>", *charts, "<h2>Analysis</h2>", _analysis_tables(a, top)]
    if c is not None:
        rows = [[k, seconds(v["src_seconds"]), seconds(v["dst_seconds"]), f"{v['speedup']:.2f}x"]
                for k, v in c.by_category().items() if v["src_seconds"]]
        sections += [f"<h2>{escape(c.src.device.name)} -> {escape(c.dst.device.name)}: "
                     f"{c.speedup:.2f}x</h2>",
                     html_table(["category", c.src.device.name, c.dst.device.name, "speedup"],
                                rows, caption="by category"),
                     _analysis_tables(c.dst, top)]
    notes = list(dict.fromkeys(a.assumptions + (c.dst.assumptions if c else [])))
    sections.append("<h2>Assumptions</h2><ul>" + "".join(
        f"<li>{escape(n)}</li>" for n in notes) + "</ul>" if notes else "")
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;"
             "padding:0 1em}img{max-width:100%;display:block;margin:1em 0}"
             "table{margin:1em 0}")
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{escape(title)}"
            f"</title><style>{style}</style></head><body>\n" + "\n".join(sections)
            + "\n</body></html>\n")


def write_html(path: str, analysis_or_comparison: Analysis | Comparison, top: int = 15) -> str:
    """Write :func:`page` to ``path``; returns the path."""
    text = page(analysis_or_comparison, top)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path
