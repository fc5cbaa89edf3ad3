"""`python -m benchmarks list | run [NAME ...] | report`; see benchmarks/runner.py."""

import sys

from benchmarks.runner import main

sys.exit(main())
