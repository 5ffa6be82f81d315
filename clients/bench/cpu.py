"""CPU time of the server and of the load generator, and the server's memory.

Owns: reading a process's user+system CPU seconds from /proc/<pid>/stat (the
server, when `--server-pid` is given; every thread of it is included), its
resident memory from /proc/<pid>/statm, and the calling process's own CPU
time. psutil is not a dependency, so this reads the Linux files directly and
answers None where it cannot. Must not decide what the numbers mean; the
report does that.
"""

from __future__ import annotations

import os
import time

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of `pid` in seconds, or None if it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            text = stream.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after
    # the last ')'. utime and stime are fields 14 and 15 of the file.
    fields = text[text.rfind(b")") + 2 :].split()
    try:
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (IndexError, ValueError):
        return None


def process_rss_bytes(pid: int) -> int | None:
    """Resident memory of `pid` in bytes, or None if it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as stream:
            fields = stream.read().split()
    except OSError:
        return None
    # statm counts pages: size, resident, shared, ...
    try:
        return int(fields[1]) * _PAGE
    except (IndexError, ValueError):
        return None


def own_cpu_seconds() -> float:
    """CPU seconds (user + system) the calling process has used so far."""
    return time.process_time()


def percent(cpu_seconds: float | None, wall_seconds: float) -> float | None:
    """CPU use as a percentage of one core over `wall_seconds` (200 = two cores)."""
    if cpu_seconds is None or wall_seconds <= 0:
        return None
    return round(100.0 * cpu_seconds / wall_seconds, 1)


def machine_busy_seconds() -> float | None:
    """CPU seconds every core of this machine spent not idle since boot (all
    processes, ours and others'; from /proc/stat), or None where unreadable."""
    try:
        with open("/proc/stat", "rb") as stream:
            fields = stream.readline().split()
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal ...: idle and iowait are idle.
    try:
        ticks = [int(x) for x in fields[1:9]]
    except ValueError:
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICKS


def run_queue_seconds(pid: int | str) -> float | None:
    """Seconds the threads of `pid` ("self" for this process) spent runnable but
    waiting for a core (/proc/PID/task/*/schedstat, its second field), or None
    where unreadable (no schedstats)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    waited = 0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as stream:
                waited += int(stream.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return waited / 1e9
