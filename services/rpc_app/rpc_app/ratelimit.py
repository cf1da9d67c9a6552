"""Per-connection token bucket: ``rate`` calls per second, bursts up to ``burst``."""

from __future__ import annotations

from time import monotonic


class TokenBucket:
    __slots__ = ("rate", "burst", "tokens", "stamp")

    def __init__(self, rate: float, burst: float | None = None):
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(1.0, rate))
        if self.burst < 1:
            raise ValueError("burst must be >= 1")
        self.tokens = self.burst
        self.stamp = monotonic()

    def allow(self, cost: float = 1.0) -> bool:
        now = monotonic()
        tokens = self.tokens + (now - self.stamp) * self.rate
        if tokens > self.burst:
            tokens = self.burst
        self.stamp = now
        if tokens >= cost:
            self.tokens = tokens - cost
            return True
        self.tokens = tokens
        return False


class RateLimit:
    """Configuration: a factory of one TokenBucket per connection."""

    __slots__ = ("rate", "burst")

    def __init__(self, rate: float, burst: float | None = None):
        TokenBucket(rate, burst)  # validate
        self.rate = rate
        self.burst = burst

    def bucket(self) -> TokenBucket:
        return TokenBucket(self.rate, self.burst)
