from decimal import Decimal

import pytest

from volcano_global.jobspec.quantity import parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("500m", Decimal("0.5")),
        ("64Gi", 64 * 2**30),
        ("1.5G", Decimal("1.5e9")),
        ("1e3", 1000),
        (8, 8),
        ("2Ki", 2048),
    ],
)
def test_quantities(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Zi", "--1", "-1", None, True, "1.2.3"])
def test_invalid_quantities(text: object) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)
