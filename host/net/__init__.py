"""The I/O side, on trio: the TCP server and lobby, connections, the session driver, HTTP and
WebSocket, worker processes, the replay ops."""
