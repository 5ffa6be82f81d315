"""What a benchmark run tells its reader: the JSON document, the terminal tables, progress.

Owns: the shape of the JSON result (`phase_doc`, `environment`), the human
tables (`render`), the comparison table (`render_ratios`) and `Progress`, the
bar on stderr (tqdm, the `bench` extra: rate, time left, terminal width, for
free; `progress_available` says whether it is installed). Must not run
anything or talk to a server.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from typing import Any, TextIO

from ..cli.tables import markdown_table, table
from .cpu import percent
from .histogram import PERCENTILES
from .runner import PhaseResult

SATURATED_PCT = 90.0  # a process above this share of one core is the bottleneck
MEMORY_METRIC = "bytes/task"  # the headline metric of memory per queued task


def environment() -> dict[str, Any]:
    """Where the numbers were measured."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as stream:
            for line in stream:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        # The machine may be shared: the load when the run started says how much.
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def phase_doc(result: PhaseResult) -> dict[str, Any]:
    wall = result.wall_s
    counts = result.counts
    return {
        "name": result.name,
        "wall_s": round(wall, 4),
        "counts": counts,
        "rates_per_s": {
            "put": round(counts["put"] / wall, 1),
            "taken": round(counts["taken"] / wall, 1),
            "acked": round(counts["acked"] / wall, 1),
        },
        # Operations per second of server CPU: what one fully busy server core
        # would do. Unlike the rates above it barely moves when other programs
        # share the machine, so runs on a busy box still compare.
        "per_server_cpu_s": _per_cpu(counts, result.server_cpu_s),
        "server_us_per_op": _us_per(result.server_cpu_s, counts["acked"] or counts["put"]),
        "server_us_per_request": _us_per(result.server_cpu_s, _requests(counts)),
        "server_memory": _memory(result),
        "latency_us": {op: h.summary_us() for op, h in result.latency.items() if h.count},
        "latency_histograms": {op: h.to_json() for op, h in result.latency.items() if h.count},
        "timeline_per_s": result.timeline,
        "cpu": {
            "client_s": result.client_cpu_s,
            "client_pct": percent(result.client_cpu_s, wall),
            "client_busiest_process_pct": percent(result.client_cpu_max_s, wall),
            "server_s": result.server_cpu_s,
            "server_pct": percent(result.server_cpu_s, wall),
            "server_timeline_pct": result.server_cpu_timeline,
        },
        "processes": result.processes,
        "connections": result.connections,
        "errors": result.errors,
        "timed_out": result.timed_out,
    }


def _requests(counts: dict[str, int]) -> int:
    """Requests a phase sent: puts, takes (with or without a task), acks, failed ones."""
    return sum(counts[key] for key in ("put", "taken", "empty", "acked", "errors"))


def _us_per(cpu_s: float | None, n: int) -> float | None:
    return None if not cpu_s or not n else round(cpu_s * 1e6 / n, 2)


def _memory(result: PhaseResult) -> dict[str, Any]:
    """Server RSS around the phase; per task only for a phase that leaves its tasks
    queued (puts, nothing taken): its growth is what those tasks cost."""
    start, end, put = result.server_rss_start, result.server_rss_end, result.counts["put"]
    per_task = None
    if start is not None and end is not None and put and not result.counts["taken"]:
        per_task = round((end - start) / put, 1)
    return {"rss_start": start, "rss_end": end, "bytes_per_task": per_task}


def _per_cpu(counts: dict[str, int], cpu_s: float | None) -> dict[str, float] | None:
    if not cpu_s:
        return None
    return {key: round(counts[key] / cpu_s, 1) for key in ("put", "taken", "acked")}


def _rate(phase: dict[str, Any]) -> str:
    rates = phase["rates_per_s"]
    parts = [f"{name} {rates[name]:,.0f}/s" for name in ("put", "acked") if rates[name]]
    return ", ".join(parts) or "-"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _bottleneck(cpu: dict[str, Any]) -> str:
    notes = []
    if (cpu["server_pct"] or 0) >= SATURATED_PCT:
        notes.append("server saturated")
    if (cpu["client_busiest_process_pct"] or 0) >= SATURATED_PCT:
        notes.append("client saturated")
    return ", ".join(notes)


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


PHASE_HEADER = (
    "phase", "wall s", "put", "taken", "acked", "errors", "rate", "client", "server",
    "srv us/op", "us/req", "B/task", "note",
)  # fmt: skip
PHASE_TEXT = frozenset({6, 12})  # rate, note: words, left-aligned


def render(doc: dict[str, Any]) -> str:
    """The run as two tables: phases (time, counts, rate, CPU) and latencies."""
    params = doc["params"]
    lines = [
        f"queuebox bench {doc['scenario']} -> {doc['target']}  "
        f"({params['processes']} process(es), window {params['window']}, "
        f"payload {params['payload_size']} B, tube {doc['tube']})",
        "",
        table(PHASE_HEADER, [_phase_row(phase) for phase in doc["phases"]], None, PHASE_TEXT),
        "",
        table(*_latency_table(doc["phases"]), None, frozenset({1})),
    ]
    for phase in doc["phases"]:
        for message, n in phase["errors"].items():
            lines.append(f"error in {phase['name']}: {message} (x{n})")
    lines.append("")
    lines.append(
        "client/server: CPU of the busiest client process / of the server (--server-pid), "
        "% of one core; srv us/op: server CPU per put, or per take+ack pair; us/req: "
        "per request; B/task: server RSS growth per task left queued"
    )
    return "\n".join(lines)


