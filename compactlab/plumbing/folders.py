"""The user's folders for compactlab (its configuration, its cache), as platformdirs names them.

Every command asks for both, and importing platformdirs (it imports tempfile, shutil, bz2, lzma)
cost each start 9 ms, more than the rest of the price table's set-up. So on Linux, where the XDG
variable is not set, the folder is the one platformdirs gives in that case whatever its version
(``~/.config/compactlab``, ``~/.cache/compactlab``; a test holds the two to the same answer);
wherever else, platformdirs answers.
"""

from __future__ import annotations

import os
import sys

APP = "compactlab"

#: the XDG variable and the folder under the home folder it defaults to, by kind
_XDG = {"config": ("XDG_CONFIG_HOME", ".config"), "cache": ("XDG_CACHE_HOME", ".cache")}


def user_folder(kind: str) -> str:
    """The user's ``kind`` folder (``config`` or ``cache``) for compactlab."""
    variable, default = _XDG[kind]
    if sys.platform.startswith("linux") and not os.environ.get(variable, "").strip():
        return os.path.join(os.path.expanduser(f"~/{default}"), APP)
    import platformdirs

    return str(getattr(platformdirs, f"user_{kind}_dir")(APP, appauthor=False))


def default_cache_dir() -> str:
    """$COMPACTLAB_CACHE_DIR, else the user's cache folder: never a folder relative to wherever
    the command (or a Dask worker) happens to stand."""
    configured = os.environ.get("COMPACTLAB_CACHE_DIR", "").strip()
    return configured or user_folder("cache")
