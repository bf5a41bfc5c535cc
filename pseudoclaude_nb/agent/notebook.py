"""The notebook side of a run: the cells run since the previous run, as the block that begins
the run's user message, with the newest images those cells displayed (issue 13, issue 14).

``NotebookActivity`` is one part of the agent: it reads the notebook host and the settings,
and is told the session whose cells it reports. Cells marked ``agent-skip`` are recorded
without anything sendable and only counted here; ``skip_counts`` (``%agent --skip-cells``)
leaves more out of one run's block.
"""

from __future__ import annotations

from dataclasses import replace

from ..config import PseudoClaude
from ..messages import ImagePart, Message, NotebookMark
from ..notebook import ActivityBlock, CellRecord, NotebookHost, cells_for_run, render_activity
from ..notebook.activity import split_skipped
from ..redact import Redactor
from ..session import images
from .session import ActiveSession

# issue-14: images of notebook cells the first message of a run shows the model, newest last.
NOTEBOOK_IMAGES = 4


class NotebookActivity:
    """What the agent reports of the notebook: ``block`` and a run's first message."""

    def __init__(self, settings: PseudoClaude, notebook: NotebookHost | None) -> None:
        self.settings = settings
        self.notebook = notebook
        # Execution counts the next run's block leaves out (``%agent --skip-cells``): set by the
        # magic for one run, read by ``block`` (and so by ``%context`` meanwhile).
        self.skip_counts: frozenset[int] = frozenset()

    def _run_cells(self, active: ActiveSession | None) -> tuple[list[CellRecord], int]:
        """The cells the next run of ``active`` may show, oldest first, and how many it skips."""
        if self.notebook is None:
            return [], 0
        seen = active.notebook_seen if active is not None else None
        return split_skipped(cells_for_run(self.notebook.cells.records(), seen), self.skip_counts)

    def block(self, active: ActiveSession | None) -> ActivityBlock | None:
        """The cells the next run of ``active`` would report.

        Redacted here, before anything sends or writes it: a key typed into a cell is not
        the model's business, and the request is not redacted elsewhere.
        """
        if self.notebook is None:
            return None
        cells, skipped = self._run_cells(active)
        block = render_activity(
            cells, budget_bytes=max(self.settings.notebook_context_bytes, 500), skipped=skipped
        )
        if block.text and self.settings.redact_secrets:
            redactor = Redactor()
            block = replace(
                block,
                text=redactor.text(block.text),
                cells=tuple(replace(c, text=redactor.text(c.text)) for c in block.cells),
            )
        return block

    def first_message(self, prompt: str, block: ActivityBlock | None, active: ActiveSession) -> Message:
        """The run's user message; the block's cells count as reported to ``active`` from now on."""
        if block is None:
            return Message(role="user", content=prompt)
        pictures = self._cell_images(block, active)
        active.notebook_seen = max(block.last_seq, self.notebook.cells.last_seq if self.notebook else 0)
        if not block.text:
            return Message(role="user", content=prompt)
        return Message(
            role="user",
            content=f"{block.text}\n\n{prompt}",
            notebook=NotebookMark(chars=len(block.text), cells=block.shown),
            parts=tuple(pictures),
        )

    def _cell_images(self, block: ActivityBlock, active: ActiveSession) -> list[ImagePart]:
        """The images the block's cells displayed (the newest few), stored in the session (issue-14)."""
        if self.notebook is None or not block.shown:
            return []
        cells = self._run_cells(active)[0][-block.shown :]
        raw = [picture for cell in cells for picture in cell.images][-NOTEBOOK_IMAGES:]
        parts = []
        for data, media_type in raw:
            try:
                parts.append(images.store(active.writer.dir, data, media_type))
            except (images.ImageError, OSError):
                continue  # the block's text already names the image; it just is not sent
        return parts
