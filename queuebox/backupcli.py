"""`queuebox backup DEST` and `queuebox restore SRC --data-dir DIR`: their command lines.

Owns: the arguments and what the two commands print. It lives in the
umbrella package, as cli.py does, because it reaches both sides: the
connection options every client command shares (clients/cli/args.py:
--host/--port/--user/--password-file and their QUEUEBOX_* defaults) and the
server's replication link and storage's readers and writers, which clients
may not import (DESIGN.md). The work itself is server/start/backup.py
(fetching) and storage/restore.py (rebuilding); nothing of it is here.

Exit codes, as every client command's: 0 done (checksums verified), 1 a fault
found (the file and offset, or the LSNs, are named) or a point not reached, 2
usage, 3 unreachable, 6 refused (the login, the `replication` right).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from queuebox.clients.cli.args import (
    ArgumentParser,
    add_connection_arguments,
    positive_int,
    seconds,
)
from queuebox.server.replication.link import LinkError, LoginRefused
from queuebox.server.start.backup import BackupError, Refused, Target, take_backup
from queuebox.storage.backupset import MANIFEST, SetFacts, verify
from queuebox.storage.errors import EngineError
from queuebox.storage.restore import Restored, restore

EXIT_OK, EXIT_ERROR, EXIT_UNREACHABLE, EXIT_REFUSED = 0, 1, 3, 6  # as clients/cli/output.py


def when(ts: float | None) -> str:
    if ts is None:
        return "unknown time"
    stamp = datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")
    return stamp.replace("+00:00", "Z")


def point_in_time(text: str) -> float:
    """A time as ISO 8601 (UTC unless it says otherwise) or seconds since the epoch."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected ISO 8601 (2026-11-29T05:30:00Z) or seconds since the epoch, got {text!r}"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _fail(prog: str, as_json: bool, code: int, message: str) -> int:
    if as_json:
        print(json.dumps({"error": message, "exit": code}), file=sys.stderr)
    else:
        print(f"{prog}: {message}", file=sys.stderr)
    return code


def _show(as_json: bool, summary: dict[str, Any], lines: list[str]) -> None:
    print(json.dumps(summary) if as_json else "\n".join(lines))


def backup_main(argv: list[str], prog: str = "queuebox backup") -> int:
    parser = ArgumentParser(
        prog=prog,
        description="Copy a running server's newest snapshot and the WAL after it into "
        "DEST, without stopping writes, and check every file. The user needs the "
        "`replication` right (docs/rights.md).",
    )
    parser.add_argument("dest", metavar="DEST", help="a new or empty directory")
    add_connection_arguments(parser)
    parser.add_argument("--timeout", type=seconds, default=30.0, help="seconds of silence")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    target = Target(
        args.host, args.port, args.user or "", args.password or "", args.timeout, args.tls
    )
    dest = Path(args.dest)
    t0 = time.monotonic()
    try:
        facts = take_backup(target, dest)
    except LinkError as e:
        refused = isinstance(e, LoginRefused)
        return _fail(prog, args.json, EXIT_REFUSED if refused else EXIT_UNREACHABLE, str(e))
    except Refused as e:
        return _fail(prog, args.json, EXIT_REFUSED, str(e))
    except (BackupError, EngineError, OSError) as e:
        return _fail(prog, args.json, EXIT_ERROR, str(e))
    _show(
        args.json,
        _backup_summary(facts, dest, time.monotonic() - t0),
        _set_lines(
            facts, f"backup of {target.host}:{target.port} in {dest}", f"; {MANIFEST} written"
        ),
    )
    return EXIT_OK


def _files(facts: SetFacts) -> list[dict[str, Any]]:
    out = []
    if facts.snapshot is not None:
        snap = facts.snapshot
        out.append(
            {
                "name": snap.path.name,
                "kind": "snapshot",
                "lsn": snap.lsn,
                "bytes": snap.size,
                "spaces": snap.spaces,
                "tuples": snap.tuples,
            }
        )
    for path in facts.segments:
        out.append({"name": path.name, "kind": "wal", "bytes": path.stat().st_size})
    return out


