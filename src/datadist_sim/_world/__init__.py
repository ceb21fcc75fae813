"""The simulated state: clusters, listeners, links, memory, the clock. No API parsing lives here."""
