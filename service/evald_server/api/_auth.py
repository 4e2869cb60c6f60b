"""Bearer tokens → tenants.

Tokens are configured as SHA-256 hex digests (``[[auth.tokens]]``), never in clear.
With no tokens configured the server is in local mode: one tenant, ``local``, and the
config refuses any non-loopback listen address.
"""

import hashlib
import hmac
from collections.abc import Sequence

from evald_server.config import AuthSection
from evald_server.domain import ErrorReason, Unauthenticated

LOCAL_TENANT = "local"
_BEARER = "bearer "


class TokenAuthenticator:
    """Resolves the ``authorization`` metadata of a call to a tenant."""

    def __init__(self, auth: AuthSection) -> None:
        self._tenants = {entry.sha256: entry.tenant for entry in auth.tokens}

    @property
    def local_mode(self) -> bool:
        return not self._tenants

    def tenant_for(self, metadata: Sequence[tuple[str, str | bytes]]) -> str:
        """The caller's tenant; ``Unauthenticated`` when the token is missing or unknown."""
        if self.local_mode:
            return LOCAL_TENANT
        values = [value for key, value in metadata if key == "authorization"]
        if not values or not isinstance(values[0], str):
            raise Unauthenticated(
                ErrorReason.UNAUTHENTICATED, "missing 'authorization: Bearer <token>' metadata"
            )
        header = values[0]
        if not header.lower().startswith(_BEARER) or not header[len(_BEARER) :].strip():
            raise Unauthenticated(
                ErrorReason.UNAUTHENTICATED, "authorization metadata must be 'Bearer <token>'"
            )
        digest = hashlib.sha256(header[len(_BEARER) :].strip().encode("utf-8")).hexdigest()
        for known, tenant in self._tenants.items():
            if hmac.compare_digest(known, digest):
                return tenant
        raise Unauthenticated(ErrorReason.UNAUTHENTICATED, "unknown bearer token")
