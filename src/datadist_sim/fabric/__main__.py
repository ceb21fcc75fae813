"""``python -m datadist_sim.fabric``: serve one world (what an on-demand start runs)."""

import sys

from datadist_sim.fabric.host.service import main

sys.exit(main())
