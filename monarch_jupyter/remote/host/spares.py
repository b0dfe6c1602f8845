"""Rank folders made ahead of their run, and pruned ones emptied to be made ahead again.

A run then costs a rename instead of a mkdir and four file creations; and a host that runs many
short commands neither creates nor deletes files run after run (on ext4 without a journal each
new file otherwise skips, one block lookup each, every inode freed in the last seconds).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

from .layout import FREE, FREE_RUN, RANK_FILES, SPARE, runs_root

KEEP_FREE = 128  # emptied folders kept for reuse per host (4 empty files each)


class Spares:
    """Makes this process's spare folders (``.spare.<pid>.<n>``) and remembers the free folders
    its last scan of a runs folder found. Owned by the actor's :class:`~.shell.ShellKeeper`."""

    def __init__(self) -> None:
        self._made = 0
        self._free_seen: dict[tuple[Path, str], list[str]] = {}  # (root, prefix) → names last scanned

    def _next_name(self, root: Path) -> Path:
        while True:  # another Spares of this process may have made that one
            self._made += 1
            folder = root / f"{SPARE}{os.getpid()}.{self._made}"
            if not os.path.lexists(folder):
                return folder

    def make(self, root: Path | None = None) -> Path:
        """A rank folder made ahead of its run (out, err, status and meta.json, empty: read as
        absent): a pruned run's folder emptied (see :class:`Recycler`) when there is one."""
        root = root or runs_root()
        folder = self._next_name(root)
        if self.take_free(root, folder, FREE):
            return folder
        os.mkdir(folder, 0o700)
        try:
            for name in RANK_FILES:
                os.close(os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return folder

    def make_run(self, spare: Path) -> Path:
        """An empty folder made ahead to become the run's folder of the rank folder ``spare``
        (:func:`place`): a rename on the run's path instead of a mkdir. A pruned run's folder
        when there is one."""
        folder = spare.with_name(spare.name + ".run")
        if self.take_free(spare.parent, folder, FREE_RUN):
            if _empty_folder(folder):
                return folder
            shutil.rmtree(folder, ignore_errors=True)  # not as prune left it: never a run's folder
        os.mkdir(folder, 0o700)
        return folder

    def take_free(self, root: Path, folder: Path, prefix: str) -> bool:
        """Rename one of prune's emptied folders (``prefix``: FREE or FREE_RUN) to ``folder``; False
        when there is none left. The names come from one scan of ``root`` that serves the next
        spares too (each scan reads every run's folder)."""
        names = self._free_seen.setdefault((root, prefix), [])
        for scanned in (False, True):
            while names:
                try:
                    os.rename(root / names.pop(), folder)
                    return True
                except OSError:  # another actor on this host took it first
                    continue
            if scanned:
                return False
            try:
                with os.scandir(root) as entries:
                    names.extend(e.name for e in entries if e.name.startswith(prefix))
            except OSError:
                return False
        return False


def remove_spares(spare: Path | None, spare_run: Path | None) -> None:
    """Remove folders made ahead and not used."""
    if spare is not None:
        shutil.rmtree(spare, ignore_errors=True)
    if spare_run is not None:
        with contextlib.suppress(OSError):
            os.rmdir(spare_run)


def place(folder: Path, spare: Path | None, spare_run: Path | None = None) -> None:
    """Make ``folder`` a rank's folder: the ``spare`` renamed to it when there is one, else
    created. Its run's folder is ``spare_run`` renamed, unless it is there already (another
    rank of this host made it: then ``spare_run`` is removed)."""
    if spare is not None:
        try:
            if spare_run is not None:
                try:  # onto a missing (or empty) folder only: never replaces another rank's
                    os.rename(spare_run, folder.parent)
                    spare_run = None
                except OSError:
                    pass
            if spare_run is not None:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder.parent, 0o700)
            os.rename(spare, folder)
            return
        except OSError:
            shutil.rmtree(spare, ignore_errors=True)
        finally:
            if spare_run is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(spare_run)
    prepare(folder)


def prepare(folder: Path) -> None:
    """Create a rank's folder (0700; its out / err files are created by whoever opens them first)."""
    try:
        os.mkdir(folder, 0o700)
    except FileNotFoundError:  # the run's folder first (one per run, not per rank)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        pass


def _empty_folder(path: Path) -> bool:
    """A real folder (not a link) with nothing in it."""
    try:
        if path.is_symlink():
            return False
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def spare_owner_alive(spare: Path) -> bool:
    """Whether the actor that made this spare folder is still running."""
    try:
        os.kill(int(spare.name[len(SPARE) :].split(".")[0]), 0)
        return True
    except (ValueError, ProcessLookupError):
        return False
    except OSError:
        return True


def _empty_for_reuse(rank: Path, root: Path) -> bool:
    """Make a pruned rank folder a free one (its four files emptied, anything else removed);
    False if it is not as we made it (then it is removed instead)."""
    try:
        with os.scandir(rank) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for name, is_dir in names:
            path = rank / name
            if name not in RANK_FILES:
                shutil.rmtree(path) if is_dir else os.unlink(path)
                continue
            # never follows a link, never waits on a FIFO, empties only a regular file
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return False
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)
        os.rename(rank, root / f"{FREE}{os.urandom(6).hex()}")
        return True
    except OSError:
        return False


class Recycler:
    """Empties pruned runs' folders for reuse while fewer than ``KEEP_FREE`` of each kind wait."""

    def __init__(self, root: Path, entries: list[Path]) -> None:
        self.root = root
        self.free = sum(1 for p in entries if p.name.startswith(FREE))
        self.free_runs = sum(1 for p in entries if p.name.startswith(FREE_RUN))

    def recycle(self, folder: Path) -> None:
        """Empty the run's rank folders (and then its own folder) to be spares again, or remove them."""
        with contextlib.suppress(OSError):
            for rank in folder.iterdir():
                if (
                    self.free < KEEP_FREE
                    and rank.is_dir()
                    and not rank.is_symlink()
                    and _empty_for_reuse(rank, self.root)
                ):
                    self.free += 1
        if self.free_runs < KEEP_FREE and _empty_folder(folder):  # its ranks all went to the free ones
            with contextlib.suppress(OSError):
                os.rename(folder, self.root / f"{FREE_RUN}{os.urandom(6).hex()}")
                self.free_runs += 1
        shutil.rmtree(folder, ignore_errors=True)
