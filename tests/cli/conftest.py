"""Run the real `kctl` command in-process (fast) against a fresh store per test."""

from __future__ import annotations

import io
import sys
import threading
from dataclasses import dataclass

import pytest


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def kctl(store_path, capsys, monkeypatch):
    """kctl(*args, input=None) -> Result(code, out, err), through kctl.cli.main.main."""
    from kctl.cli.main import main

    def run(*args: str, input: str | bytes | None = None) -> Result:
        data = input.encode() if isinstance(input, str) else (input or b"")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    yield run


@pytest.fixture
def server(store_path):
    """A second client of the CLI's store: the 'controller' side of a test."""
    from kctl.apiserver.server import APIServer
    from kctl.store.sqlite import Store

    store_path.parent.mkdir(parents=True, exist_ok=True)
    s = Store(store_path)
    yield APIServer(s, user="controller")
    s.close()


@pytest.fixture
def watching(monkeypatch):
    """An Event set when the command under test starts its API watch."""
    from kctl.apiserver.server import APIServer

    started = threading.Event()
    original = APIServer.watch

    def watch(self, *args, **kwargs):
        started.set()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(APIServer, "watch", watch)
    return started
