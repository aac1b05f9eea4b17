"""Reading an outbox: listing files, hashing and parsing them in worker processes, and
settling what was found into the journal (``ingest``)."""
