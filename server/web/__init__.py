"""The HTTP listener (`http_listen`): the web console, /metrics and /healthz.

Everything here runs on the server's own event loop, next to the IPROTO
connections, and reads the queue's state in the loop as they do: nothing is
awaited between reading state and changing it. The console changes nothing
itself: every action is a registry call made as the logged-in user
(server/core/callas.py), so it obeys the same rights and read-only rules as IPROTO.

    listener.py   routes, start and stop, /metrics and /healthz
    auth.py       logins (the IPROTO users), session cookies, CSRF
    console.py    the console's JSON API: what it shows, what it does
    overview.py   the server, its tubes and connections, read in the loop
    rates.py      put/take/ack per second of the last minutes, sampled
    render.py     a task as JSON: its data readable
    static/       the page, its script and style (package data)
"""
