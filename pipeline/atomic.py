"""Writing a file whole. Every file recallwatch writes for a reader (a report, a metrics file,
an export, claims or an audit sample to review, scores) is written beside its target and moved
onto it, so a reader, or a kill mid-write, finds the old file or the new one, never part of
one. One rule for links, as `cp` and a shell's `>` have it: a link is followed and its target
gets the new content, the link stays (a `--out` pointing into a deployed directory through a
link updates what the link points at). Written in place, as before: what is no regular file
(a pipe, a device) or lives under /dev or /proc (`/dev/stdout`, also when it is a file the
shell opened: replacing it would leave the shell writing into the old one), and an existing
file one may write in a directory one may not."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

_IN_PLACE = ("/dev/", "/proc/")


@contextlib.contextmanager
def written_whole(path: str | os.PathLike, mode: int | None = None) -> Iterator[Path]:
    """Yield the path to write `path`'s new content to. On a clean exit it is moved onto
    `path` (the target of `path`'s link, if it is one) whole; on any exception, Ctrl-C too, it
    is removed and the old file stays. The temporary file is this process's own, hidden, and
    ends in .tmp (a textfile collector reads only *.prom), so two writers never write into
    each other's. The new file keeps the mode of the one it replaces, or gets the umask's
    (`mode` sets it either way). OSError is left to the caller, which names its own file and
    option."""
    given = Path(path)
    if _in_place(given):
        yield given
        return
    target = Path(os.path.realpath(given))
    if target.is_symlink():   # a loop of links: realpath stops where it goes round
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(given))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not (
                target.is_file() and os.access(target, os.W_OK)):
            raise
        yield target   # a file one may write in a directory one may not: in place, as before
        return
    os.close(fd)
    try:
        yield Path(tmp)
        _take_mode(Path(tmp), target, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _in_place(given: Path) -> bool:
    if str(given.absolute()).startswith(_IN_PLACE) or os.path.realpath(given).startswith(
            _IN_PLACE):
        return True
    try:
        return not stat.S_ISREG(os.stat(given).st_mode)
    except OSError:   # not there yet (or a dangling link): a new file
        return False


def _take_mode(tmp: Path, target: Path, mode: int | None) -> None:
    """mkstemp makes its file owner-only: give it the replaced file's mode and owner, else the
    umask's, as open() would have."""
    if mode is None and target.exists():
        old = target.stat()
        mode = stat.S_IMODE(old.st_mode)
        if os.geteuid() == 0:
            with contextlib.suppress(OSError):
                os.chown(tmp, old.st_uid, old.st_gid)
    elif mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)
