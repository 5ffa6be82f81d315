"""Every option of every `queuebox` command explains itself: help text, its default, its
choices; `--version` prints the version; a bad value is one line and exit status 2.

The parsers are the ones the commands really build: each command runs with its
parse_args swapped for one that hands the parser back, so no command needs to
expose its parser and none can be left out.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuebox import __version__, cli
from queuebox.compiled import build_label

REPO = Path(__file__).resolve().parents[2]
FLAG_ONLY = (
    argparse._HelpAction,
    argparse._VersionAction,
    argparse._StoreTrueAction,
    argparse._StoreConstAction,
    argparse.BooleanOptionalAction,
)


class Built(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def parser_of(command: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    def hand_back(self: argparse.ArgumentParser, *args: object) -> None:
        raise Built(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", hand_back)
    with pytest.raises(Built) as built:
        cli.COMMANDS[command][0]()([], prog=f"queuebox {command}")
    return built.value.parser


def walk(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.ArgumentParser, object]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from walk(sub)
        else:
            yield parser, action


def rendered(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return parser._get_formatter()._expand_help(action)  # what --help prints for it


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_option_has_help_with_its_default_and_choices(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = parser_of(command, monkeypatch)
    problems, checked = [], 0
    for owner, action in walk(parser):
        assert isinstance(action, argparse.Action)
        name = "/".join(action.option_strings) or action.dest
        checked += 1
        if not action.help:
            problems.append(f"{name} has no help")
            continue
        text = rendered(owner, action)
        if action.choices and not isinstance(action.choices, dict):
            shown = text + owner.format_usage()
            if not all(str(c) in shown for c in action.choices):
                problems.append(f"{name} does not show its choices")
        takes_value = action.option_strings and not isinstance(action, FLAG_ONLY)
        if takes_value and not action.required and "default" not in text:
            problems.append(f"{name} does not say its default: {text!r}")
    assert checked >= 3
    assert not problems, f"{command}: " + "\n".join(problems)


def test_serve_names_defaults_and_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = parser_of("serve", monkeypatch)
    helps = {a.option_strings[0]: rendered(parser, a) for a in parser._actions}
    assert "default 16M" in helps["--max-frame"]
    assert "one of none, write, fsync" in helps["--wal-mode"]
    assert "default write" in helps["--wal-mode"]
    assert "env QUEUEBOX_METRICS_LISTEN" in helps["--metrics-listen"]


def queuebox(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuebox", *args], cwd=REPO, capture_output=True, text=True,
        timeout=60, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_version() -> None:
    # The build ("pure Python" or "compiled: N modules") is tests/unit/test_compiled_build.py's.
    build = build_label()
    done = queuebox("--version")
    assert (done.returncode, done.stdout) == (0, f"queuebox {__version__} ({build})\n")
    serve = queuebox("serve", "--version")
    assert (serve.returncode, serve.stdout) == (0, f"queuebox serve {__version__} ({build})\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["serve", "--max-frame", "16q"],
            "queuebox serve: --max-frame: expected an integer (like 16M), got '16q'",
        ),
        (
            ["serve", "--shutdown-grace-s", "soon"],
            "queuebox serve: --shutdown-grace-s: expected a number of seconds (like 2.5), "
            "got 'soon'",
        ),
        (
            ["serve", "--wal-mode", "sometimes"],
            "queuebox serve: --wal-mode: expected one of none, write, fsync, got 'sometimes'",
        ),
        (
            ["take", "jobs", "--timeout", "-1"],
            "queuebox take: --timeout: expected a number of seconds >= 0, got '-1' "
            "(see queuebox take --help)",
        ),
        (
            ["ping", "--port", "http"],
            "queuebox ping: --port: expected a port number 1-65535, got 'http' "
            "(see queuebox ping --help)",
        ),
        (
            ["bench", "put", "--producers", "0"],
            "queuebox bench: --producers: expected an integer >= 1, got '0' "
            "(see queuebox bench --help)",
        ),
    ],
)
def test_a_bad_value_is_one_line(args: list[str], message: str) -> None:
    done = queuebox(*args)
    assert done.returncode == 2
    assert done.stderr == message + "\n"
    assert done.stdout == ""
