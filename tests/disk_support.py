"""A small disk that can be filled and freed, for disk-full tests through ``%agent``.

Where the test may mount (root, ``mount`` allowed: the project's CI machine), the workspace
is a real tmpfs of a few MiB and "full" is real: a filler file takes every block but
``leave`` bytes, and every write of the package meets the kernel's own ENOSPC. Elsewhere
the same budget is kept by ``os.write`` for the files under the workspace (the writes the
package makes there), so the test still runs, on a simulation (``PC_TEST_SIMULATED_DISK=1``
forces it).
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

DISK_BYTES = 4 << 20


def can_mount(path: Path) -> bool:
    if os.environ.get("PC_TEST_SIMULATED_DISK") or os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES},mode=0755", "tmpfs", str(path)],
        capture_output=True,
    )
    return done.returncode == 0


class SmallDisk:
    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, *, real: bool) -> None:
        self.root = root
        self.real = real
        self.filler = root / "filler.bin"
        self.budget: int | None = None  # simulated: bytes left, None = room
        self.refused = 0  # writes refused with ENOSPC (simulated disk only)
        if not real:
            real_write = os.write

            def write(fd: int, data) -> int:
                if self.budget is not None and self._ours(fd):
                    if len(data) > self.budget:
                        self.refused += 1
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    self.budget -= len(data)
                return real_write(fd, data)

            monkeypatch.setattr(os, "write", write)

    def _ours(self, fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(str(self.root) + os.sep)
        except OSError:
            return False

    def fill(self, leave: int = 0) -> None:
        """Take all the space but about ``leave`` bytes."""
        if not self.real:
            self.budget = leave
            return
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for chunk in (1 << 20, 1 << 16, 1 << 12, 1):
                block = b"\0" * chunk
                try:
                    while True:
                        os.write(fd, block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
            size = os.fstat(fd).st_size
            os.ftruncate(fd, max(0, size - leave))
        finally:
            os.close(fd)

    def free(self) -> None:
        self.budget = None
        self.filler.unlink(missing_ok=True)

    def is_full_for(self, size: int) -> bool:
        """Whether a write of ``size`` bytes would be refused now."""
        if not self.real:
            return self.budget is not None and size > self.budget
        stat = os.statvfs(self.root)
        return stat.f_bavail * stat.f_frsize < size


@pytest.fixture
def small_disk(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    """The workspace on a disk that can be filled; the working directory is the disk."""
    real = can_mount(workspace)
    if real:
        monkeypatch.chdir(workspace)  # the mount hides the folder the cwd pointed to
    disk = SmallDisk(workspace, monkeypatch, real=real)
    try:
        yield disk
    finally:
        disk.free()
        if real:
            os.chdir(workspace.parent)
            subprocess.run(["umount", "-l", str(workspace)], capture_output=True)
