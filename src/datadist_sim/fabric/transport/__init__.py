"""The fabric's transport: what both ends share to talk. Addresses and the on-demand start, the
authenticated framed socket and its handshake, the message codec, descriptor passing, the memory files
both ends map, the client's channels and the fabric's loop that serves every connection."""