def _backup_summary(facts: SetFacts, dest: Path, took_s: float) -> dict[str, Any]:
    return {
        "dest": str(dest),
        "snapshot_lsn": facts.base_lsn,
        "first_wal_lsn": facts.first_lsn or None,
        "last_lsn": facts.last_lsn,
        "last_time": when(facts.last_ts) if facts.last_ts else None,
        "wal_records": facts.records,
        "files": _files(facts),
        "bytes": facts.size,
        "seconds": round(took_s, 3),
        "verified": True,
    }


def _set_lines(facts: SetFacts, title: str, done: str = "") -> list[str]:
    lines = [title]
    for f in _files(facts):
        what = (
            f"snapshot at LSN {f['lsn']}: {f['spaces']} spaces, {f['tuples']} tuples"
            if f["kind"] == "snapshot"
            else f"WAL from LSN {int(f['name'].split('.')[0])}"
        )
        lines.append(f"  {f['name']}  {what}  {f['bytes']:,} bytes")
    wal = (
        f"WAL {facts.first_lsn}..{facts.last_lsn} ({facts.records} records)"
        if facts.records
        else "no WAL after it"
    )
    lines.append(
        f"LSN {facts.base_lsn}..{facts.last_lsn}: snapshot {facts.base_lsn}, {wal}; "
        f"{len(_files(facts))} files, {facts.size:,} bytes; last change {when(facts.last_ts)}"
    )
    lines.append("checksums verified" + done)
    return lines


def restore_main(argv: list[str], prog: str = "queuebox restore") -> int:
    parser = ArgumentParser(
        prog=prog,
        description="Rebuild a data directory from a backup (and a WAL archive) up to a "
        "point; every file is checked as it is read.",
    )
    parser.add_argument("src", metavar="SRC", help="a directory made by `queuebox backup`")
    parser.add_argument(
        "--data-dir",
        help="the new data directory (new or empty; default: none, needed unless --check)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=f"only read SRC whole and check it (every checksum, the LSNs, {MANIFEST}); "
        "write nothing",
    )
    point = parser.add_mutually_exclusive_group()
    point.add_argument(
        "--to-lsn",
        type=positive_int,
        help="the last LSN to keep (default: every LSN the files hold)",
    )
    point.add_argument(
        "--to-time",
        type=point_in_time,
        help="keep changes made at or before this time (default: every change)",
    )
    parser.add_argument(
        "--wal-archive",
        action="append",
        default=[],
        metavar="DIR",
        help="a wal_archive_dir of the server, for the WAL after the backup; repeatable "
        "(default: none, the backup alone)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    if args.check:
        return _check(args, prog)
    if not args.data_dir:
        parser.error("--data-dir is required (or --check)")
    try:
        done = restore(
            Path(args.src),
            Path(args.data_dir),
            to_lsn=args.to_lsn,
            to_time=args.to_time,
            archives=tuple(Path(a) for a in args.wal_archive),
        )
    except (EngineError, OSError) as e:
        return _fail(prog, args.json, EXIT_ERROR, str(e))
    _show(args.json, _restore_summary(done, args.data_dir), _restore_lines(done, args))
    return EXIT_OK


def _restore_summary(done: Restored, data_dir: str) -> dict[str, Any]:
    return {
        "data_dir": data_dir,
        "snapshot_lsn": done.base_lsn,
        "last_lsn": done.last_lsn,
        "last_time": when(done.last_ts) if done.last_ts else None,
        "wal_records": done.records,
        "files": [p.name for p in done.files],
        "bytes": done.size,
        "spaces": done.report.spaces,
        "tuples": done.report.tuples,
        "verified": True,
    }


def _restore_lines(done: Restored, args: argparse.Namespace) -> list[str]:
    point = f"LSN {done.last_lsn} ({when(done.last_ts)})"
    lines = [f"restored {args.src} into {args.data_dir}, up to {point}"]
    lines += [f"  {p.name}  {p.stat().st_size:,} bytes" for p in done.files]
    lines.append(
        f"snapshot at LSN {done.base_lsn}, then {done.records} WAL records; {done.size:,} bytes; "
        f"checksums verified; it opens: {done.report.spaces} spaces, {done.report.tuples} tuples"
    )
    return lines


def _check(args: argparse.Namespace, prog: str) -> int:
    try:
        facts = verify(Path(args.src))
    except (EngineError, OSError) as e:
        return _fail(prog, args.json, EXIT_ERROR, str(e))
    _show(args.json, _backup_summary(facts, Path(args.src), 0.0), _set_lines(facts, f"{args.src}:"))
    return EXIT_OK
