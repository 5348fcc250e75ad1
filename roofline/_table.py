"""A tiny HTML table for ``_repr_html_`` (Jupyter), shared by every layer.

It sits below the layers (it imports nothing of roofline), like ``roofline._si``: a record
or an analysis renders its text repr's content as a table without importing presentation.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

_STYLE = ("border-collapse:collapse;font-family:monospace;font-size:12px;"
          "text-align:right")
_CELL = "padding:2px 8px;border-bottom:1px solid #ddd"


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]],
               caption: str = "") -> str:
    """``rows`` under ``header`` as an HTML ``<table>``, every cell escaped; the first
    column left-aligned (it names the row)."""
    def cells(values: Sequence[Any], tag: str) -> str:
        return "".join(
            f'<{tag} style="{_CELL}{";text-align:left" if i == 0 else ""}">'
            f"{escape(str(v))}</{tag}>" for i, v in enumerate(values))

    head = f"<caption style='text-align:left'>{escape(caption)}</caption>" if caption else ""
    body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in rows)
    return (f'<table style="{_STYLE}">{head}<thead><tr>{cells(header, "th")}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


class Rows(dict[str, dict[str, float]]):
    """A breakdown: row name -> {column: value}, a plain dict that Jupyter shows as a table.

    Returned by ``Analysis.by_bound()``, ``by_category()``, ``Comparison.by_category()``...;
    it compares, indexes and serialises as the dict it is.
    """

    def _repr_html_(self) -> str:
        columns = list(dict.fromkeys(c for row in self.values() for c in row))
        rows = [[name, *(_cell(c, row.get(c)) for c in columns)] for name, row in self.items()]
        return html_table(["", *columns], rows)


def _cell(column: str, value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "" if value is None else str(value)
    if column.endswith("seconds"):
        from roofline._si import si

        return si(float(value), "s", digits=4)
    if column.endswith("fraction"):
        return f"{value:.1%}"
    return f"{value:.3g}"
