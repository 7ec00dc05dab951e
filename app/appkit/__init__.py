"""Shared pieces of the Streamlit app: the job editor, cached model calls, charts."""
