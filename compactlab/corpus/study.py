"""A tune's Optuna study (#20 §2, #32): kept in Optuna's journal storage under the output folder
(``OUT/study.journal``), checked before it is opened (a damaged journal, another search's study),
held by one tune at a time, repaired after an interrupt."""

from __future__ import annotations

import os
import stat
import warnings
from typing import Any

import orjson

from ..core import in_use
from ..engine.policy import load_policy
from ..errors import UsageError, cannot_write
from ..plain import dataclass
from ..plumbing.outputs import refuse_inputs
from .trials import Param, direction


#: the study's name in its journal
STUDY = "compactlab-tune"

#: the study's file: Optuna's journal (an append-only log of JSON lines: a trial costs an append,
#: where SQLite's storage cost a committed transaction per attribute, 4.8x the time; docs/tune.md)
JOURNAL = "study.journal"


#: held (flock) while a tune runs on the study of its --out: one tune per study at a time
LOCK = "study.lock"


#: what a tune writes in its --out (reports/tune_report.py: the front, its policies, the chart)
WRITTEN = (JOURNAL, LOCK, "front.csv", "front.json", "policies", "charts")


def study_path(out_dir: str) -> str:
    """The study file of ``out_dir``: its journal."""
    return os.path.join(out_dir, JOURNAL)


def storage_of(path: str) -> Any:
    """Optuna's storage of a study journal (its file: ``journal_of``)."""
    from optuna.storages import JournalStorage

    return JournalStorage(journal_of(path))


def native_log_ndtr() -> bool:
    """Have Optuna's TPE sampler compute log Φ on the native core (``_native.log_ndtr``, to the bit
    what its ``_log_ndtr_single`` computes, mapped over an array by ``np.frompyfunc``: a million
    Python calls in a tune of 200 trials, Optuna issue #5478), so the same seed asks the same
    trials on either core, sooner. Whether it does: not where the python core is chosen, nor on an
    Optuna whose module is not the one it was checked against (``tests/corpus/test_study.py``)."""
    native = in_use()
    try:
        from optuna.samplers._tpe import _truncnorm as truncnorm
    except ImportError:
        return False
    if native is None or not hasattr(truncnorm, "_log_ndtr_single") or not hasattr(truncnorm, "_log_ndtr"):
        return False
    if getattr(truncnorm._log_ndtr, "native", False):
        return True
    import numpy as np

    def log_ndtr(a: Any) -> Any:
        a = np.asarray(a, dtype=float)
        return np.array(native.log_ndtr(a.ravel().tolist()), dtype=float).reshape(a.shape)

    log_ndtr.native = True  # type: ignore[attr-defined]
    log_ndtr.replaced = truncnorm._log_ndtr  # type: ignore[attr-defined]  # (Optuna's own)
    truncnorm._log_ndtr = log_ndtr
    return True


