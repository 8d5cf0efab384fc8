"""``python -m predictor``: the ``predict`` command without the proxy's CLI."""

import sys

from predictor.cli import main

sys.exit(main())
