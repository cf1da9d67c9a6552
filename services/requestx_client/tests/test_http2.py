"""HTTP/2 as an opt-in (``Session(http2=True)``, ``AsyncClient(http2=True)``): offered to https servers
through ALPN, against a real nginx with its http2 module; HTTP/1.1 otherwise (the default, and plain
http always)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import requestx_client as requests

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

CONF = """
{user}
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    server {{
        listen 127.0.0.1:{tls_port} ssl http2;
        listen 127.0.0.1:{port};
        ssl_certificate {root}/cert.pem;
        ssl_certificate_key {root}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {{ default_type text/plain; return 200 "$server_protocol $request_method $content_length"; }}
    }}
}}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def nginx(ca):
    if not os.path.exists(NGINX):
        pytest.fail(f"nginx not found at {NGINX} (tools/bazel installs nginx-light)")
    root = tempfile.mkdtemp(prefix="rx-h2-")
    os.chmod(root, 0o755)  # workers run as an unprivileged user when started as root
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(os.path.join(root, "key.pem"))
    cert.cert_chain_pems[0].write_to_path(os.path.join(root, "cert.pem"))
    port, tls_port = _free_port(), _free_port()
    with open(os.path.join(root, "nginx.conf"), "w") as f:
        # as root, workers would switch to nobody, which the test sandbox's user namespace cannot map
        user = "user root;" if os.geteuid() == 0 else ""
        f.write(CONF.format(root=root, port=port, tls_port=tls_port, user=user))
    proc = subprocess.Popen([NGINX, "-c", os.path.join(root, "nginx.conf"), "-p", root],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    for p in (port, tls_port):
        while True:
            try:
                socket.create_connection(("127.0.0.1", p), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail("nginx did not start: " + proc.stderr.read().decode(errors="replace"))
                time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", f"https://127.0.0.1:{tls_port}"
    proc.terminate()
    proc.wait(10)
    shutil.rmtree(root, ignore_errors=True)


def test_http2_is_negotiated_when_asked(nginx, ca_file):
    _, https = nginx
    with requests.Session(http2=True) as s:
        r = s.get(https + "/", verify=ca_file)
        assert r.status_code == 200 and r.http_version == "HTTP/2"
        assert r.text == "HTTP/2.0 GET "
        r = s.post(https + "/post", data=b"x" * 1000, verify=ca_file)
        assert r.text == "HTTP/2.0 POST 1000"


def test_http11_by_default_and_for_plain_http(nginx, ca_file):
    http, https = nginx
    with requests.Session() as s:
        r = s.get(https + "/", verify=ca_file)
        assert r.http_version == "HTTP/1.1" and r.text.startswith("HTTP/1.1 GET")
    with requests.Session(http2=True) as s:
        assert s.get(http + "/").text.startswith("HTTP/1.1 GET")


def test_threads_share_one_http2_session(nginx, ca_file):
    _, https = nginx
    with requests.Session(http2=True) as s, ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(lambda i: s.get(f"{https}/{i}", verify=ca_file).text, range(200)))
    assert texts == ["HTTP/2.0 GET "] * 200


def test_async_client_http2(nginx, ca_file):
    _, https = nginx

    async def main():
        async with requests.AsyncClient(http2=True, verify=ca_file) as c:
            return await asyncio.gather(*(c.get(f"{https}/{i}") for i in range(50)))

    answers = asyncio.run(main())
    assert {(r.status_code, r.http_version, r.text) for r in answers} == {(200, "HTTP/2", "HTTP/2.0 GET ")}
