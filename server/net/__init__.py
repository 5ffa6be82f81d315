"""The IPROTO ports: the listening sockets and the ordered shutdown, one
connection's shell around the sans-I/O codec, reading under the buffer
budget, the watchdog's time-outs, connection logs, and the Tarantool 1.5
port.

Bytes in, requests to `core`, replies out: no queue rule lives here.

- `connection.py`: One IPROTO client connection
- `connlog.py`: The log lines of one connection's life
- `legacy15.py`: The Tarantool 1.5 port
- `listener.py`: The listening sockets and the ordered graceful shutdown
- `reading.py`: Reading one connection under the buffer budget (limits.py)
- `replies.py`: One connection's replies of this loop turn, in the order they go out
- `shell.py`: The connection shell both ports share
- `watchdog.py`: How long a connection may keep its slot without speaking
"""
