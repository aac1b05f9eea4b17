"""Sending: one run of ``invoicectl send`` from lock to summary (``runner``), and the
paced, concurrent, write-ahead send loop (``sender``)."""
