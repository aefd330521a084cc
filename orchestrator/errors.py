"""User-facing input errors: name the field, the value and the fix; exit code 2."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class InputError(Exception):
    """Bad user input, detected before anything is launched or written."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def describe_validation_error(err: ValidationError, source: str) -> str:
    """One line per problem: `source: field.path: message (got: value)`."""
    lines = []
    for e in err.errors():
        # discriminated unions add the tag to the location (workload.gpt2.steps): drop it
        loc = tuple(p for p in e["loc"] if p not in ("gpt2", "resnet", "function-after[_finite(), float]"))
        got = e.get("input")
        shown = repr(got) if not isinstance(got, dict) else "{...}"
        if len(shown) > 60:
            shown = shown[:57] + "..."
        hint = ""
        if e["type"] == "extra_forbidden":
            hint = " (remove it or check its spelling; `hpt schema` lists the allowed keys)"
        lines.append(f"{source}: {_path(loc)}: {e['msg']} (got {shown}){hint}")
    return "\n".join(lines)
