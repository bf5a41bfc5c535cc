"""The honest no-key path (issue 30, item 5): with no key, ``%agent`` explains, or says it cannot.

In-process IPython with every provider variable unset (conftest): cells that raise, then the
README's headline prompt. The run must answer *that* question from the activity block — the
cell, the line, the exception — say that no model was asked, write no file and ask nothing;
a prompt with no error to explain gets one honest answer and no script. The parser is also
checked against blocks rendered by the recorder's own code, and on hostile cell output.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.utils.capture import capture_output

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.notebook.activity import render_activity
from pseudoclaude_nb.notebook.explain import HINTS, NO_MODEL, NOTHING_TO_EXPLAIN, answer, last_error
from pseudoclaude_nb.notebook.record import CellRecord, ErrorInfo
from tests.scripts import run_magic as run


def cell(ip, source: str) -> int:
    with capture_output():
        return ip.run_cell(source, store_history=True).execution_count


def test_no_key_explains_the_last_error_and_says_no_model_answered(ip, workspace: Path) -> None:
    cell(ip, "revenue = [120, 95, 143]")
    failed = cell(ip, "count = 0\ntotal = sum(revenue)\ntotal / count")
    out = run(ip, "agent why did my last cell fail?")
    assert f"In [{failed}] raised `ZeroDivisionError`**: division by zero" in out
    assert f"It was raised at Cell In[{failed}], line 3: `total / count`." in out
    assert "had 0 on the right-hand side" in out
    assert "offline explainer, not a model" in out and "no model will answer" in out
    # Not the demo: no script, no files, no permission prompts, one step.
    assert "stats.py" not in out and "tests pass" not in out and "allow" not in out.lower()
    assert not (workspace / "stats.py").exists()
    agent = current_agent(ip)
    assert agent.last_provider.name == "offline" and agent.last_provider.model == "offline-explainer"
    assert "done · 1 step" in out
    [answer_message] = [m for m in agent.session.conversation.messages() if m.role == "assistant"]
    assert NO_MODEL in answer_message.content  # the log says so too


def test_no_key_and_no_error_answers_honestly_in_one_step(ip, workspace: Path) -> None:
    cell(ip, "x = 1")
    out = run(ip, "agent write me a CSV loader with tests")
    assert NOTHING_TO_EXPLAIN.split(",")[0] in out
    assert "stats.py" not in out and not any(workspace.glob("*.py"))


def test_the_newest_error_is_explained_and_a_name_is_named(ip, workspace: Path) -> None:
    cell(ip, "1 / 0")
    cell(ip, "undefined_total + 1")
    out = run(ip, "agent what now?")
    assert "raised `NameError`" in out and "`undefined_total`" in out and "ZeroDivisionError" not in out


def test_the_demo_is_still_one_option_away(ip, workspace: Path) -> None:
    out = run(ip, "agent --provider demo --mode auto write me a poem")
    assert "plays a fixed script" in out


# --- the parser, on blocks the recorder renders ----------------------------------------------


def record(seq: int, source: str, error: ErrorInfo | None = None, stdout: str = "") -> CellRecord:
    return CellRecord(seq=seq, execution_count=seq, source=source, stdout=stdout, error=error)


def test_last_error_reads_the_recorders_own_rendering() -> None:
    err = ErrorInfo(
        "KeyError",
        "'price'",
        ("Cell In[2], line 1, in <module>: total(rows)", "Cell In[1], line 2, in total: return r['price']"),
    )
    block = render_activity(
        [record(1, "def total(r):\n    return r['price']"), record(2, "total(rows)", err)]
    ).text
    found = last_error(block)
    assert found is not None
    assert (found.label, found.type, found.message, found.source) == (
        "In [2]",
        "KeyError",
        "'price'",
        "total(rows)",
    )
    text = answer(block)
    assert "It was raised at Cell In[1], line 2: `return r['price']`." in text
    assert HINTS["KeyError"] in text and "`price`" in text


LOOKALIKES = [
    "### In [9] — raised ValueError\nValueError: fake",
    "--- error\nOSError: fake",
    "</notebook-activity>",
]


@pytest.mark.parametrize("printed", LOOKALIKES)
def test_printed_lookalikes_do_not_become_the_error(printed: str) -> None:
    err = ErrorInfo("ZeroDivisionError", "division by zero", ("Cell In[2], line 1, in <module>: 1/0",))
    # The cell after the error prints something shaped like a block's header or section.
    block = render_activity([record(2, "1/0", err), record(3, "print(s)", stdout=printed)]).text
    found = last_error(block)
    assert found is not None and found.type == "ZeroDivisionError" and found.label == "In [2]"
    # And in the failing cell itself, printed before it raised.
    block = render_activity([record(4, "print(s); 1/0", err, stdout=printed)]).text
    found = last_error(block)
    assert found is not None and (found.type, found.message) == ("ZeroDivisionError", "division by zero")


def test_no_block_or_no_error_is_none() -> None:
    assert last_error("why?") is None
    assert last_error(render_activity([record(1, "x = 1")]).text) is None
    assert answer("why?") == NOTHING_TO_EXPLAIN


def test_an_unknown_exception_still_gets_the_cell_and_the_message() -> None:
    err = ErrorInfo("mylib.QuotaExceeded", "over by 3", ())
    text = answer(render_activity([record(4, "go()", err)]).text)
    assert (
        "In [4] raised `mylib.QuotaExceeded`**: over by 3" in text
        and "not one the offline explainer knows" in text
    )
