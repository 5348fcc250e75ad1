"""One self-contained HTML page of an analysis or a comparison (``roofline analyze --html``).

The page opens offline (no script or font from the network): the answer first, the
roofline chart as inline SVG whose points name their op group on hover (its shapes,
FLOPs, bytes, time and bound), the speedup curve and time breakdown, a table of the groups
of ops that sorts by any column, the explanation and the assumptions. It can be attached
to a pull request as it is.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
from html import escape
from typing import Any

from roofline._si import si
from roofline._table import html_table
from roofline.analysis import Analysis, Comparison, what_if
from roofline.presentation.explain import describe, explain
from roofline.presentation.plots._style import require_ops
from roofline.presentation.tables import answer, seconds

#: Resolution of the embedded PNG charts (a page of them stays well under a megabyte).
DPI = 100
#: Rows of the ops table (all groups up to this many, largest time first).
ROWS = 200


def png_base64(fig: Any) -> str:
    """``fig`` as a base64 PNG, then closed (the page owns no open figures)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(fig: Any, alt: str) -> str:
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{png_base64(fig)}">'


def _svg(fig: Any) -> str:
    """``fig`` as inline SVG (no XML prologue), then closed."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _tip(row: Any, prefix: str) -> dict[str, str]:
    """What a point says on hover."""
    intensity = row["intensity"]
    return {"label": str(row["label"]), "calls": str(row["count"]),
            "FLOPs": si(row["flops"], "FLOP"), "bytes": si(row["bytes"], "B"),
            "FLOP/B": "-" if not math.isfinite(intensity) else f"{intensity:.3g}",
            "time": seconds(row[f"{prefix}seconds"]),
            "share": f"{row[f'{prefix}share']:.1%}", "bound": str(row[f"{prefix}bound"])}


def _chart(analysis_or_comparison: Analysis | Comparison, top: int) -> str:
    """The roofline chart as inline SVG, with the tooltip data of its points."""
    from roofline.presentation.plots import roofline_chart, roofline_data
    from roofline.presentation.plots.chart import drawn_points

    df = roofline_data(analysis_or_comparison)
    ax = roofline_chart(analysis_or_comparison, top=top)
    drawn = drawn_points(ax)
    prefix = "src_" if isinstance(analysis_or_comparison, Comparison) else ""
    tips = {gid: [_tip(df.iloc[i], "dst_" if gid == "points:dst" else prefix) for i in rows]
            for gid, rows in drawn.items()}
    svg = _svg(ax.get_figure(root=True))
    return (f'<div class="chart">{svg}<div id="tip" role="tooltip"></div></div>\n'
            f'<script type="application/json" id="tips">{_json(tips)}</script>')


def _json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element."""
    return json.dumps(data).replace("</", "<\\/")


