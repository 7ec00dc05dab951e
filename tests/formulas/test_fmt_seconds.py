"""``fmt.seconds`` picks its unit after rounding to the three digits it shows."""

import pytest

from perfmodel.present import fmt


@pytest.mark.parametrize(("x", "text"), [
    (0.9999e-3, "1 ms"), (0.99999, "1 s"), (0.99999e-6, "1 us"), (-0.9999e-3, "-1 ms"),
    (1.5e-3, "1.5 ms"), (0.5, "500 ms"), (0.0, "0 s"), (2.5e-9, "2.5 ns"),
])
def test_a_value_just_under_a_unit_reads_in_that_unit(x, text):
    assert fmt.seconds(x) == text
