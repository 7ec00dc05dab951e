"""Observed rooms: the model held against measured runs (validation, error bands, anchors, diagnosis, traces read in)."""
