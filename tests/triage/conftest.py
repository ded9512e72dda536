import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests/data/triage"
# The noise generator lives in bench/ (it also builds the 1 GB benchmark set).
sys.path.insert(0, str(ROOT / "bench"))
