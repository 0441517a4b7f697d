"""The deploy tests import their helpers (chart, compose, run, smoke, ...) from this folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
