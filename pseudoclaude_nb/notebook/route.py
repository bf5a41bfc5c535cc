"""How this kernel reaches the document the person has open: its Jupyter server and the path.

A kernel that JupyterLab or Notebook 7 started knows its notebook (``JPY_SESSION_NAME``, the
file's absolute path) and the server that started it (``JPY_PARENT_PID``); the server writes
``jpserver-<pid>.json`` (URL, token, root folder) into Jupyter's runtime folder. With the
collaboration extension (``jupyter-collaboration``, the ``[lab]`` extra) that server holds
each open notebook as a shared document the kernel can join as one more collaborator.

``find_route`` never guesses: no parent server, or a notebook outside its root, is a reason
(one line, said once by the run), not a search among other servers. The token is kept in
memory for the connection only; it is never logged or shown. No IPython here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SERVER_FILE_BYTES = 64_000  # a jpserver-*.json is a few hundred bytes


@dataclass(frozen=True)
class Route:
    """The server (``url`` ends with ``/``), its token, and the notebook's path under its root."""

    url: str
    token: str = field(repr=False)
    path: str  # relative to the server's root, with "/" separators
    file: Path  # the notebook on disk

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[4:] if self.url.startswith("http") else self.url


def find_route(notebook: str | None, env: Mapping[str, str] | None = None) -> Route | str:
    """The route to ``notebook``'s live document, or why there is none (a sentence)."""
    env = os.environ if env is None else env
    if not notebook:
        return "this kernel was not told which notebook it runs: nbclient, papermill, a console or a terminal"
    pid = env.get("JPY_PARENT_PID", "")
    if not pid.isdigit():
        return "this kernel was not started by a Jupyter server (nbclient, VS Code, or a console)"
    runtime = _runtime_dir(env)
    info_file = runtime / f"jpserver-{pid}.json"
    try:
        with info_file.open("rb") as f:
            info = json.loads(f.read(SERVER_FILE_BYTES))
    except (OSError, ValueError):
        return f"the Jupyter server that started this kernel (pid {pid}) left no readable jpserver-{pid}.json"
    url, token, root = info.get("url"), info.get("token", ""), info.get("root_dir")
    if not isinstance(url, str) or not isinstance(root, str) or not isinstance(token, str):
        return f"jpserver-{pid}.json does not name the server's URL and root folder"
    file = Path(notebook)
    if not file.is_absolute():
        file = Path(root) / file
    try:
        relative = file.resolve().relative_to(Path(root).resolve())
    except (ValueError, OSError):
        return "the notebook is outside the Jupyter server's root folder"
    return Route(url if url.endswith("/") else url + "/", token, relative.as_posix(), file)


def _runtime_dir(env: Mapping[str, str]) -> Path:
    named = env.get("JUPYTER_RUNTIME_DIR")
    if named:
        return Path(named)
    from jupyter_core.paths import jupyter_runtime_dir  # ipykernel's dependency: always there

    return Path(jupyter_runtime_dir())
