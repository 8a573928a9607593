"""The run's output folder: safe names for untrusted ids, atomic writes, nothing outside it.

A persisted file's name comes from a tool_use id, which is untrusted input: it is sanitised to
``[A-Za-z0-9_-]`` (at most 64 characters), names reserved on Windows are avoided, and whenever
the name is not the id itself, or another id already took that name ignoring case, a short hash
of the id is appended. A second, different output under an id that was already written gets a
numbered name. Every path is resolved and checked to lie inside the folder before writing.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from ..errors import UsageError, cannot_write
from ..plain import pattern
from .files import read_at_most
from .sha256 import hex_of

_UNSAFE = pattern(r"[^A-Za-z0-9_-]")
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
MAX_NAME = 64


def _digest(text: str) -> str:
    return hex_of(text.encode("utf-8", "surrogatepass"))


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
        raise cannot_write(f"{label}: cannot write", exc) from None


def _open_in_place(real: Path, label: str, flags: int) -> int:
    """A descriptor on the character device (or, with O_APPEND, regular file) at ``real``, opened
    without blocking and checked again once open: what was checked by name may have changed."""
    try:
        fd = os.open(real, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader
            raise UsageError(f"{label}: is a named pipe, not a regular file: refusing to write to it") from None
        raise cannot_write(f"{label}: cannot write", exc) from None
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
        raise cannot_write(f"{label}: cannot write", exc) from None


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """The (device, inode) a path names once symbolic links are followed; None: nothing there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _inputs_of(inputs: Iterable[str | os.PathLike]) -> list[str]:
    """The run's inputs: those given and every file this process opened as one (a policy, a price
    table, a prompt: ``files.opened_inputs``)."""
    from .files import opened_inputs

    return [*(os.fspath(i) for i in inputs), *opened_inputs()]


def refuse_inputs(path: str | os.PathLike, what: str = "", inputs: Iterable[str | os.PathLike] = ()) -> None:
    """Refuse (UsageError) a destination that is one of the run's inputs: the same device and inode
    once links are followed (a symbolic link to it, the same path, a path through ``..``, a hard
    link), as ``cp`` refuses "are the same file". Called before any work by every writer."""
    here = _identity(path)
    if here is None:
        return
    label = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    for name in _inputs_of(inputs):
        if _identity(name) == here:
            from .files import shown

            raise UsageError(f"{label}: is the same file as the input {shown(name)}: refusing to replace it",
                             hint="write to a file of its own")


def refuse_holding(folder: str | os.PathLike, what: str = "--out", inputs: Iterable[str | os.PathLike] = ()) -> None:
    """Refuse (UsageError) an output folder that is, or holds, one of the run's inputs: a run
    replaces its folder whole, and the input would go with it."""
    real = os.path.realpath(folder)
    for name in _inputs_of(inputs):
        where = os.path.realpath(name)
        if where == real or where.startswith(real.rstrip(os.sep) + os.sep):
            from .files import shown

            raise UsageError(f"{what} {os.fspath(folder)}: holds the input {shown(name)}: refusing to replace it",
                             hint="choose an --out folder of its own")


