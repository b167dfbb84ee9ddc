"""How to add an optional extra where spanfix actually is: spanfix is installed from its clone (no
package index has it), so a hint that names an index (`pip install 'spanfix[s3]'`) would install
whatever that index holds under the name. The hint names this interpreter and the clone, editable,
so that the environment `make demo` made stays editable."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path


def install_hint(extra: str) -> str:
    """The command that adds `extra` to the environment spanfix runs in."""
    clone = Path(__file__).resolve().parents[2]
    python = shlex.quote(sys.executable or "python")
    if (clone / "pyproject.toml").is_file():  # an editable install: the clone is right here
        return f"{python} -m pip install -e {shlex.quote(f'{clone}[{extra}]')}"
    return f"{python} -m pip install -e 'PATH-TO-YOUR-SPANFIX-CLONE[{extra}]'"
