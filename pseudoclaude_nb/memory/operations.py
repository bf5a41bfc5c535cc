"""Memory operations: the model's (or ``%memory``'s) changes to the stores, validated one by one.

``parse_operations`` reads the update answer as a JSON array; ``validate_operations`` keeps
the valid ``Operation`` values and says why each invalid one is ignored. Applying them is
``MemoryManager.apply``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import InvalidOperation
from .store import (
    MAX_BODY_BYTES,
    MAX_DESCRIPTION,
    MAX_NAME,
    Level,
    MemoryType,
)


class Operation(BaseModel):
    """One change to one topic. Unknown extra fields (a model's "reason") are ignored."""

    model_config = ConfigDict(extra="ignore")

    op: Literal["create", "update", "delete"]
    level: Level
    name: str = Field(min_length=1, max_length=MAX_NAME)
    description: str | None = Field(None, min_length=1, max_length=MAX_DESCRIPTION)
    type: MemoryType | None = None
    body: str | None = None

    @field_validator("name", "description", mode="before")
    @classmethod
    def _one_line(cls, value: Any) -> Any:
        return " ".join(value.split()) if isinstance(value, str) else value

    @field_validator("body")
    @classmethod
    def _short_body(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode("utf-8")) > MAX_BODY_BYTES:
            raise ValueError(f"body is over {MAX_BODY_BYTES} bytes; memory keeps short notes")
        return value

    @model_validator(mode="after")
    def _complete(self) -> Operation:
        if self.op == "create":
            missing = [f for f in ("description", "type", "body") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"create needs {', '.join(missing)}")
        if self.op == "update" and self.description is None and self.type is None and self.body is None:
            raise ValueError("update changes nothing: give description, type or body")
        return self


def validate_operations(raw: Iterable[Any]) -> tuple[list[Operation], list[str]]:
    """The valid operations, and one line per invalid one saying why it was ignored."""
    valid, ignored = [], []
    for i, item in enumerate(raw, 1):
        try:
            if not isinstance(item, dict):
                raise InvalidOperation(f"not an object: {json.dumps(item, ensure_ascii=False)[:80]}")
            valid.append(Operation.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'operation'}: {e['msg']}" for e in exc.errors()
            )
            ignored.append(f"operation {i} ({_label(item)}): {problems}")
        except InvalidOperation as exc:
            ignored.append(f"operation {i}: {exc}")
    return valid, ignored


def _label(item: dict[str, Any]) -> str:
    return f"{item.get('op', '?')} {item.get('level', '?')}/{item.get('name', '?')}"


# Words of the update instructions around an empty array: the model repeated them.
INSTRUCTION_ECHOES = ("when nothing changes", "json array of operations")


def parse_operations(text: str) -> list[Any]:
    """The JSON array in a model's answer (fences and chatter around it are tolerated)."""
    start, end = text.find("["), text.rfind("]")
    obj_start = text.find("{")
    if obj_start != -1 and (start == -1 or obj_start < start):
        # {"operations": [...]} is a common wrapping.
        try:
            data = json.loads(text[obj_start : text.rfind("}") + 1])
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("operations"), list):
            return data["operations"]
    if start == -1 or end < start:
        raise InvalidOperation(f"the answer holds no JSON array of operations: {text.strip()[:120]!r}")
    try:
        data = json.loads(text[start : end + 1])
    except ValueError as exc:
        raise InvalidOperation(f"the answer's operations are not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise InvalidOperation("the answer's operations are not a JSON array")
    if not data and any(echo in text.lower() for echo in INSTRUCTION_ECHOES):
        # Issue 32: a small model echoed "… and [] when nothing changes"; that [] is the
        # instruction's, not an answer.
        raise InvalidOperation(
            f"the answer echoes the instructions instead of answering: {text.strip()[:120]!r}"
        )
    return data
