"""The next action of a reply and the agreement rule (issue #30 §3)."""

from __future__ import annotations

import pytest

from compactlab.next_action.actions import Action, action_of, agree, similarity, tool_action


def _call(name, **args):
    return {"role": "assistant", "content": [{"type": "text", "text": "let me look"},
                                             {"type": "tool_use", "id": "t", "name": name, "input": args}]}


@pytest.mark.parametrize("message, tool, target, command", [
    (_call("Read", file_path="/repo/src/a.py"), "Read", "/repo/src/a.py", None),
    (_call("Bash", command="cd /repo && sed -n '10,40p' src/a.py"), "Bash", "src/a.py", "sed"),
    (_call("bash", command="FOO=1 timeout 30 python3.11 -m pytest tests/test_x.py -q"), "bash", "tests/test_x.py", "python"),
    (_call("bash", command="grep -rn parse_config ."), "bash", "parse_config", "grep"),
    (_call("str_replace_editor", command="view", path="/testbed/src/a.py"), "str_replace_editor", "/testbed/src/a.py",
     "view"),
    (_call("shell", arguments='{"command": ["bash", "-lc", "cat ./README.md"]}'), "shell", "README.md", "cat"),
    (_call("Grep", pattern="def main", path="src/"), "Grep", "src", None),
    (_call("WebFetch", url="https://example.com/x"), "WebFetch", "https://example.com/x", None),
    (_call("TodoWrite", todos=[]), "TodoWrite", None, None),
])
def test_the_fields_of_a_recorded_call(message, tool, target, command):
    assert action_of(message) == Action("tool", tool, target, command)


def test_text_and_empty_replies():
    assert action_of({"role": "assistant", "content": "All done."}) == Action("text", text="All done.")
    assert action_of({"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}).kind == "none"
    assert action_of(None).kind == "none"


@pytest.mark.parametrize("recorded, reply, agrees", [
    # a shell command: the program and its target both (#46 §2: a single-tool agent's tool agrees by chance)
    (tool_action("Bash", {"command": "sed -n 1,20p src/a.py"}), tool_action("bash", {"command": "sed -n 5p src/a.py"}), True),
    (tool_action("Bash", {"command": "sed -n 1,20p src/a.py"}), tool_action("bash", {"command": "cat src/a.py"}), False),
    (tool_action("Bash", {"command": "sed -n 1,20p src/a.py"}), tool_action("Bash", {"command": "sed -n 1p b.py"}), False),
    (tool_action("Bash", {"command": "sed -n 1,20p src/a.py"}), tool_action("Bash", {"command": "ls docs"}), False),
    (tool_action("bash", {"command": "git status"}), tool_action("bash", {"command": "git status --short"}), True),
    (tool_action("bash", {"command": "git status"}), tool_action("bash", {"command": "git diff"}), False),
    # an editor: its file, whatever the sub-command
    (tool_action("str_replace_editor", {"command": "view", "path": "/testbed/a.py"}),
     tool_action("str_replace_editor", {"command": "str_replace", "path": "a.py"}), True),
    (tool_action("str_replace_editor", {"command": "view", "path": "/testbed/a.py"}),
     tool_action("str_replace_editor", {"command": "view", "path": "b.py"}), False),
    (tool_action("Bash", {"command": "sed -n 1,20p src/a.py"}), tool_action("Read", {"file_path": "src/a.py"}), False),
    # tool and target only: both needed; a suffix path is the same file
    (tool_action("Read", {"file_path": "/repo/src/a.py"}), tool_action("Read", {"file_path": "src/a.py"}), True),
    (tool_action("Read", {"file_path": "/repo/src/a.py"}), tool_action("Read", {"file_path": "src/b.py"}), False),
    # a tool only: the tool
    (tool_action("TodoWrite", {"todos": []}), tool_action("todowrite", {}), True),
    # a tool call and a text never agree
    (tool_action("Read", {"file_path": "a.py"}), Action("text", text="a.py"), False),
    (Action("text", text="The fix is in place and the tests pass."),
     Action("text", text="The fix is in place, and all the tests pass."), True),
    (Action("text", text="The fix is in place and the tests pass."), Action("text", text="I need more information."),
     False),
])
def test_agreement(recorded, reply, agrees):
    assert agree(recorded, reply) is agrees


def test_chance_agreement_is_a_random_recorded_action_or_the_previous_one():
    """(#46 §2) What the rule gives by chance: a random other recorded action of the transcript, and
    the previous action repeated."""
    from compactlab.next_action.actions import chance, repeats

    acts = [tool_action("bash", {"command": c}) for c in ("ls src", "cat src/a.py", "cat src/a.py", "pytest -q",
                                                          "cat src/a.py")]
    assert chance(acts, 1) == 2 / 4 and chance(acts, 3) == 0.0 and chance(acts, 0) == 0.0
    assert repeats(acts, 2) and not repeats(acts, 1) and not repeats(acts, 0)
    assert chance([acts[0]], 0) == 0.0


def test_similarity_is_difflib_ratio_of_words():
    assert similarity("a b c d", "a b c d") == 1.0
    assert similarity("a b c d", "a b x y") == 0.5
    assert similarity("", "") == 1.0


def test_a_megabyte_command_is_read_in_linear_time():
    """(#49) shlex builds a token a character at a time: a 1 MB base64 argument took 12.5 s and a
    transcript of them 157 CPU s in next-action --dry-run. Only the start of a segment is read: a
    16 times longer argument runs no more lines of Python (counted, not timed)."""
    from compactlab.next_action.actions import tool_action
    from helpers import lines_run

    def lines(token: str) -> int:
        def read() -> None:
            for command in (f"echo {token} > out.b64", f"cd src && python -c '{token}'", f'cat "{token}'):
                action = tool_action("bash", {"command": command})
                assert action.command in ("echo", "python", "cat")
        return lines_run(read)

    short, long = lines("QUJD" * 16_384), lines("QUJD" * 262_144)  # 64 KiB and 1 MiB, one word each
    assert long < 2 * short, (short, long)


def test_a_long_action_is_cut_in_its_paths_middle_keeping_the_tool_the_file_and_the_command():
    """The dry run's table showed "bash /testbed/django/db/models/fields/reverse_related.py [g…":
    the command the agent ran, the most telling part, was what a cut at the end lost. A long
    target is now cut in its middle, the tool, the file's name and the command whole."""
    a = Action("tool", "bash", "/testbed/django/db/models/fields/reverse_related.py", "grep")
    assert a.describe(100) == "bash /testbed/django/db/models/fields/reverse_related.py [grep]"
    for width in (60, 45, 30):
        line = a.describe(width)
        assert len(line) == width and line.startswith("bash /te") and line.endswith("related.py [grep]"), line
        assert "…" in line
    # (where the file's name fits, it stays whole with its "/": the folders are what is cut)
    assert a.describe(45) == "bash /testbed/djan…/reverse_related.py [grep]"
    edit = Action("tool", "edit_file", "scripts/merge_summary.toml")
    assert edit.describe(33) == "edit_file scr…/merge_summary.toml"
    short = Action("tool", "bash", "x" * 40, "grep" * 10)  # (no room in the target: cut at the end, as before)
    assert len(short.describe(30)) == 30 and short.describe(30).endswith("…")
    assert Action("text", text="word " * 40).describe(20) == "text: word word wor…"
