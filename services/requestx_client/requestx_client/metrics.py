"""Opt-in client metrics through the kit's ``perfkit_metrics`` package (its ``ClientRequests``).

``Session(metrics=registry)``, ``AsyncClient(metrics=registry)`` or, for the module-level functions,
``requestx_client.enable_metrics(registry)``. Every request sent (each redirect hop, and failed ones
with status 0) then records ``http_client_request_duration_seconds`` (method, host, status class)
and the stages the native core measured for it in ``http_client_stage_duration_seconds``. Without
metrics no clock is read for them and nothing is recorded: the native call gets ``timing=False``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SERVICE", "client_metrics"]

#: The ``service`` label when a registry is given.
SERVICE = "requestx_client"

# The native core returns the stage timings (``NativeResponse.timings``) in ``perfkit_metrics.STAGES`` order.

_HOST_CACHE_MAX = 256


def client_metrics(metrics: Any, service: str = SERVICE) -> Any:
    """The ``ClientRequests`` to record into: a ``perfkit_metrics.Registry`` gives its
    ``http_client(service)``; a ``ClientRequests`` (anything with ``observe_request``) is used as it
    is; None means no metrics."""
    if metrics is None:
        return None
    if callable(getattr(metrics, "http_client", None)):
        return metrics.http_client(service)
    if callable(getattr(metrics, "observe_request", None)):
        return metrics
    raise TypeError("metrics must be a perfkit_metrics.Registry, a ClientRequests or None, "
                    f"not {type(metrics).__name__}")


class Recorder:
    """Records one request: its duration under (method, host, status) and its stages."""

    __slots__ = ("client", "_observe_request", "_hosts", "_host_label")

    def __init__(self, client: Any) -> None:
        from perfkit_metrics import host_label

        self.client = client
        self._observe_request = client.observe_request  # the request and its stages under one lock
        self._host_label = host_label
        self._hosts: dict[str, str] = {}  # URL -> host:port (a client calls the same URLs again)

    def host(self, url: str) -> str:
        host = self._hosts.get(url)
        if host is None:
            host = self._host_label(url)
            if len(self._hosts) >= _HOST_CACHE_MAX:
                self._hosts.clear()
            self._hosts[url] = host
        return host

    def record(self, method: str, url: str, status: int, seconds: float, timings: Any) -> None:
        self._observe_request(method, self.host(url), status, seconds, timings)

    def failed(self, method: str, url: str, seconds: float, error: BaseException) -> None:
        """A request that got no response (refused, reset, timed out, TLS failure, bad body):
        status 0 (``status_class="error"``), with the stages seen before the failure."""
        self.record(method, url, 0, seconds, getattr(error, "_timings", None))


def sent(error: BaseException) -> bool:
    """Whether a request that raised was attempted on the network: the argument checks (invalid
    URL, scheme or header: ``ValueError`` subclasses) fail before anything is sent."""
    return not isinstance(error, ValueError)
