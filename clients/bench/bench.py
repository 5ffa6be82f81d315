"""One scenario against one server, start to finish, as a JSON-able document.

Owns: `run_scenario` (prepare the tube over a control connection, run the
scenario's phases, read the server's statistics of the tube, drop it) and
`compare` (the same scenario against two servers, alternately, with the
ratio of every headline number). Must not parse arguments or print.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from .api import ApiSpec
from .conn import open_connection
from .report import MEMORY_METRIC, Progress, environment, headline, phase_doc
from .runner import run_phase
from .scenarios import SCENARIOS, Options, Target, effective_options


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C during a run, after the run's tube was dropped (unless kept)."""

    def __init__(self, tube: str, dropped: bool) -> None:
        super().__init__(tube)
        self.tube = tube
        self.dropped = dropped


async def with_control(target: Target, work: Any) -> Any:
    conn = await open_connection(target.host, target.port, target.user, target.password)
    try:
        return await work(conn)
    finally:
        conn.close()


def _prepare(target: Target, api: ApiSpec) -> None:
    asyncio.run(with_control(target, api.setup))


def _finish(target: Target, api: ApiSpec, keep: bool) -> Any:
    async def work(conn: Any) -> Any:
        stats = await api.statistics(conn)
        if not keep:
            await api.cleanup(conn)
        return stats

    return asyncio.run(with_control(target, work))


def run_scenario(
    scenario: str,
    opts: Options,
    target: Target,
    *,
    progress: Progress | None = None,
    keep: bool = False,
    label: str | None = None,
) -> dict[str, Any]:
    opts = effective_options(scenario, opts)
    api, phases = SCENARIOS[scenario](opts)
    where = environment()  # before the run: its load average is the machine's, not ours
    _prepare(target, api)
    phase_docs = []
    try:
        for phase in phases:
            if progress is not None:
                progress.start(phase.name, phase.goal)
            result = run_phase(
                phase.name, phase.specs(target, api, opts.max_time), target.server_pid, progress
            )
            if progress is not None:
                progress.finish()
            phase_docs.append(phase_doc(result))
    except KeyboardInterrupt:
        if progress is not None:
            progress.finish()
        if not keep:
            asyncio.run(with_control(target, api.abandon))
        raise Interrupted(api.tube, dropped=not keep) from None
    server_stats = _finish(target, api, keep)
    counts = {key: sum(p["counts"][key] for p in phase_docs) for key in phase_docs[0]["counts"]}
    return {
        "scenario": scenario,
        "target": target.address,
        "tube": api.tube,
        "api": api.flavour,
        "label": label,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "params": dataclasses.asdict(opts),
        "environment": where,
        "server_pid": target.server_pid,
        "phases": phase_docs,
        "counts": counts,
        "server_stats": server_stats,
        "complete": not any(p["timed_out"] for p in phase_docs) and counts["errors"] == 0,
    }


def compare(
    scenario: str,
    opts: Options,
    a: Target,
    b: Target,
    rounds: int,
    *,
    progress: Progress | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """Run A, B, A, B, ... (`rounds` each) so slow drift of the machine hits both."""
    runs: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    for _ in range(rounds):
        for key, target in (("a", a), ("b", b)):
            runs[key].append(run_scenario(scenario, opts, target, progress=progress, label=label))
    mean_a, mean_b = _mean_headline(runs["a"]), _mean_headline(runs["b"])
    # A metric only one side has (its server pid was given, say) keeps its row.
    metrics = [*mean_a, *(metric for metric in mean_b if metric not in mean_a)]
    ratios = {metric: _ratio(mean_a.get(metric), mean_b.get(metric)) for metric in metrics}
    return {
        "scenario": scenario,
        "compare": {"a": a.address, "b": b.address, "rounds": rounds},
        "runs": runs,
        "ratios": ratios,
        "complete": all(run["complete"] for side in runs.values() for run in side),
    }


def _ratio(a: float | None, b: float | None) -> dict[str, float | None]:
    return {"a": a, "b": b, "ratio": round(b / a, 3) if a and b is not None else None}


def _mean_headline(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Each metric averaged over the runs that have it; memory per task from the
    first run only: later rounds reuse the pages the first one's tasks touched
    (freed when its tube was dropped), so their RSS barely grows."""
    numbers = [headline(run) for run in runs]
    keys = dict.fromkeys(key for n in numbers for key in n)
    means = {}
    for key in keys:
        values = [n[key] for n in numbers if key in n]
        if key.endswith(MEMORY_METRIC):
            values = values[:1]
        means[key] = round(sum(values) / len(values), 3)
    return means
