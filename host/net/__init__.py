"""The I/O side, on trio: the TCP server and lobby, connections, the session driver, HTTP and
WebSocket, worker processes, the replay ops; and the client side of the TCP protocol
(:mod:`host.net.client`, for the tools and the plugin kit)."""
