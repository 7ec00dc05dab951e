"""Calibration: measure a machine (``bench``), parse published or nccl-tests numbers
(``parsers``), and fit perfmodel's efficiency forms into a profile (``fit``).
See docs/calibration.md."""
