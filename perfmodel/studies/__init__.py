"""Questions asked of the engine: search, scaling, sizing, validation."""
