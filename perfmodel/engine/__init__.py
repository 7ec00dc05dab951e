"""The one place that combines the formulas, vectorised over layouts."""
