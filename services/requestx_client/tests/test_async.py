"""AsyncClient on asyncio and on uvloop."""

from __future__ import annotations

import asyncio
import time

import pytest
import uvloop

import requestx_client as requests
from requestx_client import exceptions as exc


async def _scenario(server, tls_server, ca_file, refused_url):
    async with requests.AsyncClient(verify=ca_file) as c:
        r = await c.get(server.url + "/echo", params={"a": "1"})
        assert r.status_code == 200 and r.json()["args"] == [["a", "1"]]
        r = await c.post(server.url + "/echo", json={"k": [1, 2]})
        assert r.json()["body"] == '{"k":[1,2]}'
        r = await c.get(tls_server.url + "/gzip")
        assert r.json()["encoding"] == "gzip"
        # 64 concurrent requests, results matched to their requests
        rs = await asyncio.gather(*(c.get(server.url + "/echo", params={"i": i}) for i in range(64)))
        assert [int(r.json()["args"][0][1]) for r in rs] == list(range(64))
        # redirects, cookies
        r = await c.get(server.url + "/cookies/set?x=1")
        assert [h.status_code for h in r.history] == [302] and r.json()["cookie"] == "x=1"
        with pytest.raises(exc.TooManyRedirects):
            await c.get(server.url + "/loop")
        # faults
        with pytest.raises(exc.ConnectionError):
            await c.get(refused_url)
        t0 = time.monotonic()
        with pytest.raises(exc.ReadTimeout):
            await c.get(server.url + "/slow-headers?delay=1", timeout=(1, 0.2))
        assert time.monotonic() - t0 < 0.25
        with pytest.raises(exc.InvalidSchema):
            await c.get("ftp://x/")
        # the loop stays responsive while requests are in flight
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        t = asyncio.create_task(ticker())
        await asyncio.gather(*(c.get(server.url + "/slow-headers?delay=0.3") for _ in range(4)))
        t.cancel()
        assert ticks > 20
        # cancellation
        task = asyncio.create_task(c.get(server.url + "/slow-headers?delay=1"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(c.get(server.url + "/slow-headers?delay=1"), 0.1)
        assert (await c.get(server.url + "/echo")).ok
    with pytest.raises(RuntimeError):
        await c.get(server.url + "/echo")


def test_asyncio(server, tls_server, ca_file, refused_url):
    asyncio.run(_scenario(server, tls_server, ca_file, refused_url))


def test_uvloop(server, tls_server, ca_file, refused_url):
    loop = uvloop.new_event_loop()
    try:
        assert type(loop).__module__.startswith("uvloop")
        loop.run_until_complete(_scenario(server, tls_server, ca_file, refused_url))
    finally:
        loop.close()


def test_client_outlives_loops(server):
    c = requests.AsyncClient()

    async def one():
        return (await c.get(server.url + "/echo")).status_code

    assert asyncio.run(one()) == 200
    assert asyncio.run(one()) == 200  # pooled connections survive a new event loop
