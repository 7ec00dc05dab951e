"""Numbers and verdicts in words, for the CLI and the app."""
