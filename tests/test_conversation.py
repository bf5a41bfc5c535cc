"""The conversation (SPEC §5): hooks, copies, errors and thread safety."""

from __future__ import annotations

import threading

import pytest

from pseudoclaude_nb.conversation import REPLACE_REASONS, Conversation, Hooks
from pseudoclaude_nb.errors import HookError
from pseudoclaude_nb.messages import Message, ToolCall


def run_with_timeout(fn, timeout: float = 5.0):
    """Run ``fn`` in a thread; a deadlock shows up as a timeout, not a hung test run."""
    box: dict[str, object] = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "deadlock: the call did not return (a hook ran under the lock?)"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def test_add_methods_build_the_right_messages():
    conv = Conversation()
    u = conv.add_user("hi")
    a = conv.add_assistant("hello")
    call = ToolCall(id="c1", name="read_file", arguments={"path": "x"})
    t = conv.add_assistant_tool_calls("reading", [call])
    r = conv.add_tool_result("c1", "content", is_error=True)
    assert (u.role, u.content) == ("user", "hi")
    assert (a.role, a.content) == ("assistant", "hello")
    assert t.role == "assistant" and t.tool_calls == (call,) and t.content == "reading"
    assert r.role == "user" and r.tool_result.call_id == "c1" and r.tool_result.is_error
    assert conv.messages() == [u, a, t, r]
    assert len(conv) == 4
    assert conv.last() == r


def test_initial_messages_are_copied():
    initial = [Message(role="user", content="a")]
    conv = Conversation(initial)
    initial.append(Message(role="user", content="b"))
    assert len(conv) == 1


def test_messages_returns_a_copy():
    conv = Conversation()
    conv.add_user("one")
    snapshot = conv.messages()
    snapshot.append(Message(role="user", content="sneaky"))
    snapshot.clear()
    assert len(conv) == 1
    assert conv.messages()[0].content == "one"
    assert conv.messages() is not conv.messages()


def test_hooks_called_in_registration_order_with_the_message():
    calls: list[tuple] = []
    first = Hooks(
        on_append=lambda m: calls.append(("first-append", m.id)),
        on_replace=lambda reason, msgs: calls.append(("first-replace", reason, [m.id for m in msgs])),
    )
    second = Hooks(
        on_append=lambda m: calls.append(("second-append", m.id)),
        on_replace=lambda reason, msgs: calls.append(("second-replace", reason, [m.id for m in msgs])),
    )
    conv = Conversation(hooks=[first, second])
    m1 = conv.add_user("a")
    m2 = conv.add_assistant("b")
    conv.replace("edit", [m2])
    assert calls == [
        ("first-append", m1.id),
        ("second-append", m1.id),
        ("first-append", m2.id),
        ("second-append", m2.id),
        ("first-replace", "edit", [m2.id]),
        ("second-replace", "edit", [m2.id]),
    ]


def test_add_hooks_and_remove_hooks():
    seen: list[str] = []
    hooks = Hooks(on_append=lambda m: seen.append(m.content))
    conv = Conversation()
    conv.add_user("before")
    conv.add_hooks(hooks)
    conv.add_user("during")
    conv.remove_hooks(hooks)
    conv.add_user("after")
    assert seen == ["during"]


def test_hooks_with_only_one_callback():
    seen: list[str] = []
    conv = Conversation(hooks=Hooks(on_replace=lambda r, msgs: seen.append(r)))
    conv.add_user("x")  # no on_append: nothing to call, no error
    conv.replace("compact", [])
    assert seen == ["compact"]
    assert len(conv) == 0


def test_hook_sees_the_change_and_can_read_without_deadlock():
    observed: list[tuple[int, int]] = []
    conv = Conversation()

    def on_append(message: Message) -> None:
        # Both take the conversation's lock: this deadlocks if hooks ran under it.
        observed.append((len(conv), len(conv.messages())))
        assert conv.last() == message

    def on_replace(reason: str, messages: list[Message]) -> None:
        observed.append((len(conv), len(conv.messages())))

    conv.add_hooks(Hooks(on_append=on_append, on_replace=on_replace))
    run_with_timeout(lambda: conv.add_user("a"))
    run_with_timeout(lambda: conv.add_assistant("b"))
    run_with_timeout(lambda: conv.replace("snapshot", conv.messages()[:1]))
    assert observed == [(1, 1), (2, 2), (1, 1)]


def test_readers_in_other_threads_are_not_blocked_by_a_running_hook():
    """A slow hook (an fsync) must not block readers: they take only the state lock."""
    conv = Conversation()
    seen: list[tuple[int, list[str]]] = []

    def on_append(message: Message) -> None:
        t = threading.Thread(target=lambda: seen.append((len(conv), [m.content for m in conv.messages()])))
        t.start()
        t.join(5.0)
        assert not t.is_alive(), "a reader blocked while a hook ran"

    conv.add_hooks(Hooks(on_append=on_append))
    run_with_timeout(lambda: conv.add_user("first"))
    run_with_timeout(lambda: conv.add_assistant("second"))
    assert seen == [(1, ["first"]), (2, ["first", "second"])]


