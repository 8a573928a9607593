"""The user's folders (plumbing/folders.py): the ones platformdirs names, without importing it at
every start where the answer is certain."""

from __future__ import annotations

import sys

import platformdirs
import pytest

from compactlab.plumbing.folders import user_folder


@pytest.mark.parametrize("value", [None, "", "   ", "/srv/xdg", "relative/xdg"])
@pytest.mark.parametrize("kind", ["config", "cache"])
def test_the_folders_are_the_ones_platformdirs_names(kind, value, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    variable = {"config": "XDG_CONFIG_HOME", "cache": "XDG_CACHE_HOME"}[kind]
    if value is None:
        monkeypatch.delenv(variable, raising=False)
    else:
        monkeypatch.setenv(variable, value)
    assert user_folder(kind) == getattr(platformdirs, f"user_{kind}_dir")("compactlab", appauthor=False)


def test_without_an_xdg_variable_on_linux_platformdirs_is_not_imported(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # (an import of it would fail)
    assert user_folder("cache") == str(tmp_path / ".cache" / "compactlab")
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(ImportError):  # elsewhere platformdirs answers
        user_folder("cache")
