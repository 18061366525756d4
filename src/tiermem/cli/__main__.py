"""``python -m tiermem.cli``: the ``tiermem`` command."""

import sys

from tiermem.cli import main

sys.exit(main())
