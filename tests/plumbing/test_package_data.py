"""What a run reads without importing tomllib or hashlib (their imports cost a replay's start-up more
than their work): the package's own TOML documents, read natively, are what tomllib reads of
them; a short SHA-256, made natively, is hashlib's."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tomllib
from importlib.resources import files

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlab.core import in_use
from compactlab.plumbing import package_toml, sha256
from helpers import examples


_DOCUMENTS = sorted(p for folder in ("presets", "data") for p in files("compactlab").joinpath(folder).iterdir()
                    if p.name.endswith(".toml"))


def _ordered(value: object) -> str:
    """The value with its dicts' order (which == does not see)."""
    return json.dumps(value)


@pytest.mark.parametrize("doc", _DOCUMENTS, ids=lambda p: p.name)
def test_every_toml_document_the_package_ships_is_read_as_tomllib_reads_it(doc):
    text = doc.read_text("utf-8")
    got = package_toml.loads(text)
    assert got == tomllib.loads(text) and _ordered(got) == _ordered(tomllib.loads(text))
    native = in_use()
    if native is not None:  # (read natively, not left to tomllib)
        assert native.package_toml(text) == got


@pytest.mark.skipif(in_use() is None, reason="the native core reads the package's TOML where it runs")
def test_a_document_the_native_reading_leaves_is_tomllibs():
    native = in_use()
    for text in ('when = 2026-01-02\n', 'a = [1, 1979-05-27T07:32:00Z]\n', 'x = "unclosed\n', "a = 1\na = 2\n"):
        assert native.package_toml(text) is None
    assert package_toml.loads('when = 2026-01-02\nn = 1\n') == tomllib.loads('when = 2026-01-02\nn = 1\n')
    with pytest.raises(tomllib.TOMLDecodeError):
        package_toml.loads("a = 1\na = 2\n")
    typed = 'i = -17\nx = 0x1f\nf = 6.5e-3\nn = -inf\nb = true\ns = """two\nlines"""\n[t]\nl = [1, "a", [2.0]]\n'
    assert _ordered(package_toml.loads(typed)) == _ordered(tomllib.loads(typed))


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=300))
def test_a_short_digest_is_hashlibs(data):
    assert sha256.hex_of(data) == hashlib.sha256(data).hexdigest()


def test_a_replay_imports_neither_tomllib_nor_hashlib(tmp_path):
    """A replay of a preset on a small file: the package's TOML and its digests read natively where
    the native core runs (the Python engine imports them: the reference). Once its model's prices
    are in the cache (the first run asks genai-prices, whose pydantic imports hashlib)."""
    if in_use() is None:
        pytest.skip("the native core reads them where it runs")
    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "ok"}\n')
    code = ("import sys; from compactlab.cli import main; "
            "main.main(args=sys.argv[1:], standalone_mode=False); "
            "print(sorted(m for m in ('tomllib', 'hashlib', '_hashlib') if m in sys.modules))")
    argv = [sys.executable, "-c", code, "replay", str(path), "-p", "s08", "-q", "--force", "--out", str(tmp_path / "out")]
    env = {**os.environ, "COMPACTLAB_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):
        # (from a folder of its own: `-c` puts the working folder first on the path, and a checkout's
        # package there may lack the native module the installed one has)
        out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "[]"
