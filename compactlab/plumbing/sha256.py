"""The SHA-256 of a few bytes, in hexadecimal (``hex_of``): by the native core where it runs, else
by ``hashlib``, the reference. A run asks a few (a cache entry's name, a policy's fingerprint, a
file's key), and importing ``hashlib`` (its OpenSSL) cost a replay's start-up more than they do; a
file is hashed by ``hashlib.file_digest`` (``digests.py``), imported then."""

from __future__ import annotations

from ..core import in_use


def hex_of(data: bytes) -> str:
    """``hashlib.sha256(data).hexdigest()``."""
    native = in_use()
    if native is not None:
        return str(native.sha256_hex(data))
    import hashlib

    return hashlib.sha256(data).hexdigest()