def test_hook_may_change_the_conversation_reentrantly():
    conv = Conversation()
    order: list[str] = []

    def on_append(message: Message) -> None:
        order.append(message.content)
        if message.content == "question":
            conv.add_assistant("answer from hook")

    conv.add_hooks(Hooks(on_append=on_append))
    run_with_timeout(lambda: conv.add_user("question"))
    assert [m.content for m in conv.messages()] == ["question", "answer from hook"]
    assert order == ["question", "answer from hook"]


def test_raising_hook_raises_hook_error_with_cause():
    boom = RuntimeError("disk on fire")

    def bad(message: Message) -> None:
        raise boom

    later: list[str] = []
    conv = Conversation(hooks=[Hooks(on_append=bad), Hooks(on_append=lambda m: later.append(m.id))])
    with pytest.raises(HookError) as info:
        conv.add_user("hello")
    err = info.value
    assert err.__cause__ is boom
    text = str(err)
    assert "hook" in text and "disk on fire" in text
    assert "append" in text
    # The change itself is kept in memory (the run stops; the state is not rolled back).
    assert [m.content for m in conv.messages()] == ["hello"]
    # A later hook is not called after one failed.
    assert later == []


def test_raising_replace_hook_names_the_reason():
    def bad(reason: str, messages: list[Message]) -> None:
        raise OSError("no space")

    conv = Conversation(hooks=Hooks(on_replace=bad))
    conv.add_user("a")
    with pytest.raises(HookError, match=r"replace \(compact\).*no space") as info:
        conv.replace("compact", [])
    assert isinstance(info.value.__cause__, OSError)
    assert len(conv) == 0


def test_replace_with_unknown_reason_raises_and_changes_nothing():
    seen: list[str] = []
    conv = Conversation(hooks=Hooks(on_replace=lambda r, m: seen.append(r)))
    conv.add_user("keep me")
    with pytest.raises(ValueError, match="bogus"):
        conv.replace("bogus", [])
    assert [m.content for m in conv.messages()] == ["keep me"]
    assert seen == []


@pytest.mark.parametrize("reason", ["snapshot", "compact", "rollover", "resync", "edit"])
def test_every_spec_reason_is_accepted(reason):
    assert reason in REPLACE_REASONS
    conv = Conversation()
    conv.add_user("x")
    new = [Message(role="user", content="y")]
    assert conv.replace(reason, new) == new
    assert conv.messages() == new


def test_replace_hook_gets_a_copy():
    holder: dict[str, list[Message]] = {}
    conv = Conversation(hooks=Hooks(on_replace=lambda r, msgs: holder.setdefault("msgs", msgs)))
    new = [Message(role="user", content="a")]
    conv.replace("edit", new)
    holder["msgs"].append(Message(role="user", content="hook mutates its list"))
    new.append(Message(role="user", content="caller mutates its list"))
    assert [m.content for m in conv.messages()] == ["a"]


def test_concurrent_appends_keep_every_message():
    n_threads, k = 8, 200
    hook_count = [0]
    hook_lock = threading.Lock()

    def on_append(message: Message) -> None:
        with hook_lock:
            hook_count[0] += 1

    conv = Conversation(hooks=Hooks(on_append=on_append))
    barrier = threading.Barrier(n_threads)

    def worker(t: int) -> None:
        barrier.wait()
        for i in range(k):
            conv.add_user(f"{t}:{i}")
            len(conv)
            conv.messages()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    msgs = conv.messages()
    assert len(msgs) == n_threads * k == len(conv)
    assert hook_count[0] == n_threads * k
    assert len({m.id for m in msgs}) == n_threads * k
    # Each thread's own messages stay in its order.
    for t in range(n_threads):
        mine = [int(m.content.split(":")[1]) for m in msgs if m.content.startswith(f"{t}:")]
        assert mine == list(range(k))


def test_hooks_see_changes_in_conversation_order_under_concurrency():
    """Deterministic interleaving: thread A's append waits in a hook while B appends."""
    order: list[str] = []
    a_in_hook = threading.Event()
    b_done = threading.Event()

    def slow_first(message: Message) -> None:
        if message.content == "A":
            a_in_hook.set()
            b_done.wait(0.5)  # B may overtake A here; a fixed conversation serialises them

    def record(message: Message) -> None:
        order.append(message.content)

    conv = Conversation(hooks=[Hooks(on_append=slow_first), Hooks(on_append=record)])
    ta = threading.Thread(target=lambda: conv.add_user("A"))
    ta.start()
    assert a_in_hook.wait(5)
    tb = threading.Thread(target=lambda: (conv.add_user("B"), b_done.set()))
    tb.start()
    tb.join(5)
    ta.join(5)
    assert not ta.is_alive() and not tb.is_alive()
    assert [m.content for m in conv.messages()] == order
