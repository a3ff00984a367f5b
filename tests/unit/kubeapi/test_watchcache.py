"""The HTTPS API's watch cache (kctl.kubeapi.watchcache): one reader per kind fanned out to asyncio watchers."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from kctl.apiserver.server import APIServer
from kctl.kubeapi import watchcache
from kctl.kubeapi.app import ServerContext
from kctl.machinery.resources import builtin_registry
from kctl.machinery.selectors import parse_field_selector, parse_label_selector
from kctl.store.sqlite import Store

#: seconds a test waits for something that must happen (generous: a loaded 2-core machine)
WAIT = 30.0
CONFIGMAPS = builtin_registry().lookup("configmaps")


def _cm(name: str, namespace: str = "default", **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace,
                                                                  "labels": labels}, "data": {}}


@pytest.fixture
def ctx(tmp_path: Path):
    """A ServerContext over a fresh store (no HTTPS server: the cache is driven directly)."""
    context = ServerContext(api=APIServer(Store(tmp_path / "kctl.db"), user="tester", audit_log=None))
    context.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    try:
        yield context
    finally:
        context.stopping.set()
        context.executor.shutdown(wait=True)


def _readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kubeapi-watchcache:")]


async def _write(ctx: ServerContext, fn, *args, **kwargs):
    return await asyncio.to_thread(fn, *args, **kwargs)


async def _drain(watcher: watchcache.Watcher, count: int) -> list[tuple[str, str]]:
    """The next `count` events as (type, name); fails if the watch ends first."""
    out = []
    for _ in range(count):
        item = await watcher.get(WAIT)
        assert item is not watchcache.END, f"the watch ended after {out}"
        out.append((item[0], item[1]["metadata"]["name"]))
    return out


def test_every_watcher_gets_every_change_in_order_from_one_reader(ctx):
    """Two watchers see ADDED, MODIFIED, DELETED in order, from one reader thread, sharing the decoded event."""
    async def main():
        api = ctx.api
        since = await _write(ctx, api.revision)
        first = await watchcache.subscribe(ctx, CONFIGMAPS, namespace="default", since=since)
        second = await watchcache.subscribe(ctx, CONFIGMAPS, namespace="default", since=since)
        assert len([t for t in _readers() if t.name.endswith(":configmaps")]) == 1
        await _write(ctx, api.create, _cm("a"))
        await _write(ctx, api.patch, CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace="default",
                     patch_type="merge")
        await _write(ctx, api.delete, CONFIGMAPS, "a", namespace="default")
        expected = [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
        assert await _drain(first, 3) == expected
        items = [second.queue.get_nowait() for _ in range(3)]
        assert [(t, o["metadata"]["name"]) for t, o, _ in items] == expected
        revisions = [int(o["metadata"]["resourceVersion"]) for _, o, _ in items]
        assert revisions == sorted(revisions) and revisions[0] > since
        first.close()
        second.close()

    asyncio.run(main())


@pytest.mark.parametrize(("options", "expected"), [
    ({"namespace": "other"}, [("ADDED", "o")]),
    ({"namespace": None}, [("ADDED", "a"), ("ADDED", "o"), ("MODIFIED", "a")]),
    ({"namespace": None, "label_selector": "tier=web"}, [("ADDED", "o"), ("ADDED", "a")]),
    ({"namespace": "default", "label_selector": "tier=db", "known": {("default", "a")}}, [("DELETED", "a")]),
    ({"namespace": None, "field_selector": "metadata.name=o"}, [("ADDED", "o")]),
])
def test_each_watcher_filters_as_the_api_does(ctx, options, expected):
    """Namespace, label and field selectors per watcher; entering a selector is ADDED, leaving it DELETED."""
    async def main():
        api = ctx.api
        known = options.get("known")
        if known:
            await _write(ctx, api.create, _cm("a", tier="db"))
        since = await _write(ctx, api.revision)
        label = options.get("label_selector")
        field = options.get("field_selector")
        watcher = await watchcache.subscribe(
            ctx, CONFIGMAPS, namespace=options["namespace"], since=since, known=known,
            label_selector=parse_label_selector(label) if label else None,
            field_selector=parse_field_selector(field, kind="ConfigMap") if field else None)
        try:
            if not known:
                await _write(ctx, api.create, _cm("a"))
            await _write(ctx, api.create, _cm("o", namespace="other", tier="web"))
            await _write(ctx, api.patch, CONFIGMAPS, "a", {"metadata": {"labels": {"tier": "web"}}},
                         namespace="default", patch_type="merge")
            marker = await _write(ctx, api.create, _cm("zz-end", namespace="other"))
            end = int(marker["metadata"]["resourceVersion"])
            deadline = asyncio.get_running_loop().time() + WAIT
            while watcher.broadcaster.position < end:  # every change reached the watchers
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.01)
            got = []
            while not watcher.queue.empty():
                event_type, obj, _ = watcher.queue.get_nowait()
                if obj["metadata"]["name"] != "zz-end":
                    got.append((event_type, obj["metadata"]["name"]))
            assert got == expected
        finally:
            watcher.close()

    asyncio.run(main())


def test_a_slow_watcher_is_ended_and_the_others_go_on(ctx):
    """A watcher whose bounded queue fills is ended (after what it holds); another watcher gets every change."""
    async def main():
        api = ctx.api
        since = await _write(ctx, api.revision)
        cache = watchcache.cache_of(ctx)
        slow = await cache.subscribe(CONFIGMAPS, namespace="default", since=since, capacity=2)
        fast = await cache.subscribe(CONFIGMAPS, namespace="default", since=since)
        names = [f"c{i}" for i in range(5)]
        for name in names:
            await _write(ctx, api.create, _cm(name))
        assert await _drain(fast, 5) == [("ADDED", name) for name in names]
        assert slow.done and slow.overflowed
        assert await _drain(slow, 2) == [("ADDED", "c0"), ("ADDED", "c1")]
        assert await slow.get(WAIT) is watchcache.END
        await _write(ctx, api.create, _cm("later"))
        assert await _drain(fast, 1) == [("ADDED", "later")]
        slow.close()
        fast.close()

    asyncio.run(main())


def test_a_watcher_behind_the_reader_gets_the_gap_then_live_changes(ctx):
    """A revision the reader has passed: the changes in between from the API, then the live ones, each once."""
    async def main():
        api = ctx.api
        start = await _write(ctx, api.revision)
        early = await watchcache.subscribe(ctx, CONFIGMAPS, namespace="default", since=start)
        await _write(ctx, api.create, _cm("a"))
        middle = await _write(ctx, api.revision)
        await _write(ctx, api.create, _cm("b"))
        assert await _drain(early, 2) == [("ADDED", "a"), ("ADDED", "b")]
        late = await watchcache.subscribe(ctx, CONFIGMAPS, namespace="default", since=middle)
        await _write(ctx, api.create, _cm("c"))
        assert await _drain(late, 2) == [("ADDED", "b"), ("ADDED", "c")]
        from_start = await watchcache.subscribe(ctx, CONFIGMAPS, namespace="default", since=start)
        assert await _drain(from_start, 3) == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")]
        assert from_start.queue.empty() and late.queue.empty()
        for watcher in (early, late, from_start):
            watcher.close()

    asyncio.run(main())


def test_a_compacted_revision_is_a_410_error_event(ctx):
    """A revision behind the compacted horizon: the watcher gets one ERROR event (410 Expired), then END."""
    async def main():
        api = ctx.api
        start = await _write(ctx, api.revision)
        keeper = await watchcache.subscribe(ctx, CONFIGMAPS, namespace="default", since=start)
        for name in ("a", "b", "c"):
            await _write(ctx, api.create, _cm(name))
        await _drain(keeper, 3)
        await _write(ctx, api.store.compact, keep=0)
        old = await watchcache.subscribe(ctx, CONFIGMAPS, namespace="default", since=start)
        event_type, error, _ = await old.get(WAIT)
        assert event_type == "ERROR" and error["code"] == 410 and error["reason"] == "Expired"
        assert await old.get(WAIT) is watchcache.END
        keeper.close()
        old.close()

    asyncio.run(main())


@pytest.mark.parametrize("how", ["last watcher leaves", "server stops"])
def test_the_reader_stops(ctx, how):
    """The reader thread ends when its last watcher leaves (no linger) or when the server stops (watchers end)."""
    async def main():
        cache = watchcache.cache_of(ctx)
        cache.linger = 0
        since = await _write(ctx, ctx.api.revision)
        watcher = await cache.subscribe(CONFIGMAPS, namespace="default", since=since)
        reader = watcher.broadcaster.thread
        assert reader is not None and reader.is_alive()
        if how == "server stops":
            ctx.stopping.set()
            assert await watcher.get(WAIT) is watchcache.END
        else:
            watcher.close()
        await asyncio.to_thread(reader.join, WAIT)
        assert not reader.is_alive()
        assert not cache.broadcasters
        watcher.close()

    asyncio.run(main())


def test_an_encoded_line_is_shared():
    """Event.line encodes once per (type, version): every watcher asking the same form gets the same bytes."""
    event = watchcache.Event("MODIFIED", _cm("a"))
    calls = []

    def convert(obj: dict) -> dict:
        calls.append(1)
        return {**obj, "apiVersion": "x/v9"}

    assert event.line("MODIFIED") is event.line("MODIFIED")
    assert event.line("ADDED") != event.line("MODIFIED")
    first = event.line("MODIFIED", version="x/v9", convert=convert)
    assert event.line("MODIFIED", version="x/v9", convert=convert) is first and len(calls) == 1
    assert b'"apiVersion":"x/v9"' in first


def test_watches_of_one_kind_in_different_forms_share_the_reader_not_the_form(kubeapi):
    """Over HTTPS: a JSON watch, a Table watch and a namespaced watch of ConfigMaps each get their own form."""
    import json

    base = "/api/v1/namespaces/default/configmaps"
    revision = kubeapi.request("GET", base).json()["metadata"]["resourceVersion"]
    table = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    streams = [kubeapi.stream(f"{base}?watch=true&resourceVersion={revision}", timeout=WAIT),
               kubeapi.stream(f"{base}?watch=true&resourceVersion={revision}", headers=table, timeout=WAIT),
               kubeapi.stream(f"/api/v1/configmaps?watch=true&resourceVersion={revision}", timeout=WAIT)]
    try:
        reply = kubeapi.request("POST", base, body=_cm("shared"))
        assert reply.status == 201, reply.body
        events = [json.loads(response.readline()) for _, response in streams]
        assert [e["type"] for e in events] == ["ADDED"] * 3
        assert events[0]["object"]["kind"] == "ConfigMap" and events[2]["object"]["kind"] == "ConfigMap"
        assert events[1]["object"]["kind"] == "Table"
        assert events[1]["object"]["rows"][0]["cells"][0] == "shared"
        readers = [b for b in watchcache.cache_of(kubeapi.serving.ctx).broadcasters.values()
                   if b.rt.plural == "configmaps"]
        assert len(readers) == 1 and len(readers[0].watchers) == 3
    finally:
        for conn, _ in streams:
            conn.close()
