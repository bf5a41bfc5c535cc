"""``run_python``'s executor: runs code in the notebook's own namespace, output captured.

Like a cell: statements run, the value of a final expression is shown. It does not go
through ``shell.run_cell``, because a nested cell would publish its result to the
notebook instead of returning it to the model.
"""

from __future__ import annotations

import ast
import traceback
from collections.abc import Callable
from typing import Any

from IPython.utils.capture import capture_output

VALUE_CAP = 10_000  # a repr longer than this is cut: the model asked to run code, not to dump data


def python_executor(shell: Any) -> Callable[[str], str]:
    def run(code: str) -> str:
        namespace = shell.user_ns
        parts: list[str] = []
        with capture_output(display=False) as captured:
            try:
                tree = ast.parse(code, "<run_python>", "exec")
                last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                exec(compile(tree, "<run_python>", "exec"), namespace)
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), "<run_python>", "eval"), namespace)
                    if value is not None:
                        parts.append(repr(value)[:VALUE_CAP])
            except Exception as exc:
                parts.append("".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3)))
        text = "".join([captured.stdout, captured.stderr, *parts]).rstrip()
        return text or "(no output)"

    return run
