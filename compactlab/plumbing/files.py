"""Opening what a user names as an input: regular files only, with limits on what they unpack to.

A FIFO would block the open (or the read) for ever, ``/dev/zero`` never ends, a directory is
not a file: every input (transcript, baseline, policy, price table, prompt) is opened without
blocking, checked with ``fstat`` to be a regular file once symlinks are followed, and only then
read. The limits below bound what one line or one document may unpack to (a ``.gz`` of zeros is
small on disk and endless in memory); each can be raised by its environment variable.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterable

from ..errors import InputError


#: the suffixes of an input read decompressed (``transcripts/reader.open_checked``)
COMPRESSED = (".gz", ".zst")


def compressed(path: str) -> bool:
    """Whether the input at ``path`` is read decompressed: its bytes are not the transcript's, and
    it is never read again by offset."""
    return path.endswith(COMPRESSED)


def stat_stamp(st: os.stat_result) -> tuple[int, ...]:
    """A file's identity and state as ``stat`` gives them: its device, inode, size, modification
    and change times (any write changes the change time, which no program can set back)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def path_stamp(path: str) -> tuple[int, ...] | None:
    """``stat_stamp`` of the file at ``path``; None where it cannot be had."""
    try:
        return stat_stamp(os.stat(path))
    except (OSError, ValueError):
        return None


def shown(path: str) -> str:
    """A path as a person reads it: relative to the current folder when it is under it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # (another drive)
        return path
    return path if rel.startswith("..") else rel


def named(paths: Iterable[str]) -> Callable[[str], str]:
    """How a table names each of ``paths``: by its file's name where no two share one (a narrow
    terminal cuts a cell's end, and a path's end is what tells two apart), else as ``shown``."""
    paths = set(paths)
    return os.path.basename if len({os.path.basename(p) for p in paths}) == len(paths) else shown


_MIB = 1 << 20


#: the largest value a size limit may be set to, in MiB (1 TiB): past it a limit bounds nothing
MAX_LIMIT_MIB = 1 << 20


def _limit(variable: str, default_mib: int) -> int:
    """A size limit in bytes from ``variable`` (in MiB, fractions allowed), or the default; a
    value that is not a number of MiB above 0 and at most 1 TiB is a usage error."""
    raw = os.environ.get(variable)
    if raw is None or not raw.strip():
        return default_mib * _MIB
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= MAX_LIMIT_MIB:  # (nan and inf fail too)
        from ..errors import UsageError

        raise UsageError(f"{variable}={raw[:40]}: not a size in MiB above 0 and at most {MAX_LIMIT_MIB:,}")
    return max(int(value * _MIB), 1)


def max_line_bytes() -> int:
    """The longest line of a JSONL transcript, decompressed (``COMPACTLAB_MAX_LINE_MB``, 512)."""
    return _limit("COMPACTLAB_MAX_LINE_MB", 512)


def max_document_bytes() -> int:
    """The largest whole-file JSON document, decompressed (``COMPACTLAB_MAX_DOCUMENT_MB``, 1024)."""
    return _limit("COMPACTLAB_MAX_DOCUMENT_MB", 1024)


#: blank lines in a row that end the reading of a file: no transcript has them, a bomb does
MAX_BLANK_LINES = 100_000

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


#: (device, inode) -> the name of every input this process opened with :func:`open_regular`: no
#: output may land on one (``outputs.refuse_inputs``)
_OPENED: dict[tuple[int, int], str] = {}


def forget_inputs() -> None:
    """A new command's inputs start from none (the command line calls it as each command starts)."""
    _OPENED.clear()


def opened_inputs() -> list[str]:
    """The inputs this process opened that are still where they were opened (a file removed since,
    whose inode a new file may reuse, is no longer one)."""
    out = []
    for (dev, ino), name in list(_OPENED.items()):
        try:
            st = os.stat(name)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (dev, ino):
            out.append(name)
    return out


