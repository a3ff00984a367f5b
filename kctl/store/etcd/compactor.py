"""The etcd store's periodic compactor, as kube-apiserver's (k8s.io/apiserver storage/etcd3 compact.go).

Every daemon may run one: each `interval` seconds it tries a compare-and-swap on the version
of one key (`<prefix>/.kctl/compact_rev_key`); the one that wins compacts etcd to the revision
it saw one interval earlier, so several daemons do not compact twice and a watcher always has
at least one interval to catch up. Started by EtcdStore when compaction_interval is given.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from kctl.store.etcd import keys

if TYPE_CHECKING:
    from kctl.store.etcd.store import EtcdStore

log = logging.getLogger("kctl.store.etcd")


class Compactor:
    """A daemon thread compacting the store every `interval` seconds (see the module docstring)."""

    def __init__(self, store: "EtcdStore", interval: float) -> None:
        self._store = store
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kctl-etcd-compactor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _run(self) -> None:
        version, revision = 0, 0
        while not self._stop.wait(self.interval):
            try:
                version, revision = self.step(version, revision)
            except Exception as error:  # noqa: BLE001 - a failed round is logged; the next interval tries again
                log.warning("etcd compaction skipped: %s", error)

    def step(self, version: int, revision: int) -> tuple[int, int]:
        """One round: (the key's version to expect next time, the revision to compact to next time)."""
        key = keys.b64(self._store.layout.compactor)
        answer = self._store.client.call("/kv/txn", {
            "compare": [{"key": key, "result": "EQUAL", "target": "VERSION", "version": str(version)}],
            "success": [{"request_put": {"key": key, "value": keys.b64(str(revision))}}],
            "failure": [{"request_range": {"key": key}}]}, write=True)
        current = int(answer["header"]["revision"])
        if not answer.get("succeeded"):  # another daemon compacted this round: follow its key's version
            kvs = answer["responses"][0]["response_range"].get("kvs") or []
            return (int(kvs[0].get("version", 0)) if kvs else 0), current
        if revision:  # nothing to compact on the first round (kube-apiserver's bootstrap)
            self._store.compact_to(revision - 1)
        return version + 1, current
