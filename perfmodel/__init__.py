"""perfmodel: an analytical performance and cost model of distributed AI training."""

__version__ = "0.1.0"
