"""Where perfmodel's own files live: the package's data, the hardware specs and the calibration
profiles. The only module that derives paths from its own location; every file it names is the
project's, never one a user names. Installed from a wheel, the specs are the copy the build put in
``perfmodel/data/hardware/`` (setup.py), and the profiles are the ``calibration`` package's; in a
checkout (or an editable install) they are ``hardware/`` and ``calibration/profiles/``, where
people edit them. Nothing outside the package or the checkout is read."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
DATA_DIR = PACKAGE_DIR / "data"
"""Model presets, published runs, the example scenario and the validation notes."""
PROJECT_DIR = PACKAGE_DIR.parent
"""The checkout (or, installed, site-packages): ``hardware/``, ``calibration/`` and ``app/`` sit here."""
SHIPPED_HARDWARE_DIR = DATA_DIR / "hardware"
"""The wheel's copy of ``hardware/`` (absent in a checkout)."""
IN_CHECKOUT = (PROJECT_DIR / "pyproject.toml").is_file()
"""Run from the source tree (or an editable install of it), not from an installed wheel."""
HARDWARE_SPECS_DIR = PROJECT_DIR / "hardware" if IN_CHECKOUT else SHIPPED_HARDWARE_DIR
"""The hardware catalogue: ``<id>.yaml`` per system."""
PROFILES_DIR = PROJECT_DIR / "calibration" / "profiles"
"""The calibration profiles, ``<hardware-id>.yaml`` (package data of ``calibration``, installed beside
``perfmodel``)."""
