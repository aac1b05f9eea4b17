"""Evidence for an auditor: checking the journal (``verify``), the signed archive
(``export``, ``signing``, ``manifest``) and checking an archive without a journal
(``verify_export``).

    verify         the journal's integrity, its hash chain, blobs, bodies and rows
"""
