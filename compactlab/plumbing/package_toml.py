"""The TOML documents the package ships (the presets, the price corrections, the priors), parsed:
by the native core where it runs (``_native.package_toml``, the ``toml`` crate), else by
``tomllib``, the reference the tests hold it to on every one of them. A user's TOML (a policy file,
a price table, ``--set``) is always ``tomllib``'s, whose errors and TOML version are the documented
ones. Importing ``tomllib`` costs a replay more than all of its own parsing (about 36 M
instructions, its regular expressions compiled at import): a run that reads no TOML of the user's
does not import it."""

from __future__ import annotations

from typing import Any

from ..core import in_use


def loads(text: str) -> dict[str, Any]:
    """The package's TOML document ``text``, as ``tomllib.loads`` reads it."""
    native = in_use()
    if native is not None:
        data = native.package_toml(text)
        if data is not None:  # (None: a date or a time, which tomllib reads into datetime objects)
            return data  # type: ignore[no-any-return]
    import tomllib

    return tomllib.loads(text)
