"""PNG charts of a lifecycle report, drawn with matplotlib (headless, Agg backend).

Owns: `throughput` (events per second over time: one panel per metric, one line
per tube), `wait_histogram` (distribution of put -> first take, per tube) and
`histogram_layout`, the bins that histogram uses. Inputs are plain Python rows
already collected from Spark; the `*_figure` functions return the figure so it can
be checked without reading a PNG. Must not touch Spark, sockets, server/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

THROUGHPUT_METRICS = ("put", "taken", "acked", "released", "expired")
DENSE_LIMIT = 20_000  # buckets without events are drawn as zeros up to this many points
HISTOGRAM_BINS = 40
# A histogram of identical waits gets one bin this fraction of the value wide...
SINGLE_BIN_FRACTION = 0.1
MIN_BIN_SECONDS = 0.001  # ...and never narrower than this
PANEL_HEIGHT = 2.2  # inches per throughput panel


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=100)
    _pyplot().close(fig)


def histogram_layout(low: float, high: float, bins: int = HISTOGRAM_BINS) -> tuple[float, float]:
    """(start of the first bin, bin width) for `bins` equal bins over [low, high].

    When every value is the same there is no range to divide: one bin centred on
    the value, sized from it, so a lone 7.74 s wait is drawn around 7.74 s.
    """
    if high > low:
        return low, (high - low) / bins
    width = max(abs(low) * SINGLE_BIN_FRACTION, MIN_BIN_SECONDS)
    return low - width / 2, width


def throughput_figure(buckets: list[dict[str, Any]], bucket_seconds: float) -> Any:
    """One panel per metric that has events, each with its own y scale, one line per
    tube, sharing the time axis: a bulk load puts thousands of tasks a second while
    workers take a few, and on one shared scale the take and ack lines lie flat on
    zero beside put."""
    plt = _pyplot()
    metrics = [m for m in THROUGHPUT_METRICS if any(b[m] for b in buckets)]
    fig, axes = plt.subplots(
        max(len(metrics), 1), 1, sharex=True, squeeze=False,
        figsize=(10, 1 + PANEL_HEIGHT * max(len(metrics), 1)),
    )  # fmt: skip
    panels = [row[0] for row in axes]
    origin = min((b["bucket_ts"] for b in buckets), default=0.0)
    end = max((b["bucket_ts"] for b in buckets), default=0.0)
    steps = round((end - origin) / bucket_seconds) + 1
    dense = steps <= DENSE_LIMIT
    style = {"drawstyle": "steps-post"} if dense else {"marker": ".", "linestyle": ""}
    tubes = sorted({b["tube"] for b in buckets})
    for ax, metric in zip(panels, metrics, strict=False):
        for tube in tubes:
            rows = {
                round((b["bucket_ts"] - origin) / bucket_seconds): b
                for b in buckets
                if b["tube"] == tube
            }
            slots = range(steps) if dense else sorted(rows)
            ys = [rows[s][metric] / bucket_seconds if s in rows else 0.0 for s in slots]
            ax.plot([slot * bucket_seconds for slot in slots], ys, label=tube, **style)
        ax.set_ylabel(f"{metric} / s")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="upper right")
    if not metrics:
        panels[0].text(0.5, 0.5, "no task events", ha="center", transform=panels[0].transAxes)
    panels[-1].set_xlabel(f"seconds since first bucket (bucket = {bucket_seconds:g} s)")
    panels[0].set_title("queuebox throughput (events per second)")
    fig.tight_layout()
    return fig


def throughput(buckets: list[dict[str, Any]], bucket_seconds: float, path: Path) -> None:
    _save(throughput_figure(buckets, bucket_seconds), path)


def wait_figure(histogram: dict[str, list[tuple[float, int]]], width: float) -> Any:
    """Bars of task counts by wait time (put -> first take), one series per tube;
    `histogram` maps tube -> (bin centre, count), bins `width` seconds wide."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    for tube, bins in sorted(histogram.items()):
        ax.bar(
            [centre for centre, _ in bins],
            [count for _, count in bins],
            width=width,
            align="center",
            alpha=0.6,
            label=tube,
        )
    ax.set_xlabel("wait time, put -> first take (s)")
    ax.set_ylabel("tasks")
    ax.set_title("queuebox wait-time distribution")
    centres = [centre for bins in histogram.values() for centre, _ in bins]
    if centres:
        # A bin's width of room on each side: a lone bar reads as a bar at its
        # value instead of a block filling the whole plot.
        ax.set_xlim(min(centres) - 1.5 * width, max(centres) + 1.5 * width)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no task was taken", ha="center", transform=ax.transAxes)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def wait_histogram(histogram: dict[str, list[tuple[float, int]]], width: float, path: Path) -> None:
    _save(wait_figure(histogram, width), path)
