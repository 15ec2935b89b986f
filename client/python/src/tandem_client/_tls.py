"""TLS for a coordinator started with --tls-cert/--tls-key: the channel
credentials shared by Client and AsyncClient."""
from typing import Optional

import grpc


def channel_credentials(tls: bool, tls_ca: Optional[str]) -> Optional[grpc.ChannelCredentials]:
    """None (plaintext) unless `tls` is true or `tls_ca` is given; else TLS
    credentials that trust the PEM CA certificate(s) in the file `tls_ca`
    (a self-signed server certificate is its own CA), or the system's roots
    when it is None. A `tls_ca` that cannot be read raises OSError, one that
    holds no PEM certificate ValueError, each naming it: here, when the
    client is made, not on its first call."""
    if not tls and tls_ca is None:
        return None
    if tls_ca is None:
        return grpc.ssl_channel_credentials()
    with open(tls_ca, "rb") as f:
        roots = f.read()
    if b"-----BEGIN CERTIFICATE-----" not in roots:
        raise ValueError(f"tls_ca {tls_ca!r} holds no PEM certificate "
                         "('-----BEGIN CERTIFICATE-----')")
    return grpc.ssl_channel_credentials(root_certificates=roots)
