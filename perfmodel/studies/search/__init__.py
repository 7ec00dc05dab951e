"""Search rooms: layouts of one job searched, ranked and sized (search, scaling, sizing and their rules)."""
