"""Tie a stdio server's life to the kernel's, however the kernel ends (Linux).

The hub stops its servers at interpreter exit, but a kernel does not always get to run its
exit: Jupyter sends SIGTERM 2.5 s into a shutdown or restart (half of its 5 s wait), an
out-of-memory kill or a crash skips it too. A server that honours the closed stdin goes away
anyway; a stubborn one would be left running, unowned.

So on Linux a stdio server is started through this file, ``python -I -S tether.py PPID PATH
ARGV0 ARGS...``. It asks Linux for SIGTERM when the thread that started it dies
(``PR_SET_PDEATHSIG``, which survives ``execve``), checks the kernel is still its parent,
then becomes the server with ``execv``: the same pid and process group (the SDK's stop kills
that group), its configured ``argv[0]``, nothing left resident. The thread that starts
servers is the hub's event loop, which ends only when the hub closes or the kernel dies.

It runs as a script (``-I -S``: no site, no package import; only ``os``, ``sys`` and
``ctypes``), so it adds ~20 ms to a server's start. ``command`` resolves the executable
first, against the server's PATH and cwd, so a missing one fails as it always did
(``FileNotFoundError`` naming it) with no process started.
"""

from __future__ import annotations

import os
import sys

# Linux's numbers (<linux/prctl.h>, signal(7)): the tether runs only there, and importing
# ``signal`` (with ``enum``) would double its start-up.
PR_SET_PDEATHSIG = 1
SIGTERM = 15


def command(executable: str, args: list[str], env: dict[str, str], cwd: str) -> tuple[str, list[str]]:
    """The (command, args) that start ``executable`` tethered to this process (as they are
    off Linux). ``env`` is the server's whole environment; ``cwd`` its working directory."""
    if sys.platform != "linux":
        return executable, args
    import errno
    import shutil

    # A name with a slash counts from the server's cwd, and so does a relative PATH entry.
    found = executable if os.sep in executable else shutil.which(executable, path=env.get("PATH", os.defpath))
    path = os.path.join(cwd, found) if found is not None else None
    if path is None or not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), executable)
    if not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), executable)
    return sys.executable, ["-I", "-S", __file__, str(os.getpid()), path, executable, *args]


def main(argv: list[str]) -> None:
    parent, path, args = int(argv[1]), argv[2], argv[3:]  # args[0] is the server's argv[0]
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        failed = libc.prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) != 0 and f"errno {ctypes.get_errno()}"
    except (ImportError, OSError, AttributeError) as exc:  # no ctypes, no libc: start untied
        failed = str(exc)
    if failed:
        sys.stderr.write(
            f"tether: could not arm the parent-death signal ({failed}); the server is not tied\n"
        )
    if os.getppid() != parent:  # the kernel died before the signal was armed
        sys.exit(1)
    try:
        os.execv(path, args)
    except OSError as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv)
