"""The floors for JSON-RPC over WebSocket: a raw server answering each call with its params (orjson in, orjson
out, no registry, no validation), on `websockets` or on `picows` (rpc_app's own stack, so "rpc_app ÷ floor" is
what the RPC layer costs on the same transport).   python ws_echo.py --port N [--stack websockets|picows]"""
import argparse
import asyncio

import orjson

PARSE_ERROR = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})


def answer(msg) -> bytes:
    try:
        call = orjson.loads(msg)
        return orjson.dumps({"jsonrpc": "2.0", "id": call.get("id"), "result": call.get("params")})
    except (orjson.JSONDecodeError, AttributeError):
        return PARSE_ERROR


async def serve_websockets(host: str, port: int) -> None:
    import websockets

    async def handler(ws):
        async for msg in ws:
            await ws.send(answer(msg).decode())

    async with websockets.serve(handler, host, port, compression=None, max_size=1 << 20):
        print(f"ws_echo (websockets) listening on ws://{host}:{port}/", flush=True)
        await asyncio.Future()


async def serve_picows(host: str, port: int) -> None:
    from picows import WSListener, WSMsgType, ws_create_server

    class Echo(WSListener):
        def on_ws_frame(self, transport, frame):
            if frame.msg_type == WSMsgType.TEXT:
                transport.send(WSMsgType.TEXT, answer(frame.get_payload_as_memoryview()))
            elif frame.msg_type == WSMsgType.CLOSE:
                transport.send_close(frame.get_close_code(), frame.get_close_message())
                transport.disconnect()
            elif frame.msg_type == WSMsgType.PING:
                transport.send_pong(frame.get_payload_as_bytes())

    server = await ws_create_server(lambda _request: Echo(), host, port)
    print(f"ws_echo (picows) listening on ws://{host}:{port}/", flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--stack", choices=["websockets", "picows"], default="websockets")
    a = p.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve_websockets(a.host, a.port) if a.stack == "websockets" else serve_picows(a.host, a.port))
