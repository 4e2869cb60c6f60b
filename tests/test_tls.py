"""TLS by configuration: server certificate, and client certificates when a client CA is set.

Certificates are made for each test with the openssl command line (part of every
Debian image), signed by a throwaway CA, valid for 127.0.0.1 only.
"""

import subprocess
from pathlib import Path

import anyio
import pytest

from evald_client import AsyncEvaldClient, TlsConfig, Unavailable
from evald_server.api import serve
from evald_server.config import ConfigError, ServerConfig, parse_config
from tests.harness import config_data, running_server

pytestmark = pytest.mark.anyio


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _issue(name: str, subject: str, cwd: Path, *, server: bool) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-subj", f"/CN={subject}", "-out", f"{name}.csr", cwd=cwd)  # fmt: skip
    extensions = cwd / f"{name}.ext"
    extensions.write_text(
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        if server
        else "extendedKeyUsage=clientAuth\n"
    )
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "1", "-extfile", extensions.name,
             "-out", f"{name}.pem", cwd=cwd)  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-days", "1",
             "-subj", "/CN=evald test CA", "-out", "ca.pem", cwd=directory)  # fmt: skip
    _issue("server", "127.0.0.1", directory, server=True)
    _issue("client", "evald test client", directory, server=False)
    return directory


def _tls_config(tmp_path: Path, pki: Path, *, client_ca: bool) -> ServerConfig:
    data = config_data(tmp_path)
    data["server"].update(tls_cert=str(pki / "server.pem"), tls_key=str(pki / "server.key"))
    if client_ca:
        data["server"]["tls_client_ca"] = str(pki / "ca.pem")
    return parse_config(data)


async def test_server_certificate_is_verified_by_the_client(tmp_path: Path, pki: Path) -> None:
    async with running_server(_tls_config(tmp_path, pki, client_ca=False)) as address:
        tls = TlsConfig.from_files(ca=pki / "ca.pem")
        async with AsyncEvaldClient(address, tls=tls) as client:
            assert [m.model_id for m in await client.list_models()] == ["sim-good", "sim-weak"]
        async with AsyncEvaldClient(address, timeout_s=5) as plaintext:
            with pytest.raises(Unavailable):
                await plaintext.list_models()


async def test_client_certificate_is_required_when_a_client_ca_is_set(
    tmp_path: Path, pki: Path
) -> None:
    async with running_server(_tls_config(tmp_path, pki, client_ca=True)) as address:
        mutual = TlsConfig.from_files(
            ca=pki / "ca.pem", cert=pki / "client.pem", key=pki / "client.key"
        )
        async with AsyncEvaldClient(address, tls=mutual) as client:
            assert len(await client.list_models()) == 2
        anonymous = TlsConfig.from_files(ca=pki / "ca.pem")
        async with AsyncEvaldClient(address, tls=anonymous, timeout_s=5) as client:
            with pytest.raises(Unavailable):
                await client.list_models()


@pytest.mark.parametrize(
    ("cert", "key", "says"),
    [
        (
            "server.pem",
            "client.key",
            r"server.tls_cert / server.tls_key: the private key does not belong to the "
            r"certificate \(KEY_VALUES_MISMATCH\)",
        ),
        ("garbage.pem", "server.key", r"server.tls_cert / server.tls_key: not a PEM certificate"),
        ("missing.pem", "server.key", r"server.tls_cert: cannot read .*missing.pem"),
        ("server.pem", "missing.key", r"server.tls_key: cannot read .*missing.key"),
    ],
)
async def test_a_bad_certificate_or_key_names_the_setting_and_the_cause(
    tmp_path: Path, pki: Path, cert: str, key: str, says: str
) -> None:
    (pki / "garbage.pem").write_text("not a certificate\n")
    data = config_data(tmp_path)
    data["server"].update(tls_cert=str(pki / cert), tls_key=str(pki / key))
    with anyio.fail_after(30), pytest.raises(ConfigError, match=says) as caught:
        await serve(parse_config(data))
    assert "cannot bind" not in str(caught.value)
