"""``python -m millimcp.lab.loadgen``: one client process of a multi-process bench run."""

import os
import sys

from millimcp.lab.loadgen.child import child_main

if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(child_main())
