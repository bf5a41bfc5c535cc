"""A real ipykernel with every iopub message counted: the harness of ``bench.notebook_wire``.

``Wire.run(code)`` executes one cell and returns what the front end received: each iopub
message's size (its frames as the kernel's session serializes them: signature, header,
parent header, metadata, content, buffers) and arrival time, and the outputs a notebook
saving the cell would keep (nbclient's own output handling: display ids updated in place,
Output widgets' captured messages kept out of the cell).
"""

from __future__ import annotations

import json
import os
import queue
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass
class Cell:
    """What one executed cell put on iopub, and what a saved notebook keeps of it."""

    sizes: list[int] = field(default_factory=list)  # bytes of each iopub message
    times: list[float] = field(default_factory=list)  # monotonic arrival of each
    types: list[str] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    streamed: list[str] = field(default_factory=list)  # the text of every stream message, in order
    seconds: float = 0.0
    # The JSON bytes of the widget models this cell opened and left open, in their last state:
    # what a front end that saves widget state with the notebook keeps of them.
    widget_state_bytes: int = 0

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    def max_per_second(self) -> int:
        """The most messages in any one-second window."""
        best, start = 0, 0
        for end, t in enumerate(self.times):
            while t - self.times[start] >= 1.0:
                start += 1
            best = max(best, end - start + 1)
        return best


class Wire:
    """One kernel (the package imported from this checkout), cells run one after another."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None, package: Path | None = None) -> None:
        """``package``: the checkout whose package the kernel imports (default: this one)."""
        from jupyter_client.manager import start_new_kernel

        kernel_env = {**os.environ, **(env or {})}
        kernel_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(package or HERE.parent), kernel_env.get("PYTHONPATH", "")) if p
        )
        self.km, self.kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), env=kernel_env)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, code: str, timeout: float = 600) -> Cell:
        from nbformat.v4 import output_from_msg

        cell = Cell()
        msg_id = self.kc.execute(code)
        started = time.monotonic()
        by_display: dict[str, list[int]] = {}
        captured: set[str] = set()  # Output widgets whose msg_id is this cell's: their outputs are theirs
        comm_models: dict[str, str] = {}
        states: dict[str, dict[str, Any]] = {}  # the last state of each widget model opened here
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=timeout)
            except queue.Empty as exc:
                raise TimeoutError(f"no iopub message in {timeout} s") from exc
            cell.sizes.append(sum(len(f) for f in self.kc.session.serialize(msg)))
            cell.times.append(time.monotonic())
            kind = msg["msg_type"]
            cell.types.append(kind)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            content = msg["content"]
            if kind == "stream":
                cell.streamed.append(content["text"])
            if kind == "status" and content["execution_state"] == "idle":
                break
            if kind == "comm_open":
                comm_models[content["comm_id"]] = content["data"].get("state", {}).get("_model_name", "")
                states[content["comm_id"]] = dict(content["data"].get("state", {}))
                continue
            if kind == "comm_close":
                states.pop(content["comm_id"], None)
                continue
            if kind == "comm_msg":
                state = content["data"].get("state", {})
                if content["comm_id"] in states:
                    states[content["comm_id"]].update(state)
                if comm_models.get(content["comm_id"]) == "OutputModel" and "msg_id" in state:
                    if state["msg_id"]:
                        captured.add(content["comm_id"])
                    else:
                        captured.discard(content["comm_id"])
                continue
            if captured and kind in ("stream", "display_data", "execute_result", "error", "clear_output"):
                continue  # the front end routes these into the Output widget, not the cell
            if kind == "update_display_data":
                did = content.get("transient", {}).get("display_id")
                for i in by_display.get(did, []):
                    cell.outputs[i]["data"] = content["data"]
                    cell.outputs[i]["metadata"] = content["metadata"]
                continue
            if kind == "clear_output":
                cell.outputs.clear()
                by_display.clear()
                continue
            if kind in ("stream", "display_data", "execute_result", "error"):
                if kind == "stream" and cell.outputs and cell.outputs[-1].get("name") == content["name"]:
                    cell.outputs[-1]["text"] += content["text"]
                    continue
                out = output_from_msg(msg)
                did = content.get("transient", {}).get("display_id")
                if did:
                    by_display.setdefault(did, []).append(len(cell.outputs))
                cell.outputs.append(out)
        cell.seconds = time.monotonic() - started
        cell.widget_state_bytes = sum(len(json.dumps(v, default=str).encode()) for v in states.values())
        self.kc.get_shell_msg(timeout=timeout)
        return cell


def saved_bytes(outputs: list[dict[str, Any]]) -> int:
    """The bytes these outputs add to a saved .ipynb (nbformat's own JSON writer)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("x", outputs=[nbformat.from_dict(o) for o in outputs]))
    empty = nbformat.v4.new_notebook()
    empty.cells.append(nbformat.v4.new_code_cell("x"))
    return len(nbformat.writes(nb).encode()) - len(nbformat.writes(empty).encode())