def open_regular(path: str | os.PathLike, what: str = "", remember: bool = True) -> io.FileIO:
    """``path`` opened read-only and unbuffered, once it is known to be a regular file; every
    problem is one line naming the file (``what`` says what it was meant to be). ``remember``: an
    input of the run, which no output may replace (False: a cache entry compactlab itself wrote)."""
    name = os.fspath(path)
    label = f"{name}: " if not what else f"{what} {name}: "
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(name, flags)  # a FIFO opens at once without a writer, and is refused below
    except FileNotFoundError:
        raise InputError(f"{label}no such file") from None
    except IsADirectoryError:
        raise InputError(f"{label}is a directory, not a file") from None
    except PermissionError:
        raise InputError(f"{label}permission denied") from None
    except OSError as exc:
        raise InputError(f"{label}cannot open: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
            raise InputError(f"{label}is {kind}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        if remember:
            st = os.fstat(fd)
            _OPENED[(st.st_dev, st.st_ino)] = os.path.abspath(name)
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def read_at_most(f: io.RawIOBase | io.BufferedIOBase, limit: int) -> bytes:
    """Up to ``limit`` bytes of the open regular file ``f``, from where it stands. ``f.read(limit)``
    would allocate ``limit`` bytes before reading (16 MiB for a cache entry of a few hundred): the
    first read asks for one byte more than the file's size, and only a file that grew since goes
    on being read, to ``limit``."""
    first = min(os.fstat(f.fileno()).st_size + 1, limit)
    data = f.read(first) or b""
    if len(data) == first < limit:
        data += f.read(limit - first) or b""
    return data


def read_regular(path: str | os.PathLike, what: str = "") -> bytes:
    """The bytes of a regular file (see :func:`open_regular`)."""
    with open_regular(path, what) as f:
        try:
            return f.readall()
        except OSError as exc:
            raise InputError(f"{os.fspath(path)}: cannot read: {exc.strerror or exc}") from None


def read_regular_text(path: str | os.PathLike, what: str = "") -> str:
    """The UTF-8 text of a regular file."""
    data = read_regular(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{os.fspath(path)}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def zst_problem(f: io.FileIO) -> str | None:
    """Why a ``.zst`` file is not whole (its last frame cut short), or None; reads only frame and
    block headers, seeking past the data. The decompressor itself stops quietly at a cut that
    falls on a block boundary, so a replay would see fewer calls and no error."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    pos = 0

    def read(n: int) -> bytes:
        nonlocal pos
        f.seek(pos)
        data = f.read(n)
        if len(data) < n:
            raise EOFError
        pos += n
        return data

    frames = 0
    try:
        while pos < size:
            magic = int.from_bytes(read(4), "little")
            if 0x184D2A50 <= magic <= 0x184D2A5F:  # a skippable frame
                pos += int.from_bytes(read(4), "little")
                if pos > size:
                    raise EOFError
                continue
            if magic != 0xFD2FB528:
                return "not a zstd frame" + (f" after frame {frames}" if frames else "")
            descriptor = read(1)[0]
            fcs_flag, single, checksum, dict_flag = descriptor >> 6, descriptor >> 5 & 1, descriptor >> 2 & 1, descriptor & 3
            pos += (0 if single else 1) + (0, 1, 2, 4)[dict_flag] + ((1 if single else 0), 2, 4, 8)[fcs_flag]
            while True:
                header = int.from_bytes(read(3), "little")
                last, kind, block = header & 1, header >> 1 & 3, header >> 3
                if kind == 3:
                    return f"a reserved block type in frame {frames + 1}"
                pos += 1 if kind == 1 else block
                if pos > size:
                    raise EOFError
                if last:
                    break
            pos += 4 * checksum
            if pos > size:
                raise EOFError
            frames += 1
    except EOFError:
        return f"cut short: frame {frames + 1} is incomplete"
    finally:
        f.seek(0)
    return None if frames else "no zstd frame in it"
