"""What every client-side command line shares: where to connect, how help and errors look.

Owns: `add_connection_arguments` (one convention for every command that
connects: --host/--port/--user/--password-file, defaulting to QUEUEBOX_HOST,
QUEUEBOX_PORT, QUEUEBOX_USER, QUEUEBOX_PASSWORD (or QUEUEBOX_PASSWORD_FILE), else
the host:port of QUEUEBOX_LISTEN, else 127.0.0.1:3301), `add_password_arguments`
(a password from a file or the environment; --password still works but warns
that `ps` shows it to every user of the machine), `add_failover_arguments`
(--address, repeatable, defaulting to QUEUEBOX_ADDRESSES, for a primary +
replicas set), the TLS options of a connection (--tls, --tls-ca, --tls-cert,
--tls-key, defaulting to QUEUEBOX_CLIENT_TLS*: not the server's QUEUEBOX_TLS_*,
which name the server's own certificate), `ArgumentParser` (help shows each
option's default; a bad value is one line `PROG: --flag: what was expected` and
exit status 2; it turns the TLS options into `args.tls`, an SSLContext or None),
and the value parsers that say what they expected. Must not connect anywhere or
import server/.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from queuebox.clients.failover import parse_addresses
from queuebox.clients.iproto import parse_address
from queuebox.clients.tls import tls_context
from queuebox.protocol.etcdflags import add_etcd_arguments

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 3301
EXIT_USAGE = 2
# Never echoed by --help: their default may come from the environment or a file.
SECRET_DESTS = frozenset({"password", "compare_password"})


class HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help when it has a meaningful default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        unset = default is None or default is False or default == [] or default == argparse.SUPPRESS
        shown = not unset and "%(default)" not in text
        if shown and action.option_strings and action.dest not in SECRET_DESTS:
            text += " (default: %(default)s)"
        return text


class ArgumentParser(argparse.ArgumentParser):
    """argparse with `HelpFormatter` and one-line errors (a JSON object with --json)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._json = False

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        given = sys.argv[1:] if args is None else list(args)
        self._json = "--json" in given
        parsed, rest = super().parse_known_args(args, namespace)
        if hasattr(parsed, "tls_ca"):
            parsed.tls = self._tls(parsed)
        return parsed, rest

    def _tls(self, args: argparse.Namespace) -> ssl.SSLContext | None:
        """The connection's TLS context: with --tls, or any of its files given."""
        if not (args.tls or args.tls_ca or args.tls_cert or args.tls_key):
            return None
        try:
            return tls_context(args.tls_ca, args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError, ValueError) as exc:
            which = "--tls-ca" if args.tls_ca and not args.tls_cert else "--tls-cert/--tls-key"
            self.error(f"{which}: {getattr(exc, 'strerror', None) or exc}")

    def error(self, message: str) -> NoReturn:
        # "argument --port: invalid ..." -> "--port: invalid ..."
        message = message.removeprefix("argument ")
        if self._json:
            self.exit(EXIT_USAGE, json.dumps({"error": message, "exit": EXIT_USAGE}) + "\n")
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def default_address(env: Mapping[str, str]) -> tuple[str, str]:
    """(host, port text) from the environment; the port is checked by `port` later."""
    host, port = DEFAULT_HOST, str(DEFAULT_PORT)
    if env.get("QUEUEBOX_LISTEN"):
        try:
            listen_host, listen_port = parse_address(env["QUEUEBOX_LISTEN"], DEFAULT_PORT)
        except ValueError:
            pass  # the server's setting, reported by the server; clients keep their default
        else:
            wildcard = listen_host in ("0.0.0.0", "::", "*", "")
            host, port = (DEFAULT_HOST if wildcard else listen_host), str(listen_port)
    return env.get("QUEUEBOX_HOST") or host, env.get("QUEUEBOX_PORT") or port


def port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"expected a port number 1-65535, got {text!r}")
    return int(text)


def seconds(text: str) -> float:
    """A duration: a number >= 0 (not nan, not negative)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return int(text)


def password_file(text: str) -> str:
    """The password in file `text`: its first line."""
    try:
        with open(text, encoding="utf-8") as stream:
            return stream.read().split("\n", 1)[0].removesuffix("\r")
    except (OSError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(
            f"cannot read {text}: {getattr(exc, 'strerror', None) or exc}"
        ) from None


class _PasswordInArgv(argparse.Action):
    """A password given as a flag: kept working, with a warning each time, since
    `ps` shows it to every user of the machine while the command runs."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        print(
            f"{parser.prog}: warning: {option} shows the password to every user of this "
            f"machine (ps); use {option}-file FILE or QUEUEBOX_PASSWORD instead",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_password_arguments(
    group: Any, flag: str, dest: str, default: str | None, help_text: str
) -> None:
    """`FLAG-file FILE` (the way to give it) and `FLAG VALUE` (warns), both into `dest`."""
    # The plain flag first, holding the default: argparse would pass a string
    # default of the file flag through its type, reading a file named so.
    group.add_argument(
        flag,
        dest=dest,
        action=_PasswordInArgv,
        metavar="PASSWORD",
        default=default,
        help=f"{help_text}; visible to every user of the machine (ps): use {flag}-file",
    )
    group.add_argument(
        flag + "-file",
        dest=dest,
        type=password_file,
        metavar="FILE",
        default=argparse.SUPPRESS,
        help=f"{help_text}, read from the first line of FILE",
    )


