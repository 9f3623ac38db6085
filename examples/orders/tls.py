"""TLS for the order service: a local certificate authority and a certificate for
127.0.0.1, generated into ``<data dir>/tls/`` on first use (``trustme``) and reused.

The agents trust that CA only (:func:`client_context`); nothing here is for use beyond this
machine's demo.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certificates", "client_context", "ensure_certificates"]


@dataclass(frozen=True)
class Certificates:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def certfile(self) -> Path:
        return self.folder / "server.pem"

    @property
    def keyfile(self) -> Path:
        return self.folder / "server.key"


def ensure_certificates(folder: Path) -> Certificates:
    """The CA and the server's certificate in ``folder`` (made when missing)."""
    certificates = Certificates(folder)
    if all(p.is_file() for p in (certificates.ca, certificates.certfile, certificates.keyfile)):
        return certificates
    import trustme

    folder.mkdir(parents=True, exist_ok=True)
    authority = trustme.CA(organization_name="millimcp orders demo")
    issued = authority.issue_cert("127.0.0.1", "localhost")
    authority.cert_pem.write_to_path(str(certificates.ca))
    issued.private_key_pem.write_to_path(str(certificates.keyfile))
    certificates.keyfile.chmod(0o600)
    with open(certificates.certfile, "wb") as out:
        for blob in issued.cert_chain_pems:
            out.write(blob.bytes())
    return certificates


def client_context(certificates: Certificates) -> ssl.SSLContext:
    """A client context that trusts the demo's CA (and verifies the host name)."""
    return ssl.create_default_context(cafile=str(certificates.ca))
