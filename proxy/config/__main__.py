"""`python -m proxy.config --write docs/config.md`: render the config reference from the key table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .keys import render_markdown


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proxy.config", description="Render docs/config.md.")
    ap.add_argument("--write", type=Path, help="write the reference to this file (default: stdout)")
    args = ap.parse_args(argv)
    text = render_markdown()
    if args.write is None:
        sys.stdout.write(text)
    else:
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
