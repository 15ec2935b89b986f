"""tls / tls_ca of Client and AsyncClient, without a server: plaintext by
default, TLS when asked, and a CA file that cannot be used fails when the
client is made, naming the file (a TLS coordinator end to end:
tests/integration/tls_test.py)."""
import asyncio

import grpc
import pytest

from tandem_client import AsyncClient, Client
from tandem_client._tls import channel_credentials

PEM = (b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")


def test_plaintext_unless_asked():
    assert channel_credentials(False, None) is None
    assert isinstance(channel_credentials(True, None), grpc.ChannelCredentials)


def test_the_ca_file_is_read(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(PEM)
    assert isinstance(channel_credentials(False, str(ca)), grpc.ChannelCredentials)
    with Client("127.0.0.1:1", tls_ca=str(ca)):
        pass


def test_an_unusable_ca_file_is_named(tmp_path):
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(OSError, match="missing.pem"):
        Client("127.0.0.1:1", tls_ca=missing)
    not_pem = tmp_path / "not.pem"
    not_pem.write_bytes(b"hello\n")
    with pytest.raises(ValueError, match="not.pem"):
        Client("127.0.0.1:1", tls_ca=str(not_pem))

    async def make():
        AsyncClient("127.0.0.1:1", tls_ca=missing)

    with pytest.raises(OSError, match="missing.pem"):
        asyncio.run(make())
