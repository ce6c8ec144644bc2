"""Kubernetes resource quantities ("500m", "64Gi", "1e3") as exact numbers."""

from __future__ import annotations

import re
from decimal import Decimal, DecimalException

_SUFFIXES = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
# Kubernetes holds a quantity in 64 bits (at most about 9.2e18 of its unit); anything larger
# is refused before it is multiplied or summed.
LARGEST = Decimal("1e19")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse_quantity(value: object) -> Decimal:
    """Parse a quantity; raises ValueError with a short reason."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError("must be a quantity such as 4, 500m or 64Gi")
    text = str(value).strip()
    match = _QUANTITY.fullmatch(text)
    if not match or match.group(1) in {".", "+", "-", ""}:
        raise ValueError(f"invalid quantity {text!r}")
    number, exponent, suffix = match.groups()
    try:
        result = Decimal(number + (exponent or "")) * _SUFFIXES[suffix or ""]
    except DecimalException:  # not a number, or too many digits for the context
        raise ValueError(f"invalid quantity {text!r}") from None
    if result < 0:
        raise ValueError(f"must not be negative, got {text!r}")
    if result > LARGEST:
        raise ValueError(f"too large: {text!r} (at most {LARGEST:.0e})")
    return result
