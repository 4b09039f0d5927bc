"""``python -m memscope ARGS`` runs the ``memscope`` command line (same as ``memscope ARGS``)."""

import sys

from ._locate import exec_cli

if __name__ == "__main__":
    try:
        exec_cli(sys.argv[1:])
    except RuntimeError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
