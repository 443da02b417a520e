"""Print the requirements of coderag's core and one extra, one a line, read from pyproject.toml:
``python3 deploy/requirements_of.py pyproject.toml parser``. The images install these from the
wheelhouse before the code is copied in, so a code change does not reinstall any wheel."""

from __future__ import annotations

import re
import sys
import tomllib


def requirements(pyproject: str, extra: str) -> list[str]:
    """Core requirements plus those of ``extra`` (``core`` for none), self-references expanded."""
    with open(pyproject, "rb") as fh:
        project = tomllib.load(fh)["project"]
    extras = project["optional-dependencies"]
    out, todo = list(project["dependencies"]), [] if extra == "core" else [extra]
    while todo:
        for spec in extras[todo.pop()]:
            own = re.fullmatch(r"coderag\[(.+)\]", spec)
            if own:
                todo += own.group(1).split(",")
            elif spec not in out:
                out.append(spec)
    return out


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1], sys.argv[2])))
