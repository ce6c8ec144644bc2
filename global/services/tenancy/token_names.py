"""Names a token may not be given: those of the server's own tokens, or that could pass for
them in the audit trail (where the name is what a reader sees first)."""

from __future__ import annotations

import unicodedata

from volcano_global.errors import Invalid

# The configured admin token is `admin`, the generated one `bootstrap-admin`; agent tokens are
# `agent:<cluster>`, job tokens `job <namespace>/<name>`; `system:` is Kubernetes' own.
RESERVED_NAMES = frozenset({"admin", "bootstrap-admin"})
RESERVED_PREFIXES = ("system:", "agent:", "job ", "job:")


def check_token_name(name: str) -> None:
    """Refuse (422, naming the rule) a reserved name, compared as a reader would see it: case,
    width and surrounding spaces aside; invisible and control characters are refused too."""
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in name):
        raise Invalid.one("name", "must not hold control or invisible characters")
    seen = unicodedata.normalize("NFKC", name).strip().casefold()
    if seen in RESERVED_NAMES or seen.startswith(RESERVED_PREFIXES):
        raise Invalid.one(
            "name",
            f"{name!r} is reserved: 'admin', 'bootstrap-admin' and names starting with "
            "'system:', 'agent:' or 'job ' are the server's own tokens",
        )
