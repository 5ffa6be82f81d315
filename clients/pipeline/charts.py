"""PNG charts of a lifecycle report, drawn with matplotlib (headless, Agg backend).

Owns: `throughput` (events per second over time, per tube and metric) and
`wait_histogram` (distribution of put -> first take, per tube). Inputs are plain
Python rows already collected from Spark. Must not touch Spark, sockets, server/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

THROUGHPUT_METRICS = ("put", "taken", "acked", "released", "expired")
DENSE_LIMIT = 20_000  # buckets without events are drawn as zeros up to this many points


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def throughput(buckets: list[dict[str, Any]], bucket_seconds: float, path: Path) -> None:
    """One line per (tube, metric): events per second in each bucket."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    origin = min((b["bucket_ts"] for b in buckets), default=0.0)
    end = max((b["bucket_ts"] for b in buckets), default=0.0)
    steps = round((end - origin) / bucket_seconds) + 1
    dense = steps <= DENSE_LIMIT
    for tube in sorted({b["tube"] for b in buckets}):
        rows = {
            round((b["bucket_ts"] - origin) / bucket_seconds): b
            for b in buckets
            if b["tube"] == tube
        }
        slots = range(steps) if dense else sorted(rows)
        xs = [slot * bucket_seconds for slot in slots]
        for metric in THROUGHPUT_METRICS:
            ys = [rows[s][metric] / bucket_seconds if s in rows else 0.0 for s in slots]
            if any(ys):
                style = {"drawstyle": "steps-post"} if dense else {"marker": ".", "linestyle": ""}
                ax.plot(xs, ys, label=f"{tube}: {metric}", **style)
    ax.set_xlabel(f"seconds since first bucket (bucket = {bucket_seconds:g} s)")
    ax.set_ylabel("events per second")
    ax.set_title("queuebox throughput")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def wait_histogram(histogram: dict[str, list[tuple[float, int]]], width: float, path: Path) -> None:
    """Bars of task counts by wait time (put -> first take), one series per tube;
    `histogram` maps tube -> (bin start, count), bins `width` seconds wide."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    for tube, bins in sorted(histogram.items()):
        ax.bar(
            [start for start, _ in bins],
            [count for _, count in bins],
            width=width,
            align="edge",
            alpha=0.6,
            label=tube,
        )
    ax.set_xlabel("wait time, put -> first take (s)")
    ax.set_ylabel("tasks")
    ax.set_title("queuebox wait-time distribution")
    if histogram:
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no task was taken", ha="center", transform=ax.transAxes)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
