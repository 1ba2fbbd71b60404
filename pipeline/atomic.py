"""Writing a file whole. Every file recallwatch writes for a reader (a report, a metrics file,
an export, claims or an audit sample to review, scores) is written beside its target and moved
onto it, so a reader, or a kill mid-write, finds the old file or the new one, never part of
one. One rule for links, as `cp` and a shell's `>` have it: a link is followed and its target
gets the new content, the link stays (a `--out` pointing into a deployed directory through a
link updates what the link points at). A path that is no regular file (/dev/stdout, a pipe,
/dev/full) cannot be replaced and is written in place."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def written_whole(path: str | os.PathLike) -> Iterator[Path]:
    """Yield the path to write `path`'s new content to. On a clean exit it is moved onto
    `path` (the target of `path`'s link, if it is one) whole; on any exception, Ctrl-C too, it
    is removed and the old file stays. The temporary file is this process's own, hidden, and
    ends in .tmp (a textfile collector reads only *.prom), so two writers never write into
    each other's. OSError is left to the caller, which names its own file and option."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        yield target
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)   # mkstemp makes it owner-only; a web server or collector reads it
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