def journal_of(path: str) -> Any:
    """Optuna's journal file at ``path``, each log line appended as Optuna appends it, but made
    durable (``fsync``) once a trial is told (``Journal.durable``) rather than at every line: a
    trial is some 17 lines, and their fsyncs were 0.7 s of CPU of a tune of 200 trials (more
    wall time on a slow disk). A tune killed outright loses nothing the system had been handed; a
    machine that stops loses at most the trial being told, whose half-written line ``--resume``
    cuts (``_cut_partial_line``) and whose trial it repairs."""
    import json

    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock
    from optuna.storages.journal._file import get_lock_file

    class Journal(JournalFileBackend):
        unsynced = False

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            # (Optuna's own append, but its fsync: the lines and the lock as it writes them)
            with get_lock_file(self._lock):
                text = "\n".join([json.dumps(log, separators=(",", ":")) for log in logs]) + "\n"
                with open(self._file_path, "ab") as f:
                    f.write(text.encode("utf-8"))
            self.unsynced = True

        def durable(self) -> None:
            """Every line appended so far on the disk."""
            if self.unsynced:
                fd = os.open(self._file_path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                self.unsynced = False

    return Journal(path, lock_obj=JournalFileOpenLock(path + ".optuna-lock"))


def dashboard_command(path: str) -> str:
    """How optuna-dashboard opens the study."""
    return f"optuna-dashboard {path}"


@dataclass(frozen=True)
class StudyDefinition:
    """What makes two tunes the same study, kept in the study's own attributes: a ``--resume``
    whose definition differs is refused, so that one study never mixes trials of two searches."""

    base: str
    fingerprint: str  # of the base policy with --set applied
    overrides: tuple[str, ...]
    space: tuple[str, ...]
    objectives: tuple[str, ...]
    max_violations: int
    corpus: tuple[str, ...]  # the transcripts' content hashes, sorted

    @classmethod
    def of(cls, base: str, overrides: list[str], params: list[Param], objectives: list[str], max_violations: int,
           content_hashes: list[str]) -> "StudyDefinition":
        return cls(base, load_policy(base, overrides).fingerprint, tuple(overrides), tuple(str(p) for p in params),
                   tuple(objectives), max_violations, tuple(sorted(content_hashes)))

    def attrs(self) -> dict[str, Any]:
        return {"definition": {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}}

    def differences(self, stored: Any) -> list[str]:
        """What differs from the definition a study stored (every key, when it stored none)."""
        if not isinstance(stored, dict):
            return ["the study records no definition (not made by this version of compactlab tune)"]
        words = {"base": "base policy", "fingerprint": "base policy's keys (its fingerprint)", "overrides": "--set",
                 "space": "--space", "objectives": "--objective", "max_violations": "--max-violations",
                 "corpus": "transcripts (their content)"}
        out = []
        for key, word in words.items():
            mine = getattr(self, key)
            theirs = stored.get(key)
            if (list(mine) if isinstance(mine, tuple) else mine) != theirs:
                if key == "corpus" and isinstance(theirs, list):
                    out.append(f"{word}: {len(set(mine) - set(theirs))} not in the study, "
                               f"{len(set(theirs) - set(mine))} of the study's missing")
                elif key == "fingerprint" and stored.get("base") == self.base and stored.get("overrides") == list(
                        self.overrides):
                    out.append(f"{word}: the preset changed since the study began")
                elif key != "fingerprint":
                    out.append(f"{word}: {_shown(theirs)} in the study, {_shown(mine)} now")
        return out


def _shown(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(map(str, v)) + ")" if v else "(none)"
    return repr(v)


#: the largest study journal read to check it (200 trials are about 400 KB)
MAX_JOURNAL_BYTES = 1 << 30


def study_problem(path: str, replay: bool = True) -> str | None:
    """Why ``path`` is not a study this command may open, or None: a symlink, anything but a
    regular file, a file that is not a journal of JSON lines that begins with this command's
    study, or (``replay``: a study to be used, replayed by Optuna) a damaged one. Read without
    being modified."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link: refusing to follow it out of --out"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return _journal_problem(path, st.st_size, replay)


#: the longest line of a study journal (a trial's record is a few KB)
MAX_JOURNAL_LINE = 16 << 20


def _journal_problem(path: str, size: int, replay: bool = True) -> str | None:
    """Why the journal at ``path`` is not this command's study, or is damaged, or None: read a
    line at a time (never the whole file at once: a sparse GiB is refused at its first line), each
    line an operation of Optuna's, the first one creating this study; then, with ``replay``,
    replayed by Optuna on a copy (a missing key, an unknown operation, a bad distribution or trial
    state), so that a damaged study is refused before anything writes to it."""
    if size == 0:
        return "an empty file, not a study journal"
    if size > MAX_JOURNAL_BYTES:
        return f"larger than {MAX_JOURNAL_BYTES >> 30} GiB, not a study journal"
    n = 0
    try:
        with open(path, "rb") as f:
            while True:
                line = f.readline(MAX_JOURNAL_LINE + 1)
                if not line:
                    break
                if not line.endswith(b"\n"):
                    if len(line) > MAX_JOURNAL_LINE:
                        return (f"a damaged study journal (line {n + 1} is longer than {MAX_JOURNAL_LINE >> 20} MiB)"
                                if n else "not an Optuna study journal")
                    break  # (a last line cut by a kill is Optuna's to skip)
                n += 1
                try:
                    op = orjson.loads(line)
                except orjson.JSONDecodeError:
                    return f"a damaged study journal (line {n} is not JSON)" if n > 1 else "not an Optuna study journal"
                if not isinstance(op, dict) or "op_code" not in op:
                    return "not an Optuna study journal" if n == 1 else f"a damaged study journal (line {n})"
                if n == 1 and (op.get("op_code") != 0 or op.get("study_name") != STUDY):
                    return f"an Optuna journal without a {STUDY} study as its first"
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if not n:
        return "not an Optuna study journal"
    return _replay_problem(path) if replay else None


def _cut_partial_line(path: str) -> None:
    """Cut a last line a killed tune left half written (no newline after it): Optuna skips it when
    it reads the journal, but the next write would follow it on the same line and damage both."""
    from ..plumbing.interrupts import deferred

    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            f.seek(start)
            block = f.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                with deferred():
                    f.truncate(start + cut + 1)
                return
            end = start


def _replay_problem(path: str) -> str | None:
    """What Optuna says of the journal replayed whole, on a copy (the file itself is not opened for
    writing), or None."""
    import shutil
    import tempfile
    import warnings

    import optuna

    with tempfile.TemporaryDirectory(prefix="compactlab-study-check-") as folder:
        copy = os.path.join(folder, "study.journal")
        shutil.copyfile(path, copy)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                study = optuna.load_study(storage=storage_of(copy), study_name=STUDY)
                for t in study.get_trials(deepcopy=False):
                    t.params, t.distributions, t.state, t.values  # noqa: B018 (each read: each checked)
        except Exception as exc:  # (whatever Optuna raises on a damaged log: it is refused, not run)
            return f"a damaged study journal (Optuna: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
    return None


class StudySite:
    """The study in ``OUT/study.journal``, opened safely: checked before anything is created, locked
    (``study.lock``: a second tune on the same --out is refused, never mixed in), repaired on
    resume (trials a killed tune left RUNNING are failed), and removed again when this command
    created it and no trial finished (a failed start never blocks the rerun)."""

    def __init__(self, out_dir: str, resume: bool, force: bool, inputs: list[str] | tuple[str, ...] = ()) -> None:
        self.out_dir, self.resume, self.force, self.inputs = out_dir, resume, force, inputs
        self.path = study_path(out_dir)
        self._lock: Any = None
        self._journal: Any = None  # (its file, once opened: ``durable``)
        self._made: list[str] = []  # what this command created: the folders, the study file
        self.check()

    def check(self) -> None:
        """Refuse (UsageError, nothing created or changed) a --out or study journal that cannot be used."""
        out, path = self.out_dir, self.path
        if os.path.islink(out) and not os.path.exists(out):
            raise UsageError(f"--out {out}: a symbolic link to nothing")
        if os.path.exists(out) and not os.path.isdir(out):
            raise UsageError(f"--out {out}: exists and is not a folder")
        exists = os.path.lexists(path)
        # (replayed only where it is to be used: a study --force replaces, or one refused as there,
        # needs only to be this command's; Optuna's replay of 200 trials is 0.16 s, and it ran twice)
        problem = study_problem(path, replay=self.resume)
        if problem is not None:
            raise UsageError(f"{path}: {problem}: not used, not changed",
                             hint="choose another --out, or move that file away")
        for name in WRITTEN:  # (written in place: never through a link planted in --out, never over an input)
            if os.path.islink(os.path.join(out, name)):
                raise UsageError(f"--out {out}: {name} is a symbolic link: refusing to write through it",
                                 hint="remove it, or choose another --out")
            refuse_inputs(os.path.join(out, name), "--out", self.inputs)
        if self.resume and not exists:
            raise UsageError(f"--resume: no study to resume in {out}/ ({JOURNAL})")
        if not self.resume and exists and not self.force:
            raise UsageError(f"{path} holds a study", hint="continue it with --resume, or start anew with --force")

    def open(self, definition: StudyDefinition, sampler: str, seed: int) -> Any:
        """Create (or, resuming, load) the study under the lock; its definition checked."""
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            self._folders()
            self._take_lock()
        except OSError as exc:
            self.close(keep=False)
            raise cannot_write(f"--out {self.out_dir}: cannot write", exc) from None
        try:
            self.check()  # again, under the lock: another tune may have made it meanwhile
            if self.resume:
                _cut_partial_line(self.path)  # (what a killed tune left half written: appended to, it would
                #                                 be a damaged line in the middle)
            if self.force and not self.resume and os.path.exists(self.path):
                os.remove(self.path)  # (a study of this command: check() refused anything else)
            if not os.path.exists(self.path):
                self._made.append(self.path)
            if sampler == "tpe":
                native_log_ndtr()
            samplers = {"tpe": lambda: optuna.samplers.TPESampler(seed=seed, multivariate=True),
                        "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=seed)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
                self._journal = journal_of(self.path)
                storage = optuna.storages.JournalStorage(self._journal)
                if self.resume:  # (loading writes nothing: a refused resume leaves the study as it was)
                    study = optuna.load_study(storage=storage, study_name=STUDY, sampler=samplers[sampler]())
                else:
                    study = optuna.create_study(storage=storage, study_name=STUDY,
                                                directions=[direction(o) for o in definition.objectives],
                                                sampler=samplers[sampler]())
            if self.resume:
                differs = definition.differences(study.user_attrs.get("definition"))
                if differs:
                    raise UsageError(f"--resume: not the study in {self.out_dir}/: " + "; ".join(differs),
                                     hint="resume with the same transcripts and options, or start anew with --force")
                repair(study)
            for key, value in definition.attrs().items():
                study.set_user_attr(key, value)
            return study
        except OSError as exc:
            self.close(keep=False)
            why = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            raise UsageError(f"{self.path}: cannot write the study: {why}") from None
        except BaseException:
            self.close(keep=False)
            raise

    def _folders(self) -> None:
        missing, folder = [], os.path.abspath(self.out_dir)
        while not os.path.isdir(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        for f in reversed(missing):
            os.mkdir(f)
            self._made.append(f)

    def _take_lock(self) -> None:
        import fcntl

        lock = os.path.join(self.out_dir, LOCK)
        new = not os.path.lexists(lock)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
        if new:
            self._made.append(lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UsageError(f"{self.path}: another tune is running on this study",
                             hint="wait for it to finish, or choose another --out") from None
        self._lock = fd

    def durable(self) -> None:
        """The study's journal on the disk as far as it is written (after each trial told)."""
        if self._journal is not None:
            self._journal.durable()

    def close(self, keep: bool = True) -> None:
        """Release the lock, the journal made durable first; ``keep=False`` also removes what this
        command created (a study that has no finished trial, the lock file, the folders)."""
        if keep:
            try:
                self.durable()
            except OSError:
                pass  # (what was written stays written: the system has it)
        self._journal = None
        if not keep:
            for made in reversed(self._made):
                try:
                    os.rmdir(made) if os.path.isdir(made) else os.remove(made)
                except OSError:
                    pass
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        self._made = []


def repair(study: Any) -> int:
    """Fail the trials left RUNNING (a tune killed outright): a resume asks anew. How many."""
    import optuna

    from ..plumbing.interrupts import deferred

    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    with deferred():
        for t in running:
            study.tell(t.number, state=optuna.trial.TrialState.FAIL)
    return len(running)
