"""The TLS settings: what goes together, users who log in by certificate only,
the exposure rule TLS does not relax, and the server context's reload."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from queuebox.protocol import password_hash2
from queuebox.server.access.users import Users
from queuebox.server.runtime.tls import ServerTls, TlsError, TlsFiles
from queuebox.server.settings.config import ConfigError
from queuebox.server.settings.config_load import load_config
from tests.e2e.certs import Authority

OPEN = {"listen": "0.0.0.0:3301"}


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ({"tls_cert": "c.pem"}, "tls_cert and tls_key go together"),
        ({"tls_key": "k.pem"}, "tls_cert and tls_key go together"),
        ({"tls_ca": "ca.pem"}, "tls_ca needs tls_cert"),
        ({"etcd_cert": "c.pem"}, "etcd_cert and etcd_key go together"),
        (
            {"etcd_endpoints": "http://e:2379", "etcd_ca": "ca.pem"},
            "for https:// endpoints, not http://e:2379",
        ),
        ({"tls_client_auth": "sometimes"}, "expected one of optional, required"),
    ],
)
def test_tls_settings_that_cannot_work_are_refused(flags: dict[str, str], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        load_config(flags, {})


def test_tls_settings_come_from_every_layer(tmp_path: Path) -> None:
    toml = tmp_path / "q.toml"
    toml.write_text('tls_cert = "file.crt"\ntls_key = "file.key"\nlegacy_tls = false\n')
    config = load_config({}, {"QUEUEBOX_TLS_CA": "ca.pem"}, str(toml))
    assert (config.tls_cert, config.tls_key, config.tls_ca) == ("file.crt", "file.key", "ca.pem")
    assert (config.tls_client_auth, config.legacy_tls) == ("optional", False)


def test_tls_does_not_open_a_non_loopback_port_without_users() -> None:
    with pytest.raises(ConfigError, match="no user configured"):
        load_config({**OPEN, "tls_cert": "c", "tls_key": "k", "tls_ca": "ca"}, {})


def test_a_certificate_only_user_has_no_password(tmp_path: Path) -> None:
    toml = tmp_path / "q.toml"
    toml.write_text('[users.ci]\ncertificate_only = true\nrights = ["read"]\n')
    config = load_config({}, {}, str(toml))
    users = Users(config.users)
    assert users.exists("ci")
    assert not users.password_ok("ci", "")
    assert config.users["ci"].hash2 not in (password_hash2(""), password_hash2("ci"))
    toml.write_text('[users.ci]\ncertificate_only = true\npassword = "x"\n')
    with pytest.raises(ConfigError, match="give one of password, certificate_only"):
        load_config({}, {}, str(toml))


def test_a_reload_with_a_bad_pair_keeps_the_old_certificate(tmp_path: Path) -> None:
    ca = Authority(tmp_path)
    first, second = ca.issue("one", server=True), ca.issue("two", server=True)
    cert, key = tmp_path / "live.crt", tmp_path / "live.key"
    cert.write_bytes(first.cert.read_bytes())
    key.write_bytes(first.key.read_bytes())
    tls = ServerTls(TlsFiles(str(cert), str(key), str(ca.cert), "required"))
    assert tls.context.verify_mode == ssl.CERT_REQUIRED
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_2
    cert.write_bytes(second.cert.read_bytes())  # its key is still the first one's
    with pytest.raises(TlsError, match="tls_cert"):
        tls.reload()
    assert tls.reloads == 0
    key.write_bytes(second.key.read_bytes())
    tls.reload()
    assert tls.reloads == 1
