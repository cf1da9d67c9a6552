"""``python -m rpc_app --host 127.0.0.1 --port 8082``: the standalone server with the example methods."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from .engine import Engine
from .limits import Limits
from .methods import build_registry
from .metrics import Metrics
from .config import ServerConfig, tls_context
from .ratelimit import RateLimit
from .server import RpcServer


def parse_args(argv=None):
    d = Limits()
    p = argparse.ArgumentParser(prog="rpc_app", description="JSON-RPC 2.0 over WebSocket (example methods: "
                                "add, add_async, echo, sleep, big, fail, fail_rpc, blocking_sleep, subscribe, unsubscribe, "
                                "publish, countdown; rpc.discover describes them)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8082, help="0 = ephemeral (the bound port is printed)")
    p.add_argument("--server", choices=["picows", "websockets"], default="picows",
                   help="WebSocket stack (picows measured ~2x faster; see README)")
    p.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop",
                   help="event loop (uvloop: libuv-based, the faster default)")
    p.add_argument("--debug", action="store_true", help="include tracebacks in -32603 errors")
    p.add_argument("--max-message-bytes", type=int, default=d.max_message_bytes)
    p.add_argument("--max-depth", type=int, default=d.max_depth)
    p.add_argument("--max-array-length", type=int, default=d.max_array_length)
    p.add_argument("--max-string-length", type=int, default=d.max_string_length)
    p.add_argument("--max-method-name-length", type=int, default=d.max_method_name_length)
    p.add_argument("--max-batch-length", type=int, default=d.max_batch_length, help="requests in one batch")
    p.add_argument("--max-response-bytes", type=int, default=d.max_response_bytes,
                   help="one response or a whole batch answer (larger: -32001 per call)")
    p.add_argument("--max-in-flight", type=int, default=64,
                   help="calls running at once per connection (batch members included)")
    p.add_argument("--call-timeout", type=float, default=300.0,
                   help="deadline of async and blocking calls in seconds (-32003 on expiry; 0 = none)")
    p.add_argument("--rate-limit", type=float, default=0, help="calls/s per connection (0 = off)")
    p.add_argument("--rate-burst", type=float, default=None)
    p.add_argument("--no-compression", action="store_true", help="refuse permessage-deflate")
    p.add_argument("--compress-min-bytes", type=int, default=1024)
    p.add_argument("--ping-interval", type=float, default=20.0)
    p.add_argument("--ping-timeout", type=float, default=20.0)
    p.add_argument("--send-timeout", type=float, default=10.0,
                   help="drop a client that has not read a response for this many seconds")
    p.add_argument("--sample-every", type=int, default=64, help="time 1 call in N stage by stage (power of 2)")
    p.add_argument("--no-metrics", action="store_true",
                   help="turn instrumentation and /metrics off (to measure what the metrics cost)")
    p.add_argument("--allowed-origin", action="append", dest="allowed_origins", metavar="ORIGIN",
                   help="accept browser handshakes from this Origin (repeatable; '*' = any; "
                        "default: only pages of the host the client connected to)")
    p.add_argument("--max-connections", type=int, default=10_000)
    p.add_argument("--max-connections-per-ip", type=int, default=0,
                   help="open connections from one address (0 = no limit; behind a proxy all share its address)")
    p.add_argument("--assembly-timeout", type=float, default=10.0,
                   help="seconds a fragmented message may take to complete (picows)")
    p.add_argument("--shutdown-grace", type=float, default=10.0,
                   help="on SIGTERM/SIGINT: seconds calls in flight may run on before connections close")
    p.add_argument("--certfile", help="serve wss:// with this certificate chain (PEM)")
    p.add_argument("--keyfile", help="private key of --certfile (PEM), if not in it")
    p.add_argument("--log-level", default="WARNING")
    args = p.parse_args(argv)
    if not 0 <= args.port <= 65535:
        p.error("--port must be within 0..65535")
    if args.keyfile and not args.certfile:
        p.error("--keyfile needs --certfile")
    if args.call_timeout < 0:
        p.error("--call-timeout must be >= 0")
    args.ssl = None
    if args.certfile:
        try:
            args.ssl = tls_context(args.certfile, args.keyfile)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            p.error(f"cannot load --certfile/--keyfile: {exc}")
    return p, args


async def amain(args) -> None:
    limits = Limits(max_message_bytes=args.max_message_bytes, max_depth=args.max_depth,
                    max_array_length=args.max_array_length, max_string_length=args.max_string_length,
                    max_method_name_length=args.max_method_name_length, max_batch_length=args.max_batch_length,
                    max_response_bytes=args.max_response_bytes)
    metrics = None if args.no_metrics else Metrics(sample_every=args.sample_every)
    engine = Engine(build_registry(), limits=limits, debug=args.debug, metrics=metrics,
                    rate_limit=RateLimit(args.rate_limit, args.rate_burst) if args.rate_limit > 0 else None,
                    call_timeout=args.call_timeout or None, info={"title": "rpc_app example methods"})
    cfg = ServerConfig(host=args.host, port=args.port, limits=limits, max_in_flight=args.max_in_flight,
                       compression=not args.no_compression, compress_min_bytes=args.compress_min_bytes,
                       ping_interval=args.ping_interval or None, ping_timeout=args.ping_timeout or None,
                       send_timeout=args.send_timeout, allowed_origins=args.allowed_origins,
                       max_connections=args.max_connections, max_connections_per_ip=args.max_connections_per_ip,
                       assembly_timeout=args.assembly_timeout, shutdown_grace=args.shutdown_grace,
                       ssl=args.ssl)
    if args.server == "picows":
        from .server_picows import PicowsRpcServer
        server = PicowsRpcServer(engine, cfg, metrics)
    else:
        server = RpcServer(engine, cfg, metrics)
    port = await server.start()
    where = f"{'https' if cfg.ssl else 'http'}://{args.host}:{port}/metrics" if metrics else "off"
    print(f"rpc_app listening on {cfg.scheme}://{args.host}:{port}/ (metrics: {where}, "
          f"server: {args.server}, loop: {type(asyncio.get_running_loop()).__module__.split('.')[0]})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()  # graceful: calls in flight finish (up to --shutdown-grace), then close 1001
    print("rpc_app stopped", flush=True)


def main(argv=None) -> int:
    p, args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.loop == "uvloop":
            import uvloop
            uvloop.run(amain(args))
        else:
            asyncio.run(amain(args))
    except ValueError as exc:
        p.error(str(exc))
    except OSError as exc:
        print(f"rpc_app: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
