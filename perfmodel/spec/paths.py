"""Where perfmodel's own files live: the package's data, and the project's hardware specs and
calibration profiles beside it. The only module that derives paths from its own location;
every file it names is the project's, never one a user names."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
DATA_DIR = PACKAGE_DIR / "data"
"""Model presets, published runs, the example scenario and the validation notes."""
PROJECT_DIR = PACKAGE_DIR.parent
"""The checkout: ``hardware/``, ``calibration/profiles/`` and ``app/`` sit here."""
