"""`python -m analysis analyze|plot|kaplan ...`: the analysis commands without the simulator."""

import sys

from analysis.cli import main

sys.exit(main())
