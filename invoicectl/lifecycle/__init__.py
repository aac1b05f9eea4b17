"""The invoice lifecycle: which invoice may be sent, under which key, and what happened
to it. The only place an invoice changes state."""
