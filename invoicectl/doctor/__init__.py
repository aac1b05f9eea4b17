"""``invoicectl doctor``: can a run work here, and if not, what to fix first.

Each check is one plain ``Check`` (``checks``): the settings and the key (``local``), GoRoute's
answers (``remote``: the base URL, the key, the clock), the journal, its lock and the disk
(``local``); ``run.diagnose`` makes them in order and ``Diagnosis`` says what they come to.
Nothing here prints, exits or changes a file; the package imports none of its modules.
"""