def check_destination(path: str | os.PathLike, what: str = "", inputs: Iterable[str | os.PathLike] = (),
                      replaces: tuple[bytes, ...] | None = None, force: bool = False) -> None:
    """Refuse, before any work, a destination :func:`atomic_write_bytes` would refuse (a named
    pipe, a socket, a folder, a block device) or one that is an input of the run. ``replaces``:
    how a file compactlab wrote there starts (a JUnit report: ``<?xml``): any other non-empty file
    is refused unless ``force``; ``()``: every non-empty file is."""
    label = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    real, st = _destination(Path(os.fspath(path)), label)
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise _refuse(label, st.st_mode)
    refuse_inputs(path, what, inputs)
    if replaces is None or force or st is None or not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return
    try:
        with open(real, "rb") as f:
            head = f.read(64).lstrip()
    except OSError:
        head = b""
    if not replaces or not head.startswith(replaces):
        raise UsageError(f"{label}: exists" + (", and compactlab did not write it" if replaces else "")
                         + ": refusing to replace it",
                         hint="choose a new file" + (", or add --force to replace it" if replaces == () else ""))


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
    # the folders made for it: removed again if it cannot be written (a dangling link's are not made)
    made = _make_folders(real.parent) if not os.path.islink(path) else []
    try:
        # created with the mode a new file gets (0666 less the umask, applied by the system), or ``mode``
        fd, tmp = mkstemp(real.parent, f".{real.name}.", ".tmp", 0o666 if mode is None else mode)
    except BaseException:
        _remove_folders(made)
        raise
    def still_a_file() -> None:  # (checked again just before the rename: a pipe or device put there meanwhile stays)
        try:
            now = os.lstat(real).st_mode
        except FileNotFoundError:
            now = stat.S_IFREG
        if not stat.S_ISREG(now):
            raise _refuse(label, now)

    try:
        _swap_in(fd, tmp, real, data, still_a_file)
    except BaseException:
        _remove_folders(made)
        raise


