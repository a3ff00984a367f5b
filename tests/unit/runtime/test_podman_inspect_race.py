"""Podman's transient 500s are asked again: inspecting a container that is just exiting ("/proc/<pid>/cgroup: no
such process", kctl.runtime.podman.containers.EXIT_RACE) and putting files whose copier ended early (COPY_RACE);
any other error, or the race every time, is raised."""

from __future__ import annotations

from typing import Any

import pytest
from podman import errors as podman_errors

from kctl.runtime.interface import RuntimeError_
from kctl.runtime.podman import containers as module
from kctl.runtime.podman.containers import Containers

EXITED = {"Id": "c" * 64, "Name": "ctr", "State": {"Status": "exited", "ExitCode": 0,
                                                  "StartedAt": "2026-12-05T08:00:00Z",
                                                  "FinishedAt": "2026-12-05T08:00:01Z"},
          "Config": {"Labels": {}, "Image": "img"}, "ImageName": "img", "Pod": ""}
RACE = "read /proc/13069/cgroup: no such process"


class _Scripted(Containers):
    """Containers whose GET answers come from a script: an exception message to raise, or a body."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls = 0

    def _get(self, path: str, *, params: dict | None = None, timeout: float | None = None) -> Any:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, str):
            raise podman_errors.APIError("500 Server Error", explanation=answer)
        return answer


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(module, "EXIT_RACE_PAUSE", 0)


@pytest.mark.parametrize("answers, calls", [
    ([EXITED], 1),
    ([RACE, EXITED], 2),
    ([RACE, RACE, EXITED], 3),
], ids=["at-once", "one-race", "two-races"])
def test_the_exit_race_is_asked_again(answers, calls):
    """The race answered once or twice, then the exit: the exited state, after that many calls."""
    runtime = _Scripted(list(answers))
    state = runtime.inspect_container("c" * 64)
    assert (state.state, state.exit_code, runtime.calls) == ("exited", 0, calls)


@pytest.mark.parametrize("answers, calls", [
    ([RACE, RACE, RACE, EXITED], 3),
    (["some other failure", EXITED], 1),
], ids=["race-every-time", "other-error"])
def test_other_errors_and_a_lasting_race_are_raised(answers, calls):
    """Another 500, or the race on every attempt, is the caller's error."""
    runtime = _Scripted(list(answers))
    with pytest.raises(RuntimeError_):
        runtime.inspect_container("c" * 64)
    assert runtime.calls == calls


COPY_RACE = "passing bulk input to subprocess: write |1: broken pipe"


class _Response:
    def __init__(self, answer: str | None) -> None:
        self.answer = answer

    def raise_for_status(self) -> None:
        if self.answer is not None:
            raise podman_errors.APIError("500 Server Error", explanation=self.answer)


class _ScriptedPut(Containers):
    """Containers whose archive PUT answers come from a script: an error message, or None for success."""

    def __init__(self, answers: list[str | None]) -> None:
        self.answers = answers
        self.calls = 0

    def _api(self) -> Any:
        return self

    def put(self, path: str, *, params: dict, data: bytes) -> _Response:
        self.calls += 1
        return _Response(self.answers.pop(0))


@pytest.mark.parametrize("answers, calls, fails", [
    ([None], 1, False),
    ([COPY_RACE, None], 2, False),
    ([COPY_RACE, COPY_RACE, COPY_RACE, None], 3, True),
    (["some other failure", None], 1, True),
], ids=["at-once", "one-race", "race-every-time", "other-error"])
def test_files_are_put_again_when_podmans_copier_ends_early(answers, calls, fails):
    """The copier's broken pipe is asked again, up to the attempts; another error, or the race every time, raises."""
    runtime = _ScriptedPut(list(answers))
    if fails:
        with pytest.raises(RuntimeError_):
            runtime.write_files("c" * 64, "/data", {"a.txt": (b"x", 0o644)})
    else:
        runtime.write_files("c" * 64, "/data", {"a.txt": (b"x", 0o644)})
    assert runtime.calls == calls
