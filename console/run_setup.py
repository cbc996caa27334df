"""The model label and limits an audited run used, as the audit recorded them (schema v4).

Shared by `diagnose audit show` and the replay screen, so both say the same thing. Values come from the
audit file, which anyone able to write it may have edited: only numbers count as limits, and text is
neutralised before it is shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.replay import run_limits, stored_number
from console.presentation import counted
from console.safe_text import neutralize

if TYPE_CHECKING:
    from audit.rows import RunRow


def run_setup_text(run: RunRow) -> tuple[str, str]:
    """The model label and the limits a run used, in words, as the audit recorded them."""
    model = neutralize(str(run["model"]), newlines=False) if run["model"] is not None else "not recorded"
    limits = run_limits(run)
    if limits is None:
        return model, "not recorded"
    # Counts in full (never `1e+06`); only the deadline may be fractional.
    shown = {
        key: "—" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
        for key, value in limits.items()
    }
    words = [
        counted(shown["max_model_calls"], "model call"),
        counted(shown["max_total_tokens"], "token"),
        f"{shown['deadline_s']} s",
        counted(shown["max_run_bytes"], "run byte"),
    ]
    protocol = [stored_number(run["max_consecutive_no_gain"]), stored_number(run["max_protocol_violations"])]
    if any(value is not None for value in protocol):
        no_gain, violations = ("—" if v is None else str(v) for v in protocol)
        words.append(
            f"saturation after {counted(no_gain, 'no-gain result')} "
            f"or {counted(violations, 'protocol violation')}"
        )
    return model, ", ".join(words)
