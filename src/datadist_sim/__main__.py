"""``python -m datadist_sim`` is the ``datadist-sim`` command."""

import sys

from datadist_sim.cli import main

sys.exit(main())