def _swap_in(fd: int, tmp: str, final: Path, data: Content, before: Callable[[], None] | None = None) -> None:
    """The one way compactlab writes a whole file: into ``tmp`` (open as ``fd``, in the same folder as
    ``final``), then renamed over ``final`` (``before`` checks what is there just before), so that
    no reader sees half a file and a link planted at ``final`` is replaced, its target untouched;
    ``tmp`` removed if anything fails."""
    try:
        with os.fdopen(fd, "wb") as f:
            _write(f, data)
        if before is not None:
            before()
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents: those made, the outermost first."""
    missing = []
    while not folder.is_dir() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    made: list[Path] = []
    try:
        for new in reversed(missing):
            new.mkdir(exist_ok=True)
            made.append(new)
    except BaseException:
        _remove_folders(made)  # (one that cannot be made: those made before it go again)
        raise
    return made


def _remove_folders(made: list[Path]) -> None:
    """Remove the folders a write or a run made (``_make_folders``' list) that are still empty,
    the innermost first: a folder someone else wrote into meanwhile stays."""
    for f in reversed(made):
        try:
            f.rmdir()
        except OSError:
            pass


def write_in_folder(folder: str | os.PathLike, relative: str, data: Content, what: str = "--out") -> None:
    """Write ``relative`` under ``folder`` (one compactlab writes in place: tune's --out) never
    through a symbolic link: every folder on the way must be a real folder (made where missing),
    and the file is renamed over its name, so that a link planted there is replaced and what it
    points to is left as it was."""
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts:
        raise UsageError(f"refusing to write outside the output folder: {relative!r}")
    here = Path(folder)
    for i, part in enumerate(parts[:-1]):
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            os.mkdir(here)
            continue
        if not stat.S_ISDIR(mode):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
            raise UsageError(f"{what} {os.fspath(folder)}: {'/'.join(parts[:i + 1])} is {kind}: refusing to write "
                             "through it", hint="remove it, or choose another --out")
    final = here / parts[-1]
    try:
        mode = os.lstat(final).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if stat.S_ISDIR(mode):
        raise _refuse(f"{what} {os.fspath(folder)}: {relative}", mode)
    fd, tmp = mkstemp(here, f".{final.name}.", ".tmp", 0o666)
    _swap_in(fd, tmp, final, data)  # (over a link: the link is replaced, its target untouched)


def remove_in_folder(folder: str | os.PathLike, relative_dir: str, pattern: str) -> None:
    """Remove the files matching ``pattern`` in ``folder/relative_dir`` (a real folder, not a link:
    nothing outside ``folder`` is ever removed)."""
    where = Path(folder) / relative_dir
    try:
        if not stat.S_ISDIR(os.lstat(where).st_mode):
            return
    except FileNotFoundError:
        return
    for old in where.glob(pattern):
        if not os.path.isdir(old) or os.path.islink(old):
            old.unlink()


def append_text(path: str | os.PathLike, text: str, what: str = "") -> None:
    """Append ``text`` to a regular file (created if absent) or write it to a character device;
    a named pipe, socket or directory is refused (UsageError) and never waited on."""
    label = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    fd = _open_in_place(Path(os.fspath(path)), label, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    _write_fd(fd, text.encode("utf-8", "surrogatepass"), label)


MARKER = ".compactlab-run"
"""The file that says a folder is a compactlab run: the files it wrote, so that a later run
replaces it whole and a folder holding anything else is not mistaken for one; and whether the
run was complete (an interrupted run's partial results never replace a complete run)."""


def _remove_tree(path: Path) -> None:
    """``shutil.rmtree(path, ignore_errors=True)`` without importing ``shutil`` (and its ``bz2``
    and ``lzma``: 2 ms of a replay that replaces its folder): by descriptors, as ``shutil``'s
    does here, so that a symbolic link in the tree is removed, never followed; ``path`` itself
    must be a folder (a link or a file is left, as ``shutil`` leaves it). Where the system cannot
    walk a folder by its descriptor, ``shutil`` does it."""
    if os.scandir not in os.supports_fd or not hasattr(os, "O_NOFOLLOW") or not hasattr(os, "O_DIRECTORY"):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        _remove_inside(fd, flags)
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass


def _remove_inside(fd: int, flags: int) -> None:
    """Everything in the folder open as ``fd`` removed, as much as can be."""
    try:
        with os.scandir(fd) as listing:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in listing]
    except OSError:
        return
    for name, folder in entries:
        try:
            if folder:
                sub = os.open(name, flags, dir_fd=fd)
                try:
                    _remove_inside(sub, flags)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        except OSError:
            pass


def _marker(root: Path) -> dict[str, Any] | None:
    """The marker of the run in ``root`` (None: not a compactlab run, or its marker is damaged)."""
    try:
        with open(os.path.join(root, MARKER), "rb") as f:
            doc = orjson.loads(read_at_most(f, 16 << 20))
    except (OSError, orjson.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("files"), list) else None


def _foreign(root: Path) -> str | None:
    """The first entry under ``root`` that no earlier compactlab run wrote, or None."""
    marker = _marker(root)
    listed = None if marker is None else marker["files"]
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


class _Lock:
    """The lock of one output folder for one run (``.<name>.compactlab-lock`` beside it, held with
    ``flock``): a second run on the same --out is refused, never mixed in. Removed when released;
    a holder that finds the file it locked no longer at that name (removed by the run before it)
    takes the new one."""

    def __init__(self, target: Path, label: str) -> None:
        import fcntl

        self.path = target.parent / f".{target.name}.compactlab-lock"
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        for _ in range(100):
            try:
                fd = os.open(self.path, flags, 0o600)
            except OSError as exc:
                raise UsageError(f"{label}: cannot lock it: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 32).decode("ascii", "replace").strip()
                os.close(fd)
                raise UsageError(f"{label}: another compactlab run is writing it"
                                 + (f" (process {holder})" if holder.isdigit() else ""),
                                 hint="wait for it to finish, or choose another --out") from None
            if _identity(self.path) == (os.fstat(fd).st_dev, os.fstat(fd).st_ino):
                self.fd: int | None = fd
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()}\n".encode())
                except OSError as exc:  # (a full disk: the lock goes, and the run never starts)
                    self.release()
                    raise cannot_write(f"{label}: cannot lock it", exc) from None
                return
            os.close(fd)  # (removed by the run that held it: the name is a new file now)
        raise UsageError(f"{label}: cannot lock it")

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # (while held: a run waiting on this file finds it gone, and takes a new one)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


class OutputDir:
    """Where a run writes: a fresh folder beside the destination, put in place whole by
    :meth:`commit`, so that the destination only ever holds one complete run. A destination
    holding an earlier compactlab run is replaced whole; one holding anything else is refused
    unless ``force``; one that is or holds an input of the run is refused. The destination is
    locked for the run (a second run on it is refused), and a run that was killed outright leaves
    nothing the next one keeps. ``dry_run`` computes every name but writes nothing anywhere.

    ``sub(name)`` is a view of the same run writing under ``name/`` (a replay of several
    transcripts into one ``--out``); only the run itself is committed or rolled back.
    """

    def __init__(self, root: str | os.PathLike | None, dry_run: bool = False, force: bool = False) -> None:
        self.root = Path(root) if root is not None else None
        self.dry_run = dry_run or root is None
        self.force = force
        self.prefix = ""
        #: lower-cased name -> (tool id, its text's length): the output it was given to
        self._owner: dict[str, tuple[str, int]] = {}
        self._run: OutputDir = self
        self._stage: Path | None = None  # the fresh folder being written
        self._target: Path | None = None  # where it goes: the destination, symlinks resolved
        self._created: list[Path] = []  # parent folders this run made where nothing was
        self._lock: _Lock | None = None
        #: (the fresh folder, a folder in it, relative) -> that folder, made and checked to lie inside
        #: (``_write_new``)
        self._folders: dict[tuple[Path, str], Path] = {}

    def sub(self, name: str) -> "OutputDir":
        view = OutputDir(None if self.root is None else self.root / name, self.dry_run)
        view._run, view.prefix = self._run, f"{self.prefix}{name}/"
        return view

    @property
    def path(self) -> str | None:
        """Where the files are once the run is committed (None for a dry run)."""
        return None if self.dry_run or self.root is None else str(self.root)

    def prepare(self, protect: Iterable[str | os.PathLike] = ()) -> None:
        """Check the destination and create the fresh folder, or explain in one line why the
        destination cannot be used. ``protect``: the run's inputs, which the destination may not
        be or hold (nor, with ``force``, the working folder or home)."""
        run = self._run
        if run is not self:
            run.prepare(protect)
            return
        if self.dry_run or self.root is None or self._stage is not None:
            return
        protect = list(protect)
        root = self.root
        if os.path.islink(root) and not os.path.exists(root):
            raise UsageError(f"--out {root}: a symbolic link to nothing", hint="name a folder, or remove the link")
        if root.exists() and not root.is_dir():
            raise UsageError(f"--out {root}: exists and is not a folder")
        refuse_holding(root, "--out", protect)
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
                self._created += _make_folders(root.parent)
            except OSError as exc:
                raise UsageError(f"--out {root}: cannot create folder: {exc.strerror or exc}") from None
            target = root.parent.resolve() / root.name
        self._lock = _Lock(target, f"--out {root}")
        parent = target.parent
        try:
            _remove_leftovers(target)
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

    def holds_complete_run(self) -> bool:
        """Whether the destination holds an earlier compactlab run that was complete."""
        target = self._run._target
        marker = None if target is None else _marker(target)
        return marker is not None and marker.get("complete", True) is True

    def commit(self, complete: bool = True) -> bool:
        """Put the finished run in place of the destination (signals held back meanwhile). A run
        that is not ``complete`` (interrupted: a part of its results) never replaces a complete
        earlier run: it is rolled back instead. Whether it was put in place."""
        from .interrupts import deferred

        run = self._run
        if run is not self:
            raise RuntimeError("commit the run, not a view of it")
        if self._stage is None:
            return False
        if not complete and self.holds_complete_run():
            self.rollback()
            return False
        stage, target = self._stage, self._target
        assert target is not None
        files = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if not p.is_dir())
        try:
            (stage / MARKER).write_bytes(orjson.dumps({"files": files, "complete": complete}) + b"\n")
        except OSError as exc:
            self.rollback()
            raise cannot_write(f"{self.root}: cannot write {MARKER}", exc) from None
        with deferred():
            old = None
            if target.is_dir():
                old = stage.with_name(stage.name + "-old")
                os.replace(target, old)
            os.replace(stage, target)
            self._stage, self._created = None, []
            if old is not None:
                _remove_tree(old)
            self._unlock()
        return True

    def _unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

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
            self._unlock()  # (its file is in the first folder made)
            _remove_folders(self._created)
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
        """(relative path for this output, whether it still has to be written). A name already given
        to an output of the same tool call and length is this one again where its file holds this
        text (``_holds``: read back only then; no hash of every output, which cost a replay more
        than the rare read)."""
        key = (tool_use_id, len(text))
        stem = safe_stem(tool_use_id)
        n = 1
        while True:
            name = stem if n == 1 else f"{stem}-{n}"
            owner = self._owner.get(name.lower())
            if owner is None:
                self._owner[name.lower()] = key
                return f"tool-results/{name}.txt", True
            if owner == key and self._holds(f"tool-results/{name}.txt", text):  # the same output again: the
                return f"tool-results/{name}.txt", False                      # seed writes it once
            if owner[0] != tool_use_id and n == 1 and not stem.endswith(_digest(tool_use_id)[:8]):
                stem = f"{stem[:MAX_NAME - 9]}-{_digest(tool_use_id)[:8]}"
                continue
            n += 1

    def _holds(self, relative: str, text: str) -> bool:
        """Whether the file this run wrote at ``relative`` holds ``text`` (no output is lost to
        another of the same length). A dry run wrote nothing to lose."""
        if self.dry_run:
            return True
        try:
            return self.inside(relative).read_bytes() == text.encode("utf-8", "surrogatepass")
        except OSError:
            return False  # (written again under another name: nothing lost)

    def write_text(self, relative: str, text: str) -> None:
        self.write_bytes(relative, text.encode("utf-8", "surrogatepass"))

    def write_bytes(self, relative: str, data: Content) -> None:
        if self.dry_run:
            return
        try:
            if self._write_new(relative, data):
                return
            target = self.inside(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = mkstemp(target.parent, f".{target.name}.", ".tmp", 0o666)
            _swap_in(fd, tmp, target, data)  # (the run's own staging folder: as every file is written)
        except OSError as exc:
            raise cannot_write(f"{self.root}: cannot write {relative}", exc) from None

    def _write_new(self, relative: str, data: Content) -> bool:
        """Write a file the run has not written yet straight into the run's fresh folder (no reader
        sees that folder before the run is put in place whole, so no file needs writing aside and
        renaming): its folder made and checked to lie inside once, the file created where nothing
        is (``O_EXCL``: never through a link). False where it is not a new file of a plain name (the
        caller writes it aside and renames it over what is there)."""
        run = self._run
        if run._stage is None:
            run.prepare()
        assert run._stage is not None
        folder_name, _, name = (self.prefix + relative).rpartition("/")
        if name in ("", ".", "..") or os.sep in name or (os.altsep and os.altsep in name):
            return False
        key = (run._stage, folder_name)
        folder = run._folders.get(key)
        if folder is None:
            folder = run._stage
            if folder_name:
                run.inside(folder_name).mkdir(parents=True, exist_ok=True)
                folder = run.inside(folder_name)  # (checked as it is once made)
            run._folders[key] = folder
        try:
            fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            return False  # (written before, or something put there: replaced whole, never written through)
        try:
            with os.fdopen(fd, "wb") as f:
                _write(f, data)
        except BaseException:
            try:
                os.unlink(folder / name)
            except OSError:
                pass
            raise
        return True

    def write_all(self, files: Mapping[str, Content]) -> None:
        """Write a set of report files (the run is whole or absent anyway: it is committed at
        its end and rolled back on failure)."""
        for relative, data in files.items():
            self.write_bytes(relative, data)


def _remove_leftovers(target: Path) -> None:
    """Remove what runs on ``target`` that were killed outright (SIGKILL, a power cut) left beside
    it: their fresh folders and replaced runs. Called with the lock held: no live run has any."""
    prefix = f".{target.name}.compactlab-"
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for name in names:
        rest = name[len(prefix):]
        if name.startswith(prefix) and rest.split("-")[0].isdigit():  # (.NAME.compactlab-PID-HEX[-old])
            path = target.parent / name
            if os.path.isdir(path) and not os.path.islink(path):
                _remove_tree(path)


def _refuse_to_remove(root: Path, target: Path, protect: Iterable[str | os.PathLike]) -> None:
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
