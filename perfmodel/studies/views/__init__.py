"""Views of one job: what it is, where its time and memory go, and how it responds to faster parts (describe, roofline, timeline, stages, trace out, sensitivity)."""
