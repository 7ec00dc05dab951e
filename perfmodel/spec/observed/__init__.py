"""What was observed of a real run: training logs, measured runs and profiler traces, read into
the schema's terms (see README.md)."""
