"""The agent of one kernel, as explicit parts around one composition root.

- ``core.Agent`` — the root: the current session (new, resume, continue) and the run:
  ``plan_run`` → ``Runner`` → memory update; ``%compact``'s entry points.
- ``plan`` — ``RunPlan``, the frozen decisions of one run (config, provider, context
  settings, strategy, system sections, tools, memory index, notebook block, notices), and
  ``plan_run``, the one function that makes it; ``%context`` makes a dry one.
- ``surface`` — ``RunSurface``: the tools and system sections a run offers, MCP servers.
- ``memory`` — ``RunMemory``: the memory index a run carries and the update after it.
- ``notebook`` — ``NotebookActivity``: the cells a run reports, and its first message.
- ``window`` — ``AgentWindow``: windows learned from servers, said once.
- ``session`` — ``ActiveSession``: the current session's log, conversation and context.
- ``views`` — what ``%context`` shows of a dry plan or of the last request sent.
"""

from .core import Agent
from .memory import MEMORY_WAIT_SECONDS
from .notebook import NOTEBOOK_IMAGES
from .plan import RunPlan, plan_run
from .session import ActiveSession

__all__ = ["MEMORY_WAIT_SECONDS", "NOTEBOOK_IMAGES", "ActiveSession", "Agent", "RunPlan", "plan_run"]
