"""The application and its calls: the `App` every handler shares, the store
over the data directory, the registry from a call name to its handler, the
request-type table, the path of CALL/EVAL, a connection's session, and the
calls that exist without the queue (builtins, the queue's spaces, calls made
as a user).

It knows no socket: the ports in `net` and `web` feed it decoded requests.

- `app.py`: The application object every connection and handler shares
- `builtins.py`: Small server functions that exist without the queue
- `callas.py`: Calls made inside the server as a given user
- `dispatch.py`: The path of CALL, CALL_16 and EVAL
- `registry.py`: One way from a function name to what it binds to
- `requests.py`: The request-type table
- `session.py`: One connection's session
- `spaces.py`: The queue's spaces, readable
- `store.py`: The storage engine inside the running server
"""
