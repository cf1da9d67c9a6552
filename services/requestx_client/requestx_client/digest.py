"""HTTP Digest authentication (RFC 7616): MD5, SHA-256, SHA-512-256 and their -sess forms with
qop=auth; the plain algorithms also without qop (RFC 2069).

The first request goes without credentials; a 401 whose WWW-Authenticate offers Digest is answered
once by sending the request again with the computed Authorization (on the same adapter, with the
same send settings). Later requests reuse the server's nonce at once, counting it up (``nc``)."""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from typing import Any, Callable
from urllib.parse import urlsplit

from .auth import AuthBase
from .cookies import extract_cookies_to_jar

# algorithm token (upper case, without -sess) -> hashlib name
_HASHES = {"MD5": "md5", "SHA": "sha1", "SHA-256": "sha256", "SHA-512": "sha512", "SHA-512-256": "sha512_256"}

# one auth-param: name = token or "quoted string" (with backslash escapes)
_PARAM = re.compile(r'\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')


def parse_challenges(header: str) -> dict[str, dict[str, str]]:
    """{scheme (lower case): {param (lower case): value}} from a WWW-Authenticate value, which may hold
    several challenges ("Basic realm=x, Digest realm=y, nonce=z")."""
    out: dict[str, dict[str, str]] = {}
    params: dict[str, str] | None = None
    pos, n = 0, len(header)
    while pos < n:
        while pos < n and header[pos] in " ,":
            pos += 1
        m = _PARAM.match(header, pos)
        if m and params is not None:
            value = m.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            params[m.group(1).lower()] = value
            pos = m.end()
            continue
        # a scheme name starts the next challenge
        end = pos
        while end < n and header[end] not in " ,":
            end += 1
        if end == pos:
            break
        params = out.setdefault(header[pos:end].lower(), {})
        pos = end
    return out


class HTTPDigestAuth(AuthBase):
    """``auth=HTTPDigestAuth(user, password)``. State (nonce, count) is kept per thread."""

    def __init__(self, username: str, password: str) -> None:
        self.username = username
        self.password = password
        self._local = threading.local()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HTTPDigestAuth) and (self.username, self.password) == (other.username, other.password)

    def _state(self) -> Any:
        st = self._local
        if not hasattr(st, "init"):
            st.init = True
            st.last_nonce = ""
            st.nonce_count = 0
            st.chal = {}
            st.pos = None
            st.num_401_calls = None
        return st

    def build_digest_header(self, method: str, url: str) -> str | None:
        """The Authorization value for ``method`` ``url`` under the last challenge; None if the challenge
        asks for what is not supported (another algorithm, or only qop=auth-int)."""
        st = self._state()
        chal = st.chal
        realm, nonce = chal.get("realm", ""), chal.get("nonce", "")
        algorithm = chal.get("algorithm") or "MD5"
        algo = algorithm.upper()
        sess = algo.endswith("-SESS")
        name = _HASHES.get(algo[:-5] if sess else algo)
        if name is None or name not in hashlib.algorithms_available:
            return None
        qops = [q.strip().lower() for q in chal.get("qop", "").split(",") if q.strip()]
        if (qops and "auth" not in qops) or (sess and not qops):  # -sess needs a cnonce, sent only with qop
            return None

        def h(text: str) -> str:
            return hashlib.new(name, text.encode("utf-8")).hexdigest()

        parts = urlsplit(url)
        uri = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        st.nonce_count = st.nonce_count + 1 if nonce == st.last_nonce else 1
        st.last_nonce = nonce
        nc = f"{st.nonce_count:08x}"
        cnonce = self._new_cnonce(nonce, nc)
        ha1 = h(f"{self.username}:{realm}:{self.password}")
        if sess:
            ha1 = h(f"{ha1}:{nonce}:{cnonce}")
        ha2 = h(f"{method}:{uri}")
        if qops:
            response = h(f"{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}")
        else:  # RFC 2069 compatibility
            response = h(f"{ha1}:{nonce}:{ha2}")
        fields = [f'username="{_quote(self.username)}"', f'realm="{_quote(realm)}"', f'nonce="{_quote(nonce)}"',
                  f'uri="{_quote(uri)}"', f'response="{response}"', f"algorithm={algorithm}"]
        if "opaque" in chal:
            fields.append(f'opaque="{_quote(chal["opaque"])}"')
        if qops:
            fields += ['qop="auth"', f"nc={nc}", f'cnonce="{cnonce}"']  # quoted, as requests sends it
        return "Digest " + ", ".join(fields)

    def _new_cnonce(self, nonce: str, nc: str) -> str:
        """A client nonce no one can predict."""
        return hashlib.sha256(f"{nc}{nonce}{time.time()}".encode() + os.urandom(16)).hexdigest()[:32]

    def handle_redirect(self, r: Any, **kwargs: Any) -> Any:
        """A redirect starts a new exchange: its target may challenge once more."""
        if r.is_redirect:
            self._state().num_401_calls = 1
        return r

    def handle_401(self, r: Any, **kwargs: Any) -> Any:
        """Answer a Digest challenge once: send the request again with credentials (a ``response`` hook)."""
        st = self._state()
        if not 400 <= r.status_code < 500 or getattr(r, "connection", None) is None:
            st.num_401_calls = 1
            return r
        chal = parse_challenges(r.headers.get("www-authenticate", "")).get("digest")
        if chal is None or (st.num_401_calls or 1) >= 2:
            st.num_401_calls = 1
            return r
        st.num_401_calls = (st.num_401_calls or 1) + 1
        st.chal = chal
        _ = r.content  # read the 401's body so its connection goes back to the pool
        if st.pos is not None:  # a file body was read by the first send: read it again from its start
            r.request.body.seek(st.pos)
        prep = r.request.copy()
        value = self.build_digest_header(prep.method, prep.url)
        if value is None:
            return r
        if prep._cookies is not None:  # cookies the 401 set go with the answer
            extract_cookies_to_jar(prep._cookies, r.request, r)
            prep.headers.pop("Cookie", None)
            prep.prepare_cookies(prep._cookies)
        prep.headers["Authorization"] = value
        new = r.connection.send(prep, **kwargs)
        new.history.append(r)
        new.request = prep
        return new

    def __call__(self, r: Any) -> Any:
        st = self._state()
        if st.last_nonce:  # a nonce from an earlier challenge: use it at once (saves a round trip)
            value = self.build_digest_header(r.method, r.url)
            if value is not None:
                r.headers["Authorization"] = value
        try:
            st.pos = r.body.tell()  # a file body: where to seek back to for the answer to a 401
        except (AttributeError, OSError):
            st.pos = None
        register: Callable[[str, Any], None] = r.register_hook
        register("response", self.handle_401)
        register("response", self.handle_redirect)
        st.num_401_calls = 1
        return r


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