def _ops_table(a: Analysis) -> str:
    """Every group of ops (up to :data:`ROWS`) with sortable columns: each numeric cell
    carries its value (``data-v``) for the sort."""
    from roofline.presentation.groups import grouped

    groups = sorted(grouped(a).values(), key=lambda g: -g.seconds)[:ROWS]
    total = a.seconds or 1.0
    head = ["op and shapes", "calls", "bound", "FLOPs", "bytes", "FLOP/B", "time", "share"]
    rows = []
    for g in groups:
        ratio = g.flops / g.bytes if g.bytes else 0.0
        cells = [(g.label, None), (str(g.count), g.count), (g.bound, None),
                 (si(g.flops), g.flops), (si(g.bytes, "B"), g.bytes),
                 (f"{ratio:.3g}" if g.bytes else "-", ratio), (seconds(g.seconds), g.seconds),
                 (f"{g.seconds / total:.1%}", g.seconds)]
        rows.append("<tr>" + "".join(
            f"<td>{escape(text)}</td>" if value is None
            else f'<td data-v="{value:.6g}">{escape(text)}</td>' for text, value in cells)
            + "</tr>")
    header = "".join(f'<th scope="col" aria-sort="none">{escape(h)}</th>' for h in head)
    return (f'<table class="sortable" id="ops"><caption>{len(groups)} groups of ops '
            f"(ATen op and input shapes); click a column to sort</caption><thead><tr>"
            f'{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _breakdowns(a: Analysis) -> str:
    parts = []
    for name, groups in (("bound", a.by_bound()), ("category", a.by_category()),
                         ("phase", a.by_phase())):
        rows = [[k, seconds(v["seconds"]), f"{v['fraction']:.1%}"] for k, v in groups.items()
                if v["seconds"]]
        parts.append(html_table([name, "time", "share"], rows, caption=f"by {name}"))
    return '<div class="row">' + "\n".join(parts) + "</div>"


_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;
color:#222}
pre.answer{background:#f4f6f8;border-left:4px solid #0072B2;padding:.8em 1em;
white-space:pre-wrap;font-size:14px}
img,svg{max-width:100%;height:auto;display:block;margin:1em 0}
.chart{position:relative}
#tip{position:absolute;display:none;pointer-events:none;background:#fff;border:1px solid #888;
border-radius:4px;padding:6px 8px;font:12px monospace;box-shadow:0 2px 6px #0003;z-index:9;
white-space:nowrap}
#tip b{font-family:system-ui,sans-serif}
table{margin:1em 0;border-collapse:collapse;font:12px monospace}
table.sortable th{cursor:pointer;background:#eef1f4;padding:3px 8px;text-align:right}
table.sortable th:first-child,table.sortable td:first-child{text-align:left}
table.sortable td{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
.row{display:flex;gap:2em;flex-wrap:wrap}
"""

# Hover: each point (a path or use element of a scatter group, in drawing order) carries the
# tooltip of the same index. The pointer picks the point whose centre is nearest, within
# its radius plus 6 px (a 4 px point is hard to hit; of overlapping points the last drawn,
# which is on top, wins ties). Sort: by data-v (numbers) or text, toggling direction.
_SCRIPT = """
(function(){
  var tips = JSON.parse(document.getElementById('tips').textContent);
  var tip = document.getElementById('tip');
  var box = tip.parentNode;
  var points = [];
  Object.keys(tips).forEach(function(gid){
    var group = document.getElementById(gid);
    if (!group) return;
    var marks = group.querySelectorAll('path, use');
    for (var i = 0; i < marks.length && i < tips[gid].length; i++) {
      marks[i].setAttribute('class', 'point');
      points.push({mark: marks[i], data: tips[gid][i]});
    }
  });
  var shown = null;
  function show(p){
    if (p === shown) return;
    shown = p;
    if (!p) { tip.style.display = 'none'; return; }
    var rows = '<b>' + p.data.label.replace(/&/g,'&amp;').replace(/</g,'&lt;') + '</b>';
    ['calls','FLOPs','bytes','FLOP/B','time','share','bound'].forEach(function(k){
      rows += '<br>' + k + ': ' + p.data[k];
    });
    tip.innerHTML = rows;
    var r = p.mark.getBoundingClientRect(), b = box.getBoundingClientRect();
    tip.style.left = (r.right - b.left + 8) + 'px';
    tip.style.top = (r.top - b.top) + 'px';
    tip.style.display = 'block';
  }
  box.addEventListener('mousemove', function(e){
    var best = null, bestD = Infinity;
    points.forEach(function(p){
      var r = p.mark.getBoundingClientRect();
      var dx = e.clientX - (r.left + r.width / 2), dy = e.clientY - (r.top + r.height / 2);
      var d = Math.sqrt(dx * dx + dy * dy);
      if (d <= Math.max(r.width, r.height) / 2 + 6 && d <= bestD) { best = p; bestD = d; }
    });
    box.style.cursor = best ? 'pointer' : '';
    show(best);
  });
  box.addEventListener('mouseleave', function(){ show(null); });
  document.querySelectorAll('table.sortable th').forEach(function(th, col){
    th.addEventListener('click', function(){
      var table = th.closest('table'), body = table.tBodies[0];
      var down = th.getAttribute('aria-sort') !== 'descending';
      table.querySelectorAll('th').forEach(function(h){ h.setAttribute('aria-sort','none'); });
      th.setAttribute('aria-sort', down ? 'descending' : 'ascending');
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function(x, y){
        var a = x.cells[col], b = y.cells[col];
        var av = a.getAttribute('data-v'), bv = b.getAttribute('data-v');
        var d = (av !== null && bv !== null) ? parseFloat(av) - parseFloat(bv)
                                             : a.textContent.localeCompare(b.textContent);
        return down ? -d : d;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
})();
"""


def page(analysis_or_comparison: Analysis | Comparison, top: int = 15,
         title: str | None = None) -> str:
    """The HTML page: the answer, the interactive roofline chart, the speedup curve and
    time breakdown, the sortable ops table, the explanation and the assumptions.

    ``top`` labels that many points on the chart.
    """
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
    title = title or (f"roofline: {describe(a)} on {a.device.name}" if c is None else
                      f"roofline: {describe(a)}, {c.src.device.name} -> {c.dst.device.name}")
    boxed = answer(a, compared=c) if c is None or c.src.device.name != c.dst.device.name \
        else answer(a, asked=c)
    charts = [_chart(analysis_or_comparison, top)]
    if a.seconds > 0:
        charts.append(_img(plots.speedup_curve(a.trace, a.device, **options).figure,
                           "speedup curve"))
    charts.append(_img(plots.time_breakdown(analysis_or_comparison).figure, "time breakdown"))
    sections = [f"<h1>{escape(title)}</h1>", f'<pre class="answer">{escape(boxed)}</pre>',
                f"<p>{escape(said)}</p>", *charts, "<h2>Where the time goes</h2>",
                _ops_table(a), _breakdowns(a)]
    if c is not None:
        rows = [[k, seconds(v["src_seconds"]), seconds(v["dst_seconds"]), f"{v['speedup']:.2f}x"]
                for k, v in c.by_category().items() if v["src_seconds"]]
        sections += [f"<h2>{escape(c.src.device.name)} -> {escape(c.dst.device.name)}: "
                     f"{c.speedup:.2f}x ({seconds(c.src.seconds)} -> "
                     f"{seconds(c.dst.seconds)})</h2>",
                     html_table(["category", c.src.device.name, c.dst.device.name, "speedup"],
                                rows, caption="by category")]
    notes = list(dict.fromkeys(a.assumptions + (c.dst.assumptions if c else [])))
    if notes:
        sections.append("<h2>Assumptions</h2><ul>" + "".join(
            f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    body = "\n".join(sections)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width'><title>{escape(title)}"
            f"</title><style>{_STYLE}</style></head><body>\n{body}\n"
            f"<script>{_SCRIPT}</script>\n</body></html>\n")


def write_html(path: str, analysis_or_comparison: Analysis | Comparison, top: int = 15) -> str:
    """Write :func:`page` to ``path``; returns the path."""
    text = page(analysis_or_comparison, top)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


__all__ = ["page", "png_base64", "write_html"]
