"""Rendering: plain data in, rich tables, plain lines, JSON or CSV out. Nothing here
decides anything or touches the journal or the network."""
