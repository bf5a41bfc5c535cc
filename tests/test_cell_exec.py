"""``run_cell``'s executor in a real IPython shell: a cell's outputs in notebook form, bounded.

What a document cell's code produces must be what the notebook would show (streams, displays,
the last value, a traceback naming ``Cell In[n]``), in the nbformat shape the page renders, and
bounded however much the code prints; ``input()`` fails at once instead of waiting for nobody.
"""

from __future__ import annotations

import base64

import nbformat

from pseudoclaude_nb.magics.cell_exec import NO_INPUT, STREAM_HEAD, STREAM_TAIL, CellRunner

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def _runner(ip) -> CellRunner:
    return CellRunner(ip, lambda: {"agent", "compact"})


def _valid(outputs) -> None:
    """Each output passes the notebook format's own schema."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[nbformat.from_dict(dict(o)) for o in outputs])]
    nbformat.validate(nb)


def test_streams_and_the_last_value_become_outputs_with_the_cells_number(ip) -> None:
    ran = _runner(ip).run_code("print('hello')\nimport sys; print('warn', file=sys.stderr)\n6 * 7")
    kinds = [(o["output_type"], o.get("name")) for o in ran.outputs]
    assert kinds == [("stream", "stdout"), ("stream", "stderr"), ("execute_result", None)]
    result = ran.outputs[-1]
    assert result["data"]["text/plain"] == "42" and result["execution_count"] == ran.execution_count
    assert ip.user_ns["Out"][ran.execution_count] == 42 and ip.user_ns["In"][ran.execution_count].startswith(
        "print"
    )
    assert "hello" in ran.text and "--- Out" in ran.text and "42" in ran.text
    _valid(ran.outputs)


def test_an_error_is_an_error_output_with_its_traceback_naming_the_cell(ip) -> None:
    ran = _runner(ip).run_code("def f():\n    return 1 / 0\nf()")
    error = ran.outputs[-1]
    assert error["output_type"] == "error" and error["ename"] == "ZeroDivisionError"
    assert any(
        f"Cell In[{ran.execution_count}]" in line or "ZeroDivisionError" in line
        for line in error["traceback"]
    )
    assert "raised ZeroDivisionError" in ran.text and f"Cell In[{ran.execution_count}]" in ran.text
    _valid(ran.outputs)


def test_ipython_syntax_runs_as_in_a_cell(ip) -> None:
    ran = _runner(ip).run_code("!echo from-the-shell\nvalue = 5\n%time value + 1")
    assert "from-the-shell" in "".join(o.get("text", "") for o in ran.outputs if o["output_type"] == "stream")
    assert ip.user_ns["value"] == 5


def test_input_fails_at_once_with_a_sentence(ip) -> None:
    ran = _runner(ip).run_code("name = input('your name? ')")
    assert ran.outputs[-1]["output_type"] == "error" and NO_INPUT in ran.outputs[-1]["evalue"]
    assert "input() is not available" in ran.text


def test_a_cell_printing_100_mb_is_kept_bounded(ip) -> None:
    ran = _runner(ip).run_code(
        "import sys\nfor _ in range(100):\n    sys.stdout.write('y' * (1 << 20))\nprint('END')"
    )
    text = ran.outputs[0]["text"]
    assert len(text) < STREAM_HEAD + STREAM_TAIL + 1000
    assert text.rstrip().endswith("END") and "bytes omitted" in text
    assert len(ran.text) < 40_000


def test_displays_keep_their_bundles_and_images_go_to_the_model(ip, monkeypatch) -> None:
    # A kernel formats every type; this terminal shell only text unless told.
    monkeypatch.setattr(
        ip.display_formatter, "active_types", [*ip.display_formatter.active_types, "text/html"]
    )
    ran = _runner(ip).run_code(
        "from IPython.display import display, Image, HTML\n"
        f"display(Image(data={PNG!r}))\ndisplay(HTML('<b>bold</b>'))"
    )
    displays = [o for o in ran.outputs if o["output_type"] == "display_data"]
    assert base64.b64decode(displays[0]["data"]["image/png"]) == PNG
    assert displays[1]["data"]["text/html"] == "<b>bold</b>"
    assert ran.images and ran.images[0] == (PNG, "image/png")
    _valid(ran.outputs)


def test_cells_take_the_next_numbers_and_the_agent_cell_the_one_after(ip) -> None:
    runner = _runner(ip)
    start = len(ip.history_manager.input_hist_raw) - 1  # the cell "running" now
    first, second = runner.run_code("a = 1").execution_count, runner.run_code("b = 2").execution_count
    assert (first, second) == (start + 1, start + 2)
    runner.finish()
    assert ip.history_manager.input_hist_raw[start + 3] == ip.history_manager.input_hist_raw[start]
    assert runner.ran == 0


def test_package_magics_are_recognised_on_any_line(ip) -> None:
    runner = _runner(ip)
    assert runner.package_cell("x = 1\n%agent do it")
    assert runner.package_cell("  %%compact\n")
    assert not runner.package_cell("%time x = 1\n# %agent in a comment is not a call? it is text")
