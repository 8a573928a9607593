"""The run's output folder: safe names for untrusted ids, atomic writes, nothing outside it.

A persisted file's name comes from a tool_use id, which is untrusted input: it is sanitised to
``[A-Za-z0-9_-]`` (at most 64 characters), names reserved on Windows are avoided, and whenever
the name is not the id itself, or another id already took that name ignoring case, a short hash
of the id is appended. A second, different output under an id that was already written gets a
numbered name. Every path is resolved and checked to lie inside the folder before writing.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ..errors import UsageError

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
MAX_NAME = 64


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def safe_stem(tool_use_id: str) -> str:
    """A file-name stem made only of safe characters (the id itself when it already is one)."""
    stem = _UNSAFE.sub("_", tool_use_id)[:MAX_NAME].strip("_-") or "id"
    if stem != tool_use_id or stem.lower() in _RESERVED:
        stem = f"{stem[:MAX_NAME - 9]}-{_digest(tool_use_id)[:8]}"
    return stem


def mkstemp(directory: Path, prefix: str, suffix: str = "", mode: int = 0o600) -> tuple[int, str]:
    """A new file of a random name in ``directory``, opened exclusively with ``mode`` (less the
    umask): what tempfile.mkstemp does, without its imports (shutil, bz2, lzma, random: ~5 ms of
    every start)."""
    for _ in range(100):
        name = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode), name
        except FileExistsError:
            continue
    raise FileExistsError(f"{directory}: no free temporary name")


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISBLK, "a block device"))


def _refuse(label: str, mode: int) -> UsageError:
    kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
    return UsageError(f"{label}: is {kind}, not a regular file: refusing to replace it",
                      hint="name a regular file (or a character device such as /dev/null) to write to")


def _destination(path: Path, label: str) -> tuple[Path, os.stat_result | None]:
    """Where writing ``path`` lands (symlinks followed) and what is there now (None: nothing)."""
    real = Path(os.path.realpath(path))
    try:
        return real, os.stat(real)
    except FileNotFoundError:
        return real, None
    except OSError as exc:
        raise UsageError(f"{label}: cannot write: {exc.strerror or exc}") from None


def _open_in_place(real: Path, label: str, flags: int) -> int:
    """A descriptor on the character device (or, with O_APPEND, regular file) at ``real``, opened
    without blocking and checked again once open: what was checked by name may have changed."""
    try:
        fd = os.open(real, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader
            raise UsageError(f"{label}: is a named pipe, not a regular file: refusing to write to it") from None
        raise UsageError(f"{label}: cannot write: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISCHR(mode) or (flags & os.O_APPEND and stat.S_ISREG(mode))):
        os.close(fd)
        raise _refuse(label, mode)
    os.set_blocking(fd, True)
    return fd


#: a file's content: bytes, or bytes in parts written one after the other (never joined)
Content = bytes | list[bytes]


def _write(f: Any, data: Content) -> None:
    if isinstance(data, bytes):
        f.write(data)
    else:
        f.writelines(data)


def _write_fd(fd: int, data: Content, label: str) -> None:
    try:
        with os.fdopen(fd, "wb") as f:
            _write(f, data)
    except OSError as exc:
        raise UsageError(f"{label}: cannot write: {exc.strerror or exc}") from None


def check_destination(path: str | os.PathLike, what: str = "") -> None:
    """Refuse, before any work, a destination :func:`atomic_write_bytes` would refuse."""
    label = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    _, st = _destination(Path(os.fspath(path)), label)
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise _refuse(label, st.st_mode)


def atomic_write_bytes(path: Path, data: Content, mode: int | None = None, what: str = "") -> None:
    """Write a file compactlab owns or a user named, so that nothing compactlab did not create
    is ever replaced:

    - nothing there, or a regular file: written to a temp file in the same folder and renamed
      over it, so readers never see half a file (a symlink: its target is the file written);
    - a character device (``/dev/null``, ``/dev/stdout``): written in place, never replaced;
    - anything else (a named pipe, socket, directory, block device): refused (UsageError, exit 2).

    ``mode``: the new file's mode (default: what the umask gives a new file); ``what`` names the
    option in messages (``--junit``)."""
    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    real, st = _destination(path, label)
    if st is not None and stat.S_ISCHR(st.st_mode):
        _write_fd(_open_in_place(real, label, os.O_WRONLY), data, label)
        return
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _refuse(label, st.st_mode)
    if not os.path.islink(path):  # a dangling link's target folder is not made
        real.parent.mkdir(parents=True, exist_ok=True)
    # created with the mode a new file gets (0666 less the umask, applied by the system), or ``mode``
    fd, tmp = mkstemp(real.parent, f".{real.name}.", ".tmp", 0o666 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as f:
            _write(f, data)
        try:  # checked again just before the rename: a pipe or device put there meanwhile stays
            now = os.lstat(real).st_mode
        except FileNotFoundError:
            now = stat.S_IFREG
        if not stat.S_ISREG(now):
            raise _refuse(label, now)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def append_text(path: str | os.PathLike, text: str, what: str = "") -> None:
    """Append ``text`` to a regular file (created if absent) or write it to a character device;
    a named pipe, socket or directory is refused (UsageError) and never waited on."""
    label = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    fd = _open_in_place(Path(os.fspath(path)), label, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    _write_fd(fd, text.encode("utf-8", "surrogatepass"), label)


MARKER = ".compactlab-run"
"""The file that says a folder is a compactlab run: the files it wrote, so that a later run
replaces it whole and a folder holding anything else is not mistaken for one."""


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _foreign(root: Path) -> str | None:
    """The first entry under ``root`` that no earlier compactlab run wrote, or None."""
    try:
        listed = orjson.loads((root / MARKER).read_bytes()).get("files")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        listed = None
    ours = set(listed) if isinstance(listed, list) else set()
    folders = {str(p) for f in ours for p in Path(f).parents} | {"."}
    for top, dirs, files in os.walk(root):
        rel = Path(top).relative_to(root)
        for d in sorted(dirs):
            if os.path.islink(os.path.join(top, d)) or (rel / d).as_posix() not in folders:
                return (rel / d).as_posix() + "/"
        for f in sorted(files):
            name = (rel / f).as_posix()
            if name not in ours and not (name == MARKER and listed is not None):
                return name
    return None


class OutputDir:
    """Where a run writes: a fresh folder beside the destination, put in place whole by
    :meth:`commit`, so that the destination only ever holds one complete run. A destination
    holding an earlier compactlab run is replaced whole; one holding anything else is refused
    unless ``force``. ``dry_run`` computes every name but writes nothing anywhere.

    ``sub(name)`` is a view of the same run writing under ``name/`` (a replay of several
    transcripts into one ``--out``); only the run itself is committed or rolled back.
    """

    def __init__(self, root: str | os.PathLike | None, dry_run: bool = False, force: bool = False) -> None:
        self.root = Path(root) if root is not None else None
        self.dry_run = dry_run or root is None
        self.force = force
        self.prefix = ""
        self._owner: dict[str, tuple[str, str]] = {}  # lower-cased name -> (tool id, content digest)
        self._run: OutputDir = self
        self._stage: Path | None = None  # the fresh folder being written
        self._target: Path | None = None  # where it goes: the destination, symlinks resolved
        self._created: list[Path] = []  # parent folders this run made where nothing was

    def sub(self, name: str) -> "OutputDir":
        view = OutputDir(None if self.root is None else self.root / name, self.dry_run)
        view._run, view.prefix = self._run, f"{self.prefix}{name}/"
        return view

    @property
    def path(self) -> str | None:
        """Where the files are once the run is committed (None for a dry run)."""
        return None if self.dry_run or self.root is None else str(self.root)

    def prepare(self, protect: list[str] | tuple[str, ...] = ()) -> None:
        """Check the destination and create the fresh folder, or explain in one line why the
        destination cannot be used. ``protect``: paths (the inputs) that ``force`` must not remove."""
        run = self._run
        if run is not self:
            run.prepare(protect)
            return
        if self.dry_run or self.root is None or self._stage is not None:
            return
        root = self.root
        if root.exists() and not root.is_dir():
            raise UsageError(f"--out {root}: exists and is not a folder")
        if root.is_dir():
            target = root.resolve()
            bad = _foreign(target)
            if bad is not None and not self.force:
                raise UsageError(f"--out {root}: holds files compactlab did not write ({bad})",
                                 hint="choose another --out, or add --force to replace that folder whole")
            if bad is not None:
                _refuse_to_remove(root, target, protect)
        else:
            try:
                self._new_folders(root.parent)
            except OSError as exc:
                raise UsageError(f"--out {root}: cannot create folder: {exc.strerror or exc}") from None
            target = root.parent.resolve() / root.name
        parent = target.parent
        for _ in range(100):
            stage = parent / f".{target.name}.compactlab-{os.getpid()}-{os.urandom(4).hex()}"
            try:
                os.mkdir(stage)
                break
            except FileExistsError:
                continue
            except OSError as exc:
                self.rollback()
                what = "folder is not writable" if isinstance(exc, PermissionError) else "cannot create folder"
                raise UsageError(f"--out {root}: {what}: {exc.strerror or exc}") from None
        self._stage, self._target = stage, target

    def _new_folders(self, folder: Path) -> None:
        """Create ``folder`` and its missing parents, remembering those it made."""
        missing = []
        while not folder.is_dir():
            missing.append(folder)
            folder = folder.parent
        for f in reversed(missing):
            f.mkdir(exist_ok=True)
            self._created.append(f)

    def commit(self) -> None:
        """Put the finished run in place of the destination (signals held back meanwhile)."""
        from .interrupts import deferred

        run = self._run
        if run is not self:
            raise RuntimeError("commit the run, not a view of it")
        if self._stage is None:
            return
        stage, target = self._stage, self._target
        assert target is not None
        files = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if not p.is_dir())
        try:
            (stage / MARKER).write_bytes(orjson.dumps({"files": files}) + b"\n")
        except OSError as exc:
            self.rollback()
            raise UsageError(f"{self.root}: cannot write {MARKER}: {exc.strerror or exc}") from None
        with deferred():
            old = None
            if target.is_dir():
                old = stage.with_name(stage.name + "-old")
                os.replace(target, old)
            os.replace(stage, target)
            self._stage, self._created = None, []
            if old is not None:
                _remove_tree(old)

    def extend(self, files: Mapping[str, Content]) -> None:
        """Add files to the run already committed, in place, each written whole: the marker first
        lists them (a file it names that is not there is harmless), then they are written with
        signals held back, so that an interrupt leaves the committed run as it was or whole."""
        from .interrupts import deferred

        run = self._run
        if run is not self:
            raise RuntimeError("extend the run, not a view of it")
        if self.dry_run or self._target is None or not files:
            return
        target = self._target
        paths = {}
        for relative in files:
            path = (target / relative).resolve()
            if target not in path.parents:
                raise UsageError(f"refusing to write outside the output folder: {relative!r}")
            paths[relative] = path
        try:
            listed = orjson.loads((target / MARKER).read_bytes()).get("files", [])
            with deferred():
                atomic_write_bytes(target / MARKER, orjson.dumps({"files": sorted({*listed, *files})}) + b"\n")
                for relative, data in files.items():
                    atomic_write_bytes(paths[relative], data)
        except (OSError, orjson.JSONDecodeError, AttributeError) as exc:
            raise UsageError(f"{self.root}: cannot write the reports: {getattr(exc, 'strerror', None) or exc}") from None

    def rollback(self) -> None:
        """Remove the unfinished run and the parent folders it made: a run that fails or is
        interrupted leaves the destination as it found it."""
        from .interrupts import deferred

        run = self._run
        if run is not self:
            run.rollback()
            return
        with deferred():
            if self._stage is not None:
                _remove_tree(self._stage)
                self._stage = None
            for path in reversed(self._created):
                try:
                    path.rmdir()
                except OSError:
                    pass  # a folder someone else wrote into meanwhile stays
            self._created.clear()

    def discard(self) -> None:
        """Remove what this view of a run wrote (one transcript of several that did not finish):
        the rest of the run stays, to be committed or rolled back."""
        run = self._run
        if run is self:
            self.rollback()
        elif run._stage is not None and self.prefix:
            _remove_tree(run._stage / self.prefix.rstrip("/"))

    def inside(self, relative: str) -> Path:
        """The staged path of ``relative``, checked to lie inside the run's folder."""
        run = self._run
        if run._stage is None:
            run.prepare()
        assert run._stage is not None
        root = run._stage
        target = (root / (self.prefix + relative)).resolve()
        if target != root and root not in target.parents:
            raise UsageError(f"refusing to write outside the output folder: {relative!r}")
        return target

    def persisted_name(self, tool_use_id: str, text: str) -> tuple[str, bool]:
        """(relative path for this output, whether it still has to be written)."""
        digest = _digest(text)
        stem = safe_stem(tool_use_id)
        n = 1
        while True:
            name = stem if n == 1 else f"{stem}-{n}"
            owner = self._owner.get(name.lower())
            if owner is None:
                self._owner[name.lower()] = (tool_use_id, digest)
                return f"tool-results/{name}.txt", True
            if owner == (tool_use_id, digest):  # the same output again: the seed writes it once
                return f"tool-results/{name}.txt", False
            if owner[0] != tool_use_id and n == 1 and not stem.endswith(_digest(tool_use_id)[:8]):
                stem = f"{stem[:MAX_NAME - 9]}-{_digest(tool_use_id)[:8]}"
                continue
            n += 1

    def write_text(self, relative: str, text: str) -> None:
        self.write_bytes(relative, text.encode("utf-8", "surrogatepass"))

    def write_bytes(self, relative: str, data: Content) -> None:
        if self.dry_run:
            return
        try:
            target = self.inside(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as f:
                _write(f, data)
        except OSError as exc:
            raise UsageError(f"{self.root}: cannot write {relative}: {exc.strerror or exc}") from None

    def write_all(self, files: Mapping[str, Content]) -> None:
        """Write a set of report files (the run is whole or absent anyway: it is committed at
        its end and rolled back on failure)."""
        for relative, data in files.items():
            self.write_bytes(relative, data)


def _refuse_to_remove(root: Path, target: Path, protect: list[str] | tuple[str, ...]) -> None:
    """--force replaces a folder whole: never one that holds an input, the working folder or home."""
    keep = [Path.cwd(), Path.home(), *(Path(p) for p in protect)]
    for p in keep:
        try:
            resolved = p.resolve()
        except OSError:
            continue
        if resolved == target or target in resolved.parents:
            raise UsageError(f"--out {root}: --force would remove {p}: refusing",
                             hint="choose an --out folder of its own")


def run_folder_name(transcript: str, policy: Any, overridden: bool, used: set[str]) -> str:
    """``<transcript>-<policy>``, with the policy's fingerprint when ``--set`` changed it (two
    variants of one preset never share a folder), numbered when ``used`` already has it."""
    name = f"{safe_stem(transcript)}-{safe_stem(policy.name)}"
    if overridden:
        name += f"-{policy.fingerprint[:8]}"
    n = 1
    while (f"{name}-{n}" if n > 1 else name) in used:
        n += 1
    name = f"{name}-{n}" if n > 1 else name
    used.add(name)
    return name
