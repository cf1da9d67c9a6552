"""The floor for JSON-RPC over WebSocket: a raw `websockets` server answering each call with its params
(orjson in, orjson out, no registry, no validation).   python ws_echo.py --port N"""
import argparse
import asyncio

import orjson
import websockets


async def handler(ws):
    async for msg in ws:
        try:
            call = orjson.loads(msg)
            reply = {"jsonrpc": "2.0", "id": call.get("id"), "result": call.get("params")}
        except (orjson.JSONDecodeError, AttributeError):
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        await ws.send(orjson.dumps(reply).decode())


async def main(host: str, port: int) -> None:
    async with websockets.serve(handler, host, port, compression=None, max_size=1 << 20):
        print(f"ws_echo listening on ws://{host}:{port}/", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main(a.host, a.port))
