"""The local engines' TLS files: made once, kept, renewed before they expire, keys private."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
import sys
from pathlib import Path

from cryptography import x509

from tools.engines import tls
from tools.engines.tls import ensure_tls_files

REPO = Path(__file__).resolve().parents[3]


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_ca_signs_a_server_certificate_for_every_loopback_spelling(tmp_path):
    files = ensure_tls_files(tmp_path)
    ca, server, client = _cert(files.ca), _cert(files.cert), _cert(files.client_cert)
    server.verify_directly_issued_by(ca)
    client.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert set(names.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address("127.0.0.1"),
                                                               ipaddress.ip_address("::1")}
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for key in (files.ca_key, files.key, files.client_key):
        assert key.stat().st_mode & 0o077 == 0, key


def test_a_second_call_keeps_the_files(tmp_path):
    first = ensure_tls_files(tmp_path)
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    ensure_tls_files(tmp_path)
    assert {path.name: path.read_bytes() for path in first.dir.iterdir()} == before


def test_a_certificate_close_to_expiry_is_renewed_and_a_new_ca_resigns_both(tmp_path, monkeypatch):
    files = ensure_tls_files(tmp_path)
    old_ca, old_server = files.ca.read_bytes(), files.cert.read_bytes()
    # Renewal window wider than the validity: every file reads as expiring.
    monkeypatch.setattr(tls, "_RENEW_BEFORE", datetime.timedelta(days=10_000))
    ensure_tls_files(tmp_path)
    assert files.ca.read_bytes() != old_ca and files.cert.read_bytes() != old_server
    _cert(files.cert).verify_directly_issued_by(_cert(files.ca))


def test_tls_goes_with_start_only():
    result = subprocess.run([sys.executable, "-m", "tools.engines", "status", "--tls"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--tls goes with start" in result.stderr


def test_status_says_which_engines_serve_tls(tmp_path):
    from tools.engines.base import EngineStatus

    plain = EngineStatus("redis", True, True, "127.0.0.1:26379", 7, tmp_path)
    secure = EngineStatus("redis", True, True, "127.0.0.1:26379", 7, tmp_path, tls=True)
    assert "127.0.0.1:26379 " in plain.line() and " tls" not in plain.line()
    assert "127.0.0.1:26379 tls" in secure.line()
    assert " tls" not in EngineStatus("redis", False, False, "127.0.0.1:26379", None, tmp_path, tls=True).line()