def _phase_row(phase: dict[str, Any]) -> list[str]:
    c, cpu = phase["counts"], phase["cpu"]
    notes = [_bottleneck(cpu), "TIMED OUT" if phase["timed_out"] else ""]
    return [
        phase["name"], f"{phase['wall_s']:.2f}", str(c["put"]), str(c["taken"]),
        str(c["acked"]), str(c["errors"]), _rate(phase),
        _pct(cpu["client_busiest_process_pct"]), _pct(cpu["server_pct"]),
        _num(phase["server_us_per_op"], ".1f"), _num(phase["server_us_per_request"], ".1f"),
        _num(phase["server_memory"]["bytes_per_task"], ".0f"),
        "  ".join(note for note in notes if note),
    ]  # fmt: skip


def _latency_table(phases: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["latency ms", "op", "count", *(f"p{p:g}" for p in PERCENTILES), "max"]
    rows = []
    for phase in phases:
        for op, summary in phase["latency_us"].items():
            rows.append(
                [
                    phase["name"],
                    "put->taken" if op == "e2e" else op,
                    str(summary["count"]),
                    *(f"{summary[f'p{p:g}_us'] / 1000:.3f}" for p in PERCENTILES),
                    f"{summary['max_us'] / 1000:.3f}",
                ]
            )
    return header, rows


def headline(doc: dict[str, Any]) -> dict[str, float]:
    """The numbers a comparison divides: per phase, wall time, rates, server CPU
    and memory (when the server's pid was given) and latencies."""
    out: dict[str, float] = {}
    for phase in doc["phases"]:
        name = phase["name"]
        out[f"{name} wall s"] = phase["wall_s"]
        for counter, rate in phase["rates_per_s"].items():
            if rate:
                out[f"{name} {counter}/s"] = rate
        optional = {
            f"srv us/{'pair' if phase['counts']['acked'] else 'put'}": phase["server_us_per_op"],
            "srv us/req": phase["server_us_per_request"],
            MEMORY_METRIC: phase["server_memory"]["bytes_per_task"],
        }
        for metric, value in optional.items():
            if value is not None:
                out[f"{name} {metric}"] = value
        for op, summary in phase["latency_us"].items():
            out[f"{name} {op} p50 us"] = summary["p50_us"]
            out[f"{name} {op} p99 us"] = summary["p99_us"]
    return out


def render_ratios(a: str, b: str, ratios: dict[str, dict[str, float | None]]) -> str:
    rows = [
        [metric, _num(row["a"], ",.1f"), _num(row["b"], ",.1f"), _num(row["ratio"], ".2f")]
        for metric, row in ratios.items()
    ]
    return table(["metric", "A " + a, "B " + b, "B/A"], rows, None)


def progress_available() -> bool:
    """Whether the progress bars can be drawn: tqdm comes with `queuebox[bench]`."""
    return importlib.util.find_spec("tqdm") is not None


class Progress:
    """One tqdm bar per phase on stderr: count, percentage and time left when the
    phase has a goal (tasks to put or to ack), a running count and rate otherwise."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.goal: tuple[str, int] | None = None
        self._bar: Any = None

    def start(self, phase: str, goal: tuple[str, int] | None) -> None:
        from tqdm import tqdm  # the bench extra; main() checked it is there

        self.finish()
        self.goal = goal
        self._bar = tqdm(
            total=goal[1] if goal else None,
            desc=f"{phase:<9}",
            unit=" ops",
            unit_scale=True,
            file=self.stream,
            leave=False,  # the table printed after the run says it all
            dynamic_ncols=True,
            mininterval=0.2,
        )

    def __call__(self, totals: dict[str, int], elapsed: float) -> None:
        if self._bar is None:
            return
        done = totals[self.goal[0]] if self.goal else (totals["acked"] or totals["put"])
        self._bar.set_postfix(errors=totals["errors"], refresh=False)
        self._bar.update(done - self._bar.n)  # update(), not n=: keeps the rate estimate

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def render_suite(doc: dict[str, Any]) -> str:
    """`queuebox bench --compare` as one Markdown table: each metric's mean over the
    rounds on both servers, their ratio, issue 26's goal and whether it is met."""
    servers, where = doc["servers"], doc["environment"]
    lines = [
        f"A: {servers.get('queuebox', 'queuebox')}; B: {servers.get('reference', 'reference')}; "
        f"{doc['options']['rounds']} round(s) A B, each on fresh servers; "
        f"{where['nproc']} CPUs ({where['cpu_model']}), load {where['loadavg_1m']} at the start",
        "",
    ]
    rows = [
        [
            metric,
            _value(row["queuebox"]),
            _value(row["reference"]),
            _num(row["ratio"], ".2f"),
            row["goal"] or "-",
            {True: "yes", False: "no", None: "-"}[row["met"]],
        ]
        for metric, row in doc["metrics"].items()
    ]
    header = ["metric", "queuebox", "Tarantool + queue", "queuebox / Tarantool", "goal", "met"]
    lines += markdown_table(header, rows, right=frozenset({1, 2, 3}))
    return "\n".join(lines)


def _value(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
