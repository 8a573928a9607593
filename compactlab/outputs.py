"""The run's output folder: safe names for untrusted ids, atomic writes, nothing outside it.

A persisted file's name comes from a tool_use id, which is untrusted input: it is sanitised to
``[A-Za-z0-9_-]`` (at most 64 characters), names reserved on Windows are avoided, and whenever
the name is not the id itself, or another id already took that name ignoring case, a short hash
of the id is appended. A second, different output under an id that was already written gets a
numbered name. Every path is resolved and checked to lie inside the folder before writing.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from .errors import UsageError

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
MAX_NAME = 64
_UMASK = os.umask(0)
os.umask(_UMASK)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def safe_stem(tool_use_id: str) -> str:
    """A file-name stem made only of safe characters (the id itself when it already is one)."""
    stem = _UNSAFE.sub("_", tool_use_id)[:MAX_NAME].strip("_-") or "id"
    if stem != tool_use_id or stem.lower() in _RESERVED:
        stem = f"{stem[:MAX_NAME - 9]}-{_digest(tool_use_id)[:8]}"
    return stem


def mkstemp(directory: Path, prefix: str, suffix: str = "") -> tuple[int, str]:
    """A new file of a random name in ``directory``, opened exclusively with mode 0600: what
    tempfile.mkstemp does, without its imports (shutil, bz2, lzma, random: ~5 ms of every start)."""
    for _ in range(100):
        name = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"{directory}: no free temporary name")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temp file in the same folder and rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = mkstemp(path.parent, f".{path.name}.", ".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file already holds exactly ``data`` (a run repeated into the same folder):
    then it is left as it is, mtime included. Comparing is a read from the page cache; replacing
    costs a rename, which some file systems make flush the new file first."""
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


class OutputDir:
    """Where a run writes. ``dry_run`` computes every name but writes nothing."""

    def __init__(self, root: str | os.PathLike | None, dry_run: bool = False) -> None:
        self.root = Path(root) if root is not None else None
        self.dry_run = dry_run or root is None
        self._owner: dict[str, tuple[str, str]] = {}  # lower-cased name -> (tool id, content digest)
        self._resolved_root: Path | None = None
        self._created: list[Path] = []  # folders and files this run made where nothing was

    def _new_folders(self, folder: Path) -> None:
        """Create ``folder`` and its missing parents, remembering those it made."""
        missing = []
        while not folder.is_dir():
            missing.append(folder)
            folder = folder.parent
        for f in reversed(missing):
            f.mkdir(exist_ok=True)
            self._created.append(f)

    def rollback(self) -> None:
        """Remove what this run wrote where nothing was before: a run that fails part-way (a bad
        line deep in a streamed transcript, an interrupt) leaves the folder as it found it, but
        for files it replaced."""
        for path in reversed(self._created):
            try:
                path.rmdir() if path.is_dir() else path.unlink()
            except OSError:
                pass  # a folder someone else wrote into meanwhile stays
        self._created.clear()

    def prepare(self) -> None:
        """Create the folder, or explain in one line why it cannot be used."""
        if self.dry_run or self.root is None:
            return
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"--out {self.root}: exists and is not a folder")
        try:
            self._new_folders(self.root)
        except OSError as exc:
            raise UsageError(f"--out {self.root}: cannot create folder: {exc.strerror or exc}") from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise UsageError(f"--out {self.root}: folder is not writable")
        try:  # what os.access cannot tell (read-only mounts, root on some file systems)
            fd, probe = mkstemp(self.root, ".compactlab-probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise UsageError(f"--out {self.root}: folder is not writable: {exc.strerror or exc}") from None

    def inside(self, relative: str) -> Path:
        assert self.root is not None
        if self._resolved_root is None:
            self._resolved_root = self.root.resolve()
        root = self._resolved_root
        target = (root / relative).resolve()
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

    def write_bytes(self, relative: str, data: bytes) -> None:
        if self.dry_run:
            return
        try:
            target = self.inside(relative)
            self._new_folders(target.parent)
            fresh = not target.exists()
            if not fresh and _holds(target, data):
                return
            atomic_write_bytes(target, data)
            if fresh:
                self._created.append(target)
        except OSError as exc:
            raise UsageError(f"{self.root}: cannot write {relative}: {exc.strerror or exc}") from None

    def write_all(self, files: dict[str, bytes]) -> None:
        """Write a set of report files all or none: each goes to a temporary file first, and
        only when every one of them is written are they renamed into place. A full disk or an
        interrupt leaves no partial report."""
        if self.dry_run:
            return
        staged: list[tuple[str, Path]] = []
        relative = ""
        try:
            for relative, data in files.items():
                target = self.inside(relative)
                if _holds(target, data):
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = mkstemp(target.parent, f".{target.name}.", ".tmp")
                staged.append((tmp, target))
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.chmod(tmp, 0o666 & ~_UMASK)
            for tmp, target in staged:
                os.replace(tmp, target)
        except BaseException as exc:
            for tmp, _ in staged:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if isinstance(exc, OSError):
                raise UsageError(f"{self.root}: cannot write {relative}: {exc.strerror or exc}") from None
            raise
