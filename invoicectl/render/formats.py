"""The machine-readable forms every command writes: one JSON document, or CSV rows."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any


def to_json(data: Any) -> str:
    """What invoicectl prints for ``--json``."""
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)


def to_csv(records: Sequence[dict[str, Any]], fields: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(fields), extrasaction="ignore")
    writer.writeheader()
    for record in records:
        writer.writerow({key: "" if record.get(key) is None else record[key] for key in fields})
    return buffer.getvalue()
