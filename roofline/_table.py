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
