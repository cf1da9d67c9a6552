"""Raw WebSocket echo servers (the floor of each stack), for choosing the server stack.

    python bench/echo_servers.py --stack websockets|picows --port 0

Each echoes every message back as a text frame; the echoed request carries its id, so a
JSON-RPC load generator matches it like a response.
"""

import argparse
import asyncio


async def run_websockets(host, port):
    from websockets.asyncio.server import serve

    async def handler(ws):
        async for msg in ws:
            await ws.send(msg)

    server = await serve(handler, host, port, compression=None)
    print(f"echo (websockets) listening on ws://{host}:{next(iter(server.sockets)).getsockname()[1]}/", flush=True)
    await server.serve_forever()


async def run_picows(host, port):
    from picows import WSFrame, WSListener, WSMsgType, WSTransport, ws_create_server

    class Echo(WSListener):
        def on_ws_frame(self, transport: WSTransport, frame: WSFrame):
            if frame.msg_type == WSMsgType.TEXT:
                transport.send(WSMsgType.TEXT, frame.get_payload_as_bytes())
            elif frame.msg_type == WSMsgType.CLOSE:
                transport.send_close(frame.get_close_code(), frame.get_close_message())
                transport.disconnect()
            elif frame.msg_type == WSMsgType.PING:
                transport.send_pong(frame.get_payload_as_bytes())

    server = await ws_create_server(lambda _req: Echo(), host, port)
    print(f"echo (picows) listening on ws://{host}:{server.sockets[0].getsockname()[1]}/", flush=True)
    await server.serve_forever()


async def run_fanout_websockets(host, port):
    """Push fan-out on plain websockets: a message from a /pub connection goes to every /sub connection."""
    from websockets.asyncio.server import broadcast, serve

    subscribers = set()

    async def handler(ws):
        if ws.request.path == "/pub":
            async for msg in ws:
                broadcast(subscribers, msg)
            return
        subscribers.add(ws)
        try:
            await ws.wait_closed()
        finally:
            subscribers.discard(ws)

    server = await serve(handler, host, port, compression=None, max_queue=None)
    print(f"fan-out (websockets) listening on ws://{host}:{next(iter(server.sockets)).getsockname()[1]}/", flush=True)
    await server.serve_forever()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stack", choices=["websockets", "picows", "fanout-websockets"], default="websockets")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop", help="as rpc_app's --loop")
    args = ap.parse_args()
    fn = {"websockets": run_websockets, "picows": run_picows, "fanout-websockets": run_fanout_websockets}[args.stack]
    try:
        if args.loop == "uvloop":
            import uvloop
            uvloop.run(fn(args.host, args.port))
        else:
            asyncio.run(fn(args.host, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
