"""A strategy of the person's (issues 45 and 46), as the lab's tests write it into the folder
the lab runs from: past half the window, the read_file and grep results older than the last
six messages go (their calls with them)."""

DROP_READS = """
from pseudoclaude_nb.strategies import Drop, Keep, Strategy, Summarize


class DropReads(Strategy):
    \"\"\"Past half the window, the read_file and grep results but the newest go.\"\"\"

    name = "drop-reads"

    def acts_at(self, limits):
        return limits.window // 2

    def decide(self, view):
        if view.trigger in ("too_long", "manual"):
            return Summarize()
        if view.trigger != "before" or view.estimate < view.window // 2:
            return Keep()
        reads = [m.id for m in view.messages[:-6] if m.kind == "tool_result" and {"read_file", "grep"} & set(m.tools)]
        return Drop(reads) if reads else Keep()
"""