def add_connection_arguments(
    parser: argparse.ArgumentParser | Any, env: Mapping[str, str] | None = None, tls: bool = True
) -> Any:
    """Add --host/--port/--user/--password-file (and the TLS options unless `tls` is
    False: a command whose connections cannot speak it) in a group of `parser`;
    returns the group."""
    env = os.environ if env is None else env
    host, port_text = default_address(env)
    group = parser.add_argument_group(
        "connection",
        "defaults: QUEUEBOX_HOST, QUEUEBOX_PORT, QUEUEBOX_USER, QUEUEBOX_PASSWORD "
        "(or QUEUEBOX_PASSWORD_FILE)",
    )
    group.add_argument("--host", default=host, help="server host name or address")
    group.add_argument("--port", type=port, default=port_text, help="server port")
    group.add_argument(
        "--user", default=env.get("QUEUEBOX_USER") or None, help="log in as USER (default: guest)"
    )
    add_password_arguments(
        group,
        "--password",
        "password",
        _env_password(parser, env),
        "password of USER (default: $QUEUEBOX_PASSWORD, or $QUEUEBOX_PASSWORD_FILE's)",
    )
    if tls:
        add_tls_arguments(group, env)
    return group


def add_tls_arguments(group: Any, env: Mapping[str, str]) -> None:
    """--tls and its files; any file given turns TLS on (ArgumentParser makes `args.tls`)."""
    group.add_argument(
        "--tls",
        action="store_true",
        default=bool(env.get("QUEUEBOX_CLIENT_TLS")),
        help="speak TLS; the server's certificate is checked against the system's CAs "
        "unless --tls-ca (default: $QUEUEBOX_CLIENT_TLS)",
    )
    add_pem_arguments(
        group,
        env,
        "tls",
        "QUEUEBOX_CLIENT_TLS",
        (
            "PEM CA the server's certificate is checked with",
            "PEM client certificate; the server logs it in as the user its CN names",
            "the PEM private key of --tls-cert",
        ),
        note="; implies --tls",
    )


def add_pem_arguments(
    group: Any,
    env: Mapping[str, str],
    flag: str,
    variable: str,
    helps: tuple[str, str, str],
    default: str | None = None,
    note: str = "",
) -> None:
    """--FLAG-ca, --FLAG-cert and --FLAG-key, PEM files, each defaulting to
    $VARIABLE_CA (_CERT, _KEY), else `default`; `helps` says what each one is."""
    for part, what in zip(("ca", "cert", "key"), helps, strict=True):
        name = f"{variable}_{part.upper()}"
        group.add_argument(
            f"--{flag}-{part}",
            metavar="FILE",
            default=env.get(name) or default,
            help=f"{what}{note} (default: ${name})",
        )


def add_typed(group: Any, *rows: tuple[str, Callable[[str], Any], str]) -> None:
    """Options of one value each that default to None (the command's own default,
    or "keep"): one (flag, type, help) row each, so a command lists them as a table."""
    for flag, kind, text in rows:
        group.add_argument(flag, type=kind, help=text)


def add_seconds(group: Any, flag: str, default: float, text: str) -> None:
    """A duration option, SECONDS (--timeout, --wait, --wait-for-server, ...)."""
    group.add_argument(flag, type=seconds, default=default, metavar="SECONDS", help=text)


def add_yes_argument(parser: argparse.ArgumentParser) -> None:
    """--yes: a destructive command acts without asking (output.confirm)."""
    parser.add_argument(
        "--yes", action="store_true", help="do not ask first (needed without a terminal)"
    )


def _env_password(parser: Any, env: Mapping[str, str]) -> str | None:
    if env.get("QUEUEBOX_PASSWORD"):
        return env["QUEUEBOX_PASSWORD"]
    if env.get("QUEUEBOX_PASSWORD_FILE"):
        try:
            return password_file(env["QUEUEBOX_PASSWORD_FILE"])
        except argparse.ArgumentTypeError as exc:
            parser.error(f"QUEUEBOX_PASSWORD_FILE: {exc}")
    return None


def address(text: str) -> str:
    """One HOST:PORT (checked here, so a typo is a usage error, not a connect error)."""
    try:
        parse_addresses([text])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


class _AddressList(argparse.Action):
    """append, except that the first --address replaces the default from the environment."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        given = getattr(namespace, self.dest)
        setattr(namespace, self.dest, [*([] if given is self.default else given), values])


def add_failover_arguments(
    parser: argparse.ArgumentParser, group: Any, env: Mapping[str, str] | None = None
) -> None:
    """Add --address (repeatable), --failover-timeout, and --etcd-endpoints with
    --etcd-prefix (the self-routing client of a sharded cluster) to `group`."""
    env = os.environ if env is None else env
    try:
        defaults = [f"{h}:{p}" for h, p in parse_addresses(env["QUEUEBOX_ADDRESSES"])]
    except KeyError:
        defaults = []
    except ValueError as exc:
        parser.error(f"QUEUEBOX_ADDRESSES: {exc}")
    group.add_argument(
        "--address",
        dest="addresses",
        type=address,
        action=_AddressList,
        default=defaults,
        metavar="HOST:PORT",
        help="an instance of a primary + replicas set, repeatable: connect to the one that "
        "is writable (queue.state() RUNNING) and follow it; replaces --host/--port "
        "(default: $QUEUEBOX_ADDRESSES, comma-separated, else none)",
    )
    group.add_argument(
        "--failover-timeout",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="with --address: give up finding the writable instance after this long",
    )
    add_etcd_arguments(
        group,
        env,
        endpoints_help="a sharded cluster: read its map from these etcd endpoints "
        "(comma-separated http(s) URLs), connect to every shard's primary and route each "
        "call to its shard; replaces --host/--port/--address "
        "(default: $QUEUEBOX_ETCD_ENDPOINTS)",
        prefix_help="with --etcd-endpoints: the cluster's prefix ($QUEUEBOX_ETCD_PREFIX if set)",
    )
