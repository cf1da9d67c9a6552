"""The live progress display: what runs, how far along the suite is, the last figure, time elapsed."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int = 0, stream=None, quiet: bool = False):
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.t0 = time.monotonic()

    def _clock(self) -> str:
        s = int(time.monotonic() - self.t0)
        return f"{s // 60}:{s % 60:02d}"

    def step(self, what: str) -> None:
        self.done += 1
        if not self.quiet:
            total = max(self.total, self.done)
            pct = 100 * self.done // total if total else 0
            print(f"[{self.done:>3}/{total} {pct:>3}% {self._clock()}] {what}", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        if not self.quiet:
            print(f"{'':>18}-> {text}", file=self.stream, flush=True)

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.stream, flush=True)
