"""`kctl edit` with a scripted editor: a refused edit reopens with the error on top and the edits kept."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n"

#: the editor: applies the next step to the file, and logs what it was shown
EDITOR = """\
import json, sys
steps_file, path = sys.argv[1], sys.argv[2]
state = json.load(open(steps_file))
text = open(path).read()
state["seen"].append(text)
step = state["steps"][len(state["seen"]) - 1]
json.dump(state, open(steps_file, "w"))
if step.get("exit"):
    sys.exit(step["exit"])
if "replace" in step:
    old, new = step["replace"]
    assert old in text, (old, text)
    text = text.replace(old, new)
open(path, "w").write(text)
"""


@pytest.fixture
def editor(tmp_path, monkeypatch):
    """editor(*steps) -> the views the editor was shown, once the command ran; sets $EDITOR."""
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    state = tmp_path / "steps.json"
    monkeypatch.delenv("KUBE_EDITOR", raising=False)
    monkeypatch.setenv("EDITOR", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(state))}")

    def plan(*steps: dict) -> None:
        state.write_text(json.dumps({"steps": list(steps), "seen": []}))

    plan.seen = lambda: json.loads(state.read_text())["seen"]
    return plan


def value(kctl) -> str:
    return kctl("get", "cm", "a", "-o", "jsonpath={.data.k}").out


def test_refused_edit_reopens_with_the_error_and_the_edits_kept(kctl, editor):
    """An edit the API refuses comes back with `was not valid` on top and the user's change; the fix is saved."""
    kctl("apply", "-f", "-", input=CM)
    editor({"replace": ["k: v", "k: [1]\n  mine: kept"]}, {"replace": ["k: [1]", "k: fixed"]})
    result = kctl("edit", "cm", "a")
    assert result.code == 0, result.err
    assert result.out == "configmap/a edited\n"
    first, second = editor.seen()
    assert first.startswith("# Please edit the object below.")
    assert re.search(r'^# configmaps "a" was not valid:\n# \* data\.k: .*must be a string', second, re.M), second
    assert "k: [1]" in second and "mine: kept" in second
    assert value(kctl) == "fixed"
    assert kctl("get", "cm", "a", "-o", "jsonpath={.data.mine}").out == "kept"


def test_syntax_error_reopens_the_editor(kctl, editor):
    """YAML that does not parse reopens with `The edited file had a syntax error`; the next save works."""
    kctl("apply", "-f", "-", input=CM)
    editor({"replace": ["k: v", "k: [unclosed"]}, {"replace": ["k: [unclosed", "k: w"]})
    result = kctl("edit", "cm", "a")
    assert result.code == 0, result.err
    _, second = editor.seen()
    assert "# The edited file had a syntax error: " in second and "k: [unclosed" in second
    assert value(kctl) == "w"


def test_giving_up_after_an_error_keeps_a_copy(kctl, editor):
    """Saving the refused file again unchanged stops with exit 1 and says where a copy of the edits is."""
    kctl("apply", "-f", "-", input=CM)
    editor({"replace": ["k: v", "k: [1]"]}, {})
    result = kctl("edit", "cm", "a")
    assert result.code == 1
    assert "error: Edit cancelled, no valid changes were saved." in result.err
    match = re.search(r'A copy of your changes has been stored to "([^"]+)"', result.err)
    assert match, result.err
    copy = Path(match.group(1))
    try:
        assert "k: [1]" in copy.read_text()
    finally:
        copy.unlink()
    assert value(kctl) == "v"


@pytest.mark.parametrize("step", [{}, {"replace": ["apiVersion: v1\n", "# apiVersion: v1\n"]}],
                         ids=["unchanged", "emptied-field-back-as-comment"])
def test_unchanged_edit_is_cancelled(kctl, editor, step):
    """Saving without a change: `Edit cancelled, no changes made.`, exit 0, nothing stored."""
    kctl("apply", "-f", "-", input=CM)
    if step:  # a line turned into a comment is gone: the object changed (apiVersion), refused, then given up
        editor(step, {})
        result = kctl("edit", "cm", "a")
        assert result.code == 1 and "# error: At least one of apiVersion, kind and name was changed" \
            in editor.seen()[1]
        Path(re.search(r'stored to "([^"]+)"', result.err).group(1)).unlink()
    else:
        editor(step)
        result = kctl("edit", "cm", "a")
        assert (result.code, result.out) == (0, "Edit cancelled, no changes made.\n")
    assert value(kctl) == "v"


def test_editor_failure_changes_nothing(kctl, editor):
    """An editor that exits non-zero: one error line, exit 1, nothing stored, no temp file left."""
    kctl("apply", "-f", "-", input=CM)
    editor({"exit": 3})
    result = kctl("edit", "cm", "a")
    assert result.code == 1 and "exited with status 3" in result.err
    assert "A copy" not in result.err
    assert value(kctl) == "v"
