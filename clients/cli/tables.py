"""Tables as every command line prints them: aligned text that fits the terminal,
and Markdown for reports.

Owns: `table` (aligned columns: the first and the text columns left, numbers right;
columns a terminal has no room for left out, or text cut with "…") and
`markdown_table`. The queuebox commands, `status`, the bench's reports and the
pipeline's report all build their tables here. Pure: no I/O, no other module of
the project.
"""

from __future__ import annotations

from collections.abc import Sequence


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    text: frozenset[int] = frozenset(),
) -> str:
    """An aligned table: the first column and the `text` columns left, numbers right.
    With `width` and no text columns, the columns that do not fit are left out from
    the right (at least two stay). With text columns, every column stays and the
    text is cut with "…": each text column but the last to a third of the width at
    most, the last one to what is left."""
    columns = [list(column) for column in zip(header, *rows, strict=True)]
    widths = [max(map(len, column)) for column in columns]
    if width is not None and not text:
        while len(widths) > 2 and sum(widths) + 2 * (len(widths) - 1) > width:
            widths.pop()
            columns.pop()
    for n in sorted(text) if width is not None else ():
        if n == max(text):
            others = sum(w for i, w in enumerate(widths) if i != n) + 2 * (len(widths) - 1)
            room = max(width - others, len(header[n]))  # type: ignore[operator]
        else:
            room = max(width // 3, len(header[n]))  # type: ignore[operator]
        widths[n] = min(widths[n], room)
        columns[n] = [_cut(cell, room) for cell in columns[n]]
    lines = []
    for cells in zip(*columns, strict=True):
        row = [
            cell.ljust(w) if n == 0 or n in text else cell.rjust(w)
            for n, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        lines.append("  ".join(row).rstrip())
    return "\n".join(lines)


def _cut(cell: str, room: int) -> str:
    return cell if len(cell) <= room else cell[: max(room - 1, 0)] + "…"


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[object]], right: frozenset[int] = frozenset()
) -> list[str]:
    """A Markdown table's lines; the `right` columns are aligned right (numbers)."""
    rule = ["--:" if n in right else "---" for n in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines
