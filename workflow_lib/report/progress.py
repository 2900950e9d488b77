"""Progress of long jobs in their log files: items done / total, rate and time left.

A rule's log captures the job's stderr, where :func:`logging.basicConfig` (``trackfold`` sets it up) writes; a
:class:`Progress` logs at most once per ``every_s`` seconds (and always at the end), so a 20,000-protein
search writes a few hundred lines, not millions::

    progress = Progress("queries searched", total=len(queries), unit="queries")
    for query in queries:
        ...
        progress.advance()
    progress.finish()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

_LOG = logging.getLogger("trackfold.progress")


def format_duration(seconds: float) -> str:
    """``3725`` → ``'1h02m05s'``; under a minute with one decimal (``'4.2s'``)."""
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class Progress:
    """Count items of a long loop and log ``what: done/total (pct), rate, ETA`` at a bounded rate.

    ``total`` may be None when unknown (no percentage or ETA then). ``clock`` is injectable for tests.
    """

    def __init__(self, what: str, *, total: int | None = None, unit: str = "items", every_s: float = 10.0,
                 logger: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if total is not None and total < 0:
            raise ValueError(f"total must be >= 0, got {total}")
        self.what = what
        self.total = total
        self.unit = unit
        self.every_s = every_s
        self.logger = logger or _LOG
        self._clock = clock
        self.started = clock()
        self._last_logged = self.started
        self.done = 0
        self.lines: list[str] = []

    @property
    def elapsed(self) -> float:
        return self._clock() - self.started

    @property
    def rate(self) -> float:
        """Items per second so far (0 before the first item)."""
        elapsed = self.elapsed
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate (None when total or rate are unknown)."""
        if self.total is None or self.rate <= 0:
            return None
        return max(self.total - self.done, 0) / self.rate

    def message(self) -> str:
        parts = [f"{self.what}: {self.done}"]
        if self.total is not None:
            percent = 100.0 * self.done / self.total if self.total else 100.0
            parts[0] += f"/{self.total} ({percent:.1f}%)"
        parts.append(f"{self.rate:.3g} {self.unit}/s")
        parts.append(f"elapsed {format_duration(self.elapsed)}")
        if self.eta is not None and self.done < (self.total or 0):
            parts.append(f"ETA {format_duration(self.eta)}")
        return ", ".join(parts)

    def _log(self) -> None:
        line = self.message()
        self.lines.append(line)
        self.logger.info("%s", line)
        self._last_logged = self._clock()

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more items done; log when ``every_s`` passed since the last line."""
        self.done += n
        if self._clock() - self._last_logged >= self.every_s:
            self._log()

    def finish(self) -> None:
        """Log the final line (always)."""
        self._log()


def track(items: Iterable[T], what: str, *, total: int | None = None, **kwargs) -> Iterator[T]:
    """Yield ``items`` while counting them with a :class:`Progress` (final line logged at the end)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    progress = Progress(what, total=total, **kwargs)
    for item in items:
        yield item
        progress.advance()
    progress.finish()
