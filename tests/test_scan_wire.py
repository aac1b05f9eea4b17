"""A worker's answers cross the pipe as plain tuples (``scanned.to_wire``), not named tuples,
which pickle and unpickle through Python-level code each (issue 13: 0.45 s of a first scan's
20,000 answers); this process makes the very same ``ScannedFile`` again."""

from __future__ import annotations

import pickle

from invoicectl.scan.scanned import ScannedFile, StatKey, from_wire, to_wire

_READ = ScannedFile(
    "/outbox/A-1.xml",
    "A-1.xml",
    "ab" * 32,
    1234,
    invoice_id="A-1",
    facts_json='{"invoice_id": "A-1"}',
    columns=("Invoice", "0088", "7300010000001", None),
    stored=b"\x04\x22\x4d\x18packed",
    codec="lz4",
    stat=StatKey(1234, 1, 2, 3, 4),
)
_REFUSED = ScannedFile("/outbox/b.xml", "b.xml", reason="the file is empty (0 bytes)")


def test_an_answer_crosses_as_plain_tuples_and_comes_back_the_same() -> None:
    for answer in (_READ, _REFUSED, _READ._replace(stat=None)):
        wire = to_wire(answer)
        assert type(wire) is tuple
        assert answer.stat is None or type(wire[-1]) is tuple
        pickled = pickle.dumps([wire], protocol=pickle.DEFAULT_PROTOCOL)
        assert b"ScannedFile" not in pickled and b"StatKey" not in pickled
        again = from_wire(pickle.loads(pickled)[0])
        assert again == answer
        assert type(again) is ScannedFile
        assert again.stat is None or type(again.stat) is StatKey
        assert again.stat == answer.stat
