"""The documentation (#47 §6): every shell and Python example in docs/ runs, the command reference
is what the commands' --help says now, and the README stays a front page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, ClaudeCodeSession

DOCS = ROOT / "docs"
_BLOCK = re.compile(r"```(sh|python)\n(.*?)```", re.S)


def examples() -> list[tuple[str, int, str, str]]:
    """(page, index, language, code) of every ``sh`` and ``python`` block of the docs."""
    out = []
    for page in sorted(DOCS.glob("*.md")):
        for k, m in enumerate(_BLOCK.finditer(page.read_text())):
            out.append((page.name, k, m.group(1), m.group(2)))
    return out


@pytest.fixture
def workplace(tmp_path):
    """A folder like the repository's root (its samples and examples), a HOME with one Claude Code
    session, and the compactlab of this interpreter first on PATH."""
    for name in ("sample_transcripts", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-home-me-app"
    project.mkdir(parents=True)
    s = ClaudeCodeSession().user("go").assistant("a", {"type": "tool_use", "id": "t", "name": "Bash",
                                                       "input": {"command": "ls"}}).result("t", "a.py")
    s.assistant("b", {"type": "text", "text": "done"}).write(project / "s.jsonl")
    env = {**os.environ, "HOME": str(home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT), "COMPACTLAB_CACHE_DIR": str(tmp_path / "cache")}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        env.pop(key, None)
    return tmp_path, env


@pytest.mark.parametrize("page, k, language, code", examples(), ids=lambda v: str(v)[:24])
def test_every_example_in_the_docs_runs(workplace, page, k, language, code):
    folder, env = workplace
    if language == "python":
        argv = [sys.executable, "-c", code]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", code]
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{page} example {k}:\n{code}\n{done.stderr[-2000:]}"


def test_the_command_reference_is_what_the_commands_say_now():
    if shutil.which("cog", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("cogapp is not installed (the test extras have it)")
    cog = str(Path(sys.executable).parent / "cog")
    done = subprocess.run([cog, "--check", str(DOCS / "cli.md")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, "docs/cli.md is stale: run cog -r docs/cli.md\n" + done.stdout + done.stderr


def test_the_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    first = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert first == ["pip install . && compactlab replay sample_transcripts/synth-medium.jsonl",
                     "pip install '.[test]' && pytest"]
    for job in ("replay", "compare", "check", "tune", "next-action"):
        assert f"compactlab {job} " in readme, job
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).is_file(), link


def _rendered(page: Path) -> str:
    """A docs page as MkDocs renders it: Python-Markdown with mkdocs.yml's extensions."""
    markdown = pytest.importorskip("markdown")
    config = pytest.importorskip("mkdocs.config").load_config(str(ROOT / "mkdocs.yml"))
    return markdown.markdown(page.read_text(encoding="utf-8"), extensions=config["markdown_extensions"],
                             extension_configs=config["mdx_configs"])


#: a fenced block Python-Markdown did not take for one: its backticks left in the text, or read
#: as an inline code span that starts with the block's language and a line break
_BROKEN_FENCE = re.compile(r"<code>(?:toml|python|sh|text|json|bash|console|yaml)\n")


def _broken_fence(html: str) -> bool:
    shown = re.sub(r"(?s)<pre>.*?</pre>|<code>.*?</code>|<!--.*?-->", "", html)
    return "```" in shown or bool(_BROKEN_FENCE.search(re.sub(r"(?s)<pre>.*?</pre>", "", html)))


def _outside_fences(text: str) -> list[str]:
    lines, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence:
            lines.append(line)
    return lines


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_every_page_renders_as_written(page):
    """(#60 §6) No fenced block is left literal or read as inline code (Python-Markdown takes a
    fence only outside a list, with its closing line on its own), and every nested list nests: Python-Markdown nests a bullet indented 4
    spaces and flattens one indented 1-3 into its parent's level, so the docs indent by 4, and a
    page with nested bullets renders lists inside list items."""
    source = (DOCS / page).read_text(encoding="utf-8")
    html = _rendered(DOCS / page)
    assert not _broken_fence(html)
    lines = _outside_fences(re.sub(r"(?s)<!--.*?-->", "", source))
    assert [line for line in lines if re.match(r" {1,3}([-*+]|\d+\.) ", line)] == []
    if any(re.match(r" {4,}[-*+] ", line) for line in lines):
        assert re.search(r"<li>(?:(?!</li>).)*<[uo]l>", html, re.S)


def test_the_render_check_catches_what_it_is_for(tmp_path):
    """The check above fails on a two-space nested bullet and on a fence inside a list item that
    Python-Markdown leaves literal."""
    page = tmp_path / "p.md"
    page.write_text("- a\n  - b\n\n1. step\n\n  ```toml\n  x = 1\n  ```\n", encoding="utf-8")
    html = _rendered(page)
    assert "<li>a</li>" in html and "<ul>" not in html.split("<li>a</li>")[1]  # (flattened: b beside a)
    assert _broken_fence(html)
    # (Python-Markdown's fenced blocks stand outside lists: the docs put them after the list)
    page.write_text("- a\n\n    - b\n\n1. step\n\n```toml\nx = 1\n```\n", encoding="utf-8")
    html = _rendered(page)
    assert re.search(r"<li>(?:(?!</li>).)*<ul>", html, re.S) and not _broken_fence(html)
