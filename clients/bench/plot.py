"""A PNG of a benchmark result: throughput over time, CPU, latency percentiles.

Owns: `plot(doc, path)`. matplotlib is the optional extra `plot`; it is
imported here, only when a plot is asked for, and its absence becomes
`PlotUnavailable` with the command that installs it. Must not run anything:
it draws a finished result (a single run, or the first runs of a comparison).
"""

from __future__ import annotations

from typing import Any

from .histogram import PERCENTILES


class PlotUnavailable(Exception):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable(
            "--plot needs matplotlib: pip install 'queuebox[plot]' (or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def _runs(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if "runs" in doc:
        return [(f"{side} {doc['compare'][side]}", doc["runs"][side][0]) for side in ("a", "b")]
    return [(doc["target"], doc)]


def plot(doc: dict[str, Any], path: str) -> None:
    plt = _pyplot()
    runs = _runs(doc)
    fig, (ax_rate, ax_cpu, ax_lat) = plt.subplots(3, 1, figsize=(9, 10))
    for name, run in runs:
        offset = 0
        for phase in run["phases"]:
            for counter in ("put", "acked"):
                series = phase["timeline_per_s"].get(counter) or []
                if any(series):
                    xs = [offset + i for i in range(len(series))]
                    ax_rate.plot(xs, series, label=f"{name} {phase['name']} {counter}")
            server = phase["cpu"]["server_timeline_pct"]
            if server:
                ax_cpu.plot(
                    [offset + i for i in range(len(server))],
                    server,
                    label=f"{name} {phase['name']} server",
                )
            offset += max(len(s) for s in phase["timeline_per_s"].values()) or 1
    ax_rate.set(title=f"queuebox bench {doc['scenario']}", xlabel="second", ylabel="ops/s")
    ax_cpu.set(xlabel="second", ylabel="server CPU, % of a core")
    labels, rows = [], []
    for name, run in runs:
        for phase in run["phases"]:
            for op, summary in phase["latency_us"].items():
                labels.append(f"{name}\n{phase['name']} {op}")
                rows.append(
                    [summary[f"p{p:g}_us"] / 1000 for p in PERCENTILES] + [summary["max_us"] / 1000]
                )
    width = 0.8 / max(len(rows), 1)
    ticks = [f"p{p:g}" for p in PERCENTILES] + ["max"]
    for i, (label, row) in enumerate(zip(labels, rows, strict=True)):
        ax_lat.bar([x + i * width for x in range(len(ticks))], row, width, label=label)
    ax_lat.set_xticks([x + 0.4 - width / 2 for x in range(len(ticks))], ticks)
    ax_lat.set(ylabel="latency, ms", yscale="log")
    for ax in (ax_rate, ax_cpu, ax_lat):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
