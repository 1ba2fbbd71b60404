"""The progress callback every long step accepts: `progress(description, done, total)`. The CLI
draws it as a bar on a terminal; a scheduler passes None (or logs it)."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, int], None]
