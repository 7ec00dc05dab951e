"""The one error type users see: a field name and a reason, on one line."""


class InputError(ValueError):
    """Invalid user input. ``str(err)`` is ``"<field>: <reason>"`` on one line."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


def pydantic_message(exc, prefix: str = "") -> str:
    """Turn a pydantic ValidationError into one line naming the first bad field."""
    errors = exc.errors()
    parts = []
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
        field = f"{prefix}{loc}" if loc else (prefix.rstrip(".") or "input")
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if not loc and not prefix:
            parts.append(msg)
            continue
        if err.get("type") == "extra_forbidden":
            msg = "unknown field (check the spelling)"
        parts.append(f"{field}: {msg}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more
