"""Start one nginx worker for the benchmarks (pinned to a CPU core), answering from its config.

    python bench/nginx.py --port 18080 --cpu 1          # runs in the foreground until Ctrl-C
    python bench/nginx.py --tls-port 18443 --ca-out ca.pem   # also https (TLS 1.3, session cache and tickets)

Routes: /            -> 200 "Hello, World!" (13 bytes, `return` from the config, no file I/O)
        /post        -> 200 "ok" (request body read and discarded)
        /json-1mb    -> a 1 MB JSON document (static file; open_file_cache on)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

CONF = """
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    open_file_cache max=16 inactive=600s;
    open_file_cache_valid 600s;
    client_body_buffer_size 64k;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    server {{
        listen {listen}:{port} reuseport backlog=4096;
        {allow}
        location = / {{ default_type text/plain; return 200 "Hello, World!"; }}
        location = /post {{ default_type text/plain; return 200 "ok"; }}
        location = /json-1mb {{ default_type application/json; alias {root}/1mb.json; }}
    }}
{tls}}}
"""

# the same routes over TLS 1.3 with a certificate for 127.0.0.1 from a throw-away CA (trustme)
TLS_SERVER = """    server {{
        listen {listen}:{port} ssl reuseport backlog=4096;
        ssl_certificate {root}/cert.pem;
        ssl_certificate_key {root}/key.pem;
        ssl_protocols TLSv1.3;
        ssl_session_cache shared:SSL:1m;
        ssl_session_tickets on;
        location = / {{ default_type text/plain; return 200 "Hello, World!"; }}
        location = /post {{ default_type text/plain; return 200 "ok"; }}
    }}
"""


# the loopback addresses bench_memory.py --hosts spreads requests over (127.0.x.y, y from 1 to 254)
LOOPBACK_NAMES = [f"127.0.{i // 254}.{i % 254 + 1}" for i in range(4 * 254)]


def make_cert(root: str, ca_out: str, any_loopback: bool) -> None:
    import trustme
    ca = trustme.CA()
    names = ["localhost"] + (LOOPBACK_NAMES if any_loopback else ["127.0.0.1"])
    cert = ca.issue_cert(*names)
    cert.private_key_pem.write_to_path(os.path.join(root, "key.pem"))
    cert.cert_chain_pems[0].write_to_path(os.path.join(root, "cert.pem"))
    ca.cert_pem.write_to_path(ca_out)


def make_json(path: str, size: int = 1 << 20) -> None:
    items, n = [], 0
    while n < size:
        item = {"id": len(items), "name": f"user{len(items)}", "email": f"u{len(items)}@example.org",
                "active": len(items) % 2 == 0, "score": len(items) * 1.25, "tags": ["a", "b", "c"]}
        items.append(item)
        n += len(json.dumps(item)) + 2
    with open(path, "w") as f:
        json.dump(items, f)
    os.chmod(path, 0o644)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("--cpu", type=int, default=1, help="core to pin the worker to (taskset)")
    ap.add_argument("--any-loopback", action="store_true",
                    help="answer on every 127.0.0.0/8 address (bound to all addresses, others refused): "
                         "for bench_memory.py --hosts")
    ap.add_argument("--tls-port", type=int, help="also serve / and /post over https on this port")
    ap.add_argument("--ca-out", default="ca.pem", help="where the https certificate's CA is written (PEM)")
    args = ap.parse_args()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    root = tempfile.mkdtemp(prefix="rx-nginx-")
    os.chmod(root, 0o755)  # the worker runs as an unprivileged user when started as root
    make_json(os.path.join(root, "1mb.json"))
    conf = os.path.join(root, "nginx.conf")
    with open(conf, "w") as f:
        listen, allow = ("0.0.0.0", "allow 127.0.0.0/8; deny all;") if args.any_loopback else ("127.0.0.1", "")
        tls = ""
        if args.tls_port:
            make_cert(root, args.ca_out, args.any_loopback)
            tls = TLS_SERVER.format(root=root, port=args.tls_port, listen=listen)
        f.write(CONF.format(root=root, port=args.port, listen=listen, allow=allow, tls=tls))
    cmd = ["taskset", "-c", str(args.cpu), nginx, "-c", conf, "-p", root]
    proc = subprocess.Popen(cmd)
    where = "every 127.0.0.0/8 address" if args.any_loopback else "127.0.0.1"
    print(f"nginx pid {proc.pid} on {where}, port {args.port}, cpu {args.cpu}", flush=True)

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    # background jobs of a script ignore SIGINT/SIGQUIT: stop on SIGTERM too
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)
            proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
