"""The citation check (G4): every ``FILE: path:start-end`` in an answer must name a file of the
index, lie within the file, and lie inside a unit that was put in the prompt."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from coderag.schemas import Citation

ANCHOR = re.compile(r"FILE:\s*`?([^\s:`]+):(\d+)\s*-\s*(\d+)`?")
"""An anchor as the prompts ask for it."""

INVALID_MARK = "[citation removed: not in the retrieved code]"
"""What replaces an anchor that failed the check in the answer text."""


@dataclass
class Checked:
    """The answer text with bad anchors replaced, and the citations that passed."""

    text: str
    valid: list[Citation]
    invalid: int


def check(
    answer: str,
    context: list[tuple[str, int, int]],
    file_lines: Callable[[str], int | None],
) -> Checked:
    """Check each anchor of ``answer`` against the prompt's units (file, start, end)."""
    valid: list[Citation] = []
    invalid = 0

    def judge(m: re.Match[str]) -> str:
        nonlocal invalid
        path, start, end = m.group(1), int(m.group(2)), int(m.group(3))
        lines = file_lines(path)
        ok = (
            lines is not None
            and 1 <= start <= end <= lines
            and any(f == path and s <= start and end <= e for f, s, e in context)
        )
        if not ok:
            invalid += 1
            return INVALID_MARK
        cite = Citation(file=path, start_line=start, end_line=end)
        if cite not in valid:
            valid.append(cite)
        return m.group(0)

    text = ANCHOR.sub(judge, answer)
    return Checked(text=text, valid=valid, invalid=invalid)
